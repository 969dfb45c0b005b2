#!/usr/bin/env bash
# r2d2_eval.sh: the per-checkpoint measurements of an R2D2 series that
# bench/r2d2_smollm2.sh and bench/r2d2_qwen.sh share. Every stage resumes its
# outputs: rerun after a kill and it continues. The verdict comes first: it
# is what the series is run for, and a session that ends early then has it.
#   1. capture + geometry --run-dir under the pre-registered plan $PLAN
#      (data/verdict-r2d2.ini: refusal tokens fitted to each checkpoint,
#      RD's filter and selection, the null, bootstrap intervals), ending in
#      geometry/verdict.json;
#   2. fixed-source GCG test cases made once on the base model (refgeo
#      attack) for the first $N_ATTACK standard behaviors of each split of
#      $ATTACK_SPLITS (val and test; test alone halves the stage's time)
#      ($GCG_STEPS steps of $GCG_WIDTH candidates: scaled down from
#      HarmBench's 500 x 512 to fit 2 cores);
#   3. refgeo asr --run-dir per checkpoint, substring classifier (HarmBench's
#      refusal list), $NEW_TOKENS new tokens: DirectRequest on the standard
#      val behaviors (trained on) and test behaviors (held out), and the base
#      model's GCG test cases as FixedSource;
#   4. over-refusal per checkpoint: the refusal rate on the project's harmless
#      val prompts, and XSTest's prompts by label with XSTest's string match.
#
#   bench/r2d2_eval.sh RUN OUT MODEL   (BUILD=build, N_ATTACK=5, ATTACK_SPLITS="val test", GCG_STEPS=30, GCG_WIDTH=64,
#                                       NEW_TOKENS=64, THREADS=2, PLAN=data/verdict-r2d2.ini,
#                                       STAGES="geometry attack asr overrefusal": the stages to run;
#                                       geometry does not resume, so leave it out once it is done)
set -euo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 RUN_DIR OUT_DIR MODEL" >&2; exit 2; fi
RUN=$1 OUT=$2 MODEL=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
# every stage and resume measures with one copy of refgeo kept in $OUT
# (bench/refgeo_copy.sh; delete $OUT to measure anew with a new build)
RG="$OUT/refgeo"
N_ATTACK=${N_ATTACK:-5}
ATTACK_SPLITS=${ATTACK_SPLITS:-val test}
GCG_STEPS=${GCG_STEPS:-30}
GCG_WIDTH=${GCG_WIDTH:-64}
NEW_TOKENS=${NEW_TOKENS:-64}
THREADS=${THREADS:-2}
PLAN=${PLAN:-$ROOT/data/verdict-r2d2.ini}
HB="$ROOT/data/harmbench"
STAGES=${STAGES:-geometry attack asr overrefusal}
has_word() { case " $2 " in *" $1 "*) return 0 ;; *) return 1 ;; esac; } # has_word WORD "LIST"
want() { has_word "$1" "$STAGES"; }
mkdir -p "$OUT"
source "$ROOT/bench/refgeo_copy.sh"
refgeo_copy "$BUILD/refgeo" "$RG"
# the standard behaviors only (the CSVs interleave contextual and copyright ones)
for split in val test; do
  python3 -c 'import csv, sys
r = csv.DictReader(open(sys.argv[1], newline=""))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=r.fieldnames)
w.writeheader()
w.writerows(x for x in r if x["FunctionalCategory"] == "standard")' \
    "$HB/harmbench_behaviors_text_$split.csv" "$OUT/standard_$split.csv"
done

if want geometry; then
echo "== geometry"
"$RG" capture --run-dir "$RUN" --out "$OUT/acts.h5" --threads "$THREADS"
"$RG" geometry --acts "$OUT/acts.h5" --run-dir "$RUN" --plan-file "$PLAN" --threads "$THREADS" --out "$OUT/geometry"
cat "$OUT/geometry/verdict.txt"
fi

if want attack; then
echo "== GCG test cases on the base model"
for split in $ATTACK_SPLITS; do
  cases="$OUT/gcg_base_$split.json"
  [ -f "$cases" ] || "$RG" attack "$MODEL" --behaviors "$OUT/standard_$split.csv" --limit "$N_ATTACK" \
    --steps "$GCG_STEPS" --search-width "$GCG_WIDTH" --threads "$THREADS" --out "$cases" --log "$OUT/gcg_base_$split.csv"
done
fi

if want asr; then
echo "== ASR per checkpoint"
for split in val test; do
  "$RG" asr --run-dir "$RUN" --behaviors "$HB/harmbench_behaviors_text_$split.csv" --functional-category standard \
    --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" --out "$OUT/asr_direct_$split"
  echo "-- $split: DirectRequest"
  cat "$OUT/asr_direct_$split/asr.csv"
  has_word "$split" "$ATTACK_SPLITS" || continue
  "$RG" asr --run-dir "$RUN" --behaviors "$OUT/standard_$split.csv" --test-cases "$OUT/gcg_base_$split.json" \
    --functional-category standard --attack-name FixedSourceGCG --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" --out "$OUT/asr_gcg_$split"
  echo "-- $split: the base model's GCG test cases"
  cat "$OUT/asr_gcg_$split/asr.csv"
done
fi

if want overrefusal; then
echo "== over-refusal: harmless val prompts, XSTest"
python3 -c 'import csv, json, sys
rows = json.load(open(sys.argv[1]))
w = csv.writer(open(sys.argv[2], "w", newline=""))
w.writerow(["prompt"])
for r in rows: w.writerow([r["instruction"] if isinstance(r, dict) else r])' \
  "$ROOT/data/prompts/harmless_val.json" "$OUT/harmless_val.csv"
"$RG" asr --run-dir "$RUN" --prompts "$OUT/harmless_val.csv" --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" \
  --out "$OUT/overrefusal"
cat "$OUT/overrefusal/refusal_rates.csv"
"$RG" asr --run-dir "$RUN" --prompts "$ROOT/data/xstest/xstest_prompts.csv" --group-column label \
  --classifier refusal-xstest --max-new-tokens "$NEW_TOKENS" --threads "$THREADS" --out "$OUT/xstest"
cat "$OUT/xstest/refusal_rates.csv"
fi
