#!/usr/bin/env bash
# r2d2_smollm2.sh: R2D2 on SmolLM2-135M-Instruct measured end to end
# (issue 9, acceptance 9). Every step resumes: rerun the script after a kill
# and it continues where it stopped (train --resume; capture and asr resume
# their outputs; the attack is made once).
#   1. train data/r2d2-smollm2.ini into $RUN (checkpoints 0 10 25 50 100);
#   2. fixed-source GCG test cases made once on the base model (refgeo
#      attack) for the first $N_ATTACK standard val and test behaviors
#      ($GCG_STEPS steps of $GCG_WIDTH candidates: scaled down from
#      HarmBench's 500 x 512 to fit 2 cores);
#   3. refgeo asr --run-dir per checkpoint, substring classifier (HarmBench's
#      refusal list), $NEW_TOKENS new tokens: DirectRequest on the standard
#      val behaviors (trained on) and test behaviors (not trained on), and
#      the base model's GCG test cases as FixedSource;
#   4. over-refusal: the refusal rate on the project's harmless val prompts
#      (data/prompts/harmless_val.json as a prompt CSV) per checkpoint;
#   5. capture + geometry --run-dir with refusal tokens "I" and "Sorry" (RD
#      scores "I"; a model trained toward "Sorry, I can't do that." refuses
#      with "Sorry"): is a carrier admissible, at which layer, does it move.
#      Carriers are scored on the first $MAX_VAL val prompts per class (all
#      of them take about half an hour per checkpoint on 2 cores).
# Prints train_log.csv's first and last rows, every asr.csv and
# migration.csv. Long on 2 cores (training about two hours, the attack about
# 40 minutes, ASR about 20, geometry about an hour): bench only, not CI.
#
#   bench/r2d2_smollm2.sh      (BUILD=build, RUN=runs/smollm2-r2d2, OUT=runs/smollm2-r2d2-eval,
#                               N_ATTACK=5, GCG_STEPS=30, GCG_WIDTH=64, NEW_TOKENS=64, MAX_VAL=8,
#                               THREADS=2)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
RG="$BUILD/refgeo"
RUN=${RUN:-runs/smollm2-r2d2}
OUT=${OUT:-runs/smollm2-r2d2-eval}
N_ATTACK=${N_ATTACK:-5}
GCG_STEPS=${GCG_STEPS:-30}
GCG_WIDTH=${GCG_WIDTH:-64}
NEW_TOKENS=${NEW_TOKENS:-64}
MAX_VAL=${MAX_VAL:-8}
THREADS=${THREADS:-2}
MODEL=${MODEL:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
HB="$ROOT/data/harmbench"
mkdir -p "$OUT"

echo "== 1. train"
if [ -f "$RUN/config.ini" ]; then RESUME=--resume; else RESUME=; fi
/usr/bin/time -v "$RG" train --config "$ROOT/data/r2d2-smollm2.ini" --model "$MODEL" --threads "$THREADS" \
  --out "$RUN" $RESUME 2>"$OUT/train.log" || { tail -5 "$OUT/train.log"; exit 1; }
grep -E '^(step|train:|.*Elapsed|.*Maximum resident)' "$OUT/train.log" | tail -4
head -2 "$RUN/train_log.csv"
tail -1 "$RUN/train_log.csv"

echo "== 2. GCG test cases on the base model"
for split in val test; do
  # the standard behaviors only (the CSVs interleave contextual and copyright ones)
  python3 -c 'import csv, sys
r = csv.DictReader(open(sys.argv[1], newline=""))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=r.fieldnames)
w.writeheader()
w.writerows(x for x in r if x["FunctionalCategory"] == "standard")' \
    "$HB/harmbench_behaviors_text_$split.csv" "$OUT/standard_$split.csv"
  cases="$OUT/gcg_base_$split.json"
  [ -f "$cases" ] || "$RG" attack "$MODEL" --behaviors "$OUT/standard_$split.csv" --limit "$N_ATTACK" \
    --steps "$GCG_STEPS" --search-width "$GCG_WIDTH" --threads "$THREADS" --out "$cases" --log "$OUT/gcg_base_$split.csv"
done

echo "== 3. ASR per checkpoint"
for split in val test; do
  "$RG" asr --run-dir "$RUN" --behaviors "$HB/harmbench_behaviors_text_$split.csv" --functional-category standard \
    --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" --out "$OUT/asr_direct_$split"
  "$RG" asr --run-dir "$RUN" --behaviors "$OUT/standard_$split.csv" --test-cases "$OUT/gcg_base_$split.json" \
    --functional-category standard --attack-name FixedSourceGCG --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" --out "$OUT/asr_gcg_$split"
  echo "-- $split: DirectRequest, then the base model's GCG test cases"
  cat "$OUT/asr_direct_$split/asr.csv" "$OUT/asr_gcg_$split/asr.csv"
done

echo "== 4. over-refusal on the harmless val prompts"
python3 -c 'import csv, json, sys
rows = json.load(open(sys.argv[1]))
w = csv.writer(open(sys.argv[2], "w", newline=""))
w.writerow(["prompt"])
for r in rows: w.writerow([r["instruction"] if isinstance(r, dict) else r])' \
  "$ROOT/data/prompts/harmless_val.json" "$OUT/harmless_val.csv"
"$RG" asr --run-dir "$RUN" --prompts "$OUT/harmless_val.csv" --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" \
  --out "$OUT/overrefusal"
cat "$OUT/overrefusal/refusal_rates.csv"

echo "== 5. geometry"
I_ID=$("$RG" tokenize "$MODEL" --json "I" | sed -n 's/.*"ids":\[\([0-9]*\)\].*/\1/p')
SORRY_ID=$("$RG" tokenize "$MODEL" --json "Sorry" | sed -n 's/.*"ids":\[\([0-9]*\)\].*/\1/p')
"$RG" capture --run-dir "$RUN" --out "$OUT/acts.h5" --threads "$THREADS"
"$RG" geometry --acts "$OUT/acts.h5" --run-dir "$RUN" --refusal-tokens "$I_ID,$SORRY_ID" --max-val "$MAX_VAL" \
  --threads "$THREADS" --out "$OUT/geometry"
echo "refusal tokens: I=$I_ID Sorry=$SORRY_ID"
cat "$OUT/geometry/migration.csv"
