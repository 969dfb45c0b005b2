#!/usr/bin/env bash
# arditi_qwen.sh: Arditi et al. 2024's single refusal direction, reproduced on
# Qwen2.5-Coder-0.5B-Instruct with refgeo's own commands (issue 10,
# acceptance 3). Every step resumes its outputs: rerun after a kill.
#   1. capture: resid_pre at the post-instruction positions of the project's
#      prompt sets (data/prompts: 48 train + 24 val per class);
#   2. geometry: difference-in-means candidates at every (position, layer),
#      scored for bypass, induce and KL on $MAX_VAL val prompts per class;
#      refusal scored on the tokens "I" and "As" (40, 2121: RD's Qwen
#      refusal tokens); refusal_direction's filter (induce > 0, KL < 0.1,
#      layer < 0.8 L)
#      selects the carrier with the lowest bypass score (when none passes,
#      the lowest-bypass one of the KL and layer filters, said as such);
#   3. the refusal_direction substring rule (--classifier refusal-rd),
#      $NEW_TOKENS new tokens:
#      - harmful: RD's harmful_val split (39 prompts), baseline vs --ablate;
#      - harmless: the project's harmless val prompts, baseline vs --actadd
#        (coeff 1.0), as a refusal rate;
#   4. HarmBench DirectRequest on the standard val and test behaviors,
#      baseline vs --ablate, with Wilson intervals (HarmBench's refusal list).
# RD's reference runs (data/refusal_direction/reference_runs) are printed
# beside the result: ablation raises ASR to 0.93-1.00 on their five models,
# actadd makes 0.88-1.00 of harmless prompts refused.
# About 40 minutes on 2 cores: bench only, not CI.
#
#   bench/arditi_qwen.sh     (BUILD=build, OUT=runs/arditi-qwen, MAX_VAL=8, NEW_TOKENS=64, THREADS=2,
#                             MODEL=path of the Qwen GGUF; default: scripts/fetch-model.sh's cache)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
RG="$BUILD/refgeo"
OUT=${OUT:-runs/arditi-qwen}
MAX_VAL=${MAX_VAL:-8}
NEW_TOKENS=${NEW_TOKENS:-64}
THREADS=${THREADS:-2}
MODEL=${MODEL:-$(bash "$ROOT/scripts/fetch-model.sh" qwen2.5-coder-0.5b)}
HB="$ROOT/data/harmbench"
mkdir -p "$OUT"

# A refusal_direction JSON split (a list of {"instruction": ...}) as the
# prompt CSV that `refgeo asr --prompts` reads.
json_to_csv() {
  python3 -c 'import csv, json, sys
w = csv.writer(open(sys.argv[2], "w", newline=""))
w.writerow(["prompt"])
w.writerows([r["instruction"]] for r in json.load(open(sys.argv[1])))' "$1" "$2"
}

echo "== 1. capture"
"$RG" capture "$MODEL" --threads "$THREADS" --out "$OUT/acts.h5"

echo "== 2. geometry"
if [ ! -f "$OUT/geometry/migration.csv" ]; then
  /usr/bin/time -f "geometry: %e s wall, %M KiB peak" \
    "$RG" geometry --acts "$OUT/acts.h5" "$MODEL" --refusal-tokens 40,2121 --max-val "$MAX_VAL" --threads "$THREADS" \
    --out "$OUT/geometry"
fi
echo "-- the selected carrier, its scores and the count of admissible candidates (migration.csv)"
cat "$OUT/geometry/migration.csv"
echo "-- candidates rejected, by the first filter that rejects them"
awk -F, 'NR > 1 { n[$8]++ } END { for (r in n) printf "  %s: %d\n", r == "" ? "(admissible)" : r, n[r] }' \
  "$OUT/geometry/carriers.csv"
# The carrier the interventions use: the selected one; when none is
# admissible, the lowest-bypass candidate that passes the KL and layer
# filters with the induce filter dropped (said in the output).
carrier=$(awk -F, 'NR == 2 && $2 != "" { printf ":pos=%s,layer=%s", $3, $2 }' "$OUT/geometry/migration.csv")
if [ -z "$carrier" ]; then
  n_layers=$(awk -F, 'NR > 1 && $3 + 1 > n { n = $3 + 1 } END { print n }' "$OUT/geometry/carriers.csv")
  carrier=$(awk -F, -v cap="$n_layers" 'NR > 1 && $6 <= 0.1 && $3 < int(0.8 * cap) && (best == "" || $4 < best) {
      best = $4; c = sprintf(":pos=%s,layer=%s", $2, $3); line = $0 } END { print c; print line > "/dev/stderr" }' \
    "$OUT/geometry/carriers.csv")
  echo "-- no admissible carrier under refusal_direction's rule; with the induce filter dropped: $carrier"
fi
DIRS="$OUT/geometry/directions.h5$carrier"

echo "== 3. refusal_direction's evaluation"
json_to_csv "$ROOT/data/refusal_direction/splits/harmful_val.json" "$OUT/rd_harmful_val.csv"
json_to_csv "$ROOT/data/prompts/harmless_val.json" "$OUT/harmless_val.csv"
common=("$MODEL" --classifier refusal-rd --max-new-tokens "$NEW_TOKENS" --threads "$THREADS")
"$RG" asr "${common[@]}" --prompts "$OUT/rd_harmful_val.csv" --out "$OUT/rd_harmful"
"$RG" asr "${common[@]}" --prompts "$OUT/rd_harmful_val.csv" --ablate "$DIRS" \
  --out "$OUT/rd_harmful_ablate"
"$RG" asr "${common[@]}" --prompts "$OUT/harmless_val.csv" --out "$OUT/harmless"
"$RG" asr "${common[@]}" --prompts "$OUT/harmless_val.csv" --actadd "$DIRS" --coeff 1.0 \
  --out "$OUT/harmless_actadd"
for d in rd_harmful rd_harmful_ablate harmless harmless_actadd; do
  echo "-- $d"
  cat "$OUT/$d/refusal_rates.csv"
done

echo "== 4. HarmBench DirectRequest, standard behaviors"
for split in val test; do
  hb=("$MODEL" --behaviors "$HB/harmbench_behaviors_text_$split.csv" --functional-category standard
    --max-new-tokens "$NEW_TOKENS" --threads "$THREADS")
  "$RG" asr "${hb[@]}" --out "$OUT/hb_${split}"
  "$RG" asr "${hb[@]}" --ablate "$DIRS" --out "$OUT/hb_${split}_ablate"
  echo "-- $split: baseline, then ablated"
  cat "$OUT/hb_${split}/asr.csv" "$OUT/hb_${split}_ablate/asr.csv"
done

echo "== refusal_direction's reference runs: selected (pos, layer), admissible candidates"
for m in "$ROOT"/data/refusal_direction/reference_runs/*/; do
  python3 -c 'import json, sys
meta = json.load(open(sys.argv[1] + "direction_metadata.json"))
n = len(json.load(open(sys.argv[1] + "direction_evaluations_filtered.json")))
print("%s: pos %d, layer %d, %d admissible" % (sys.argv[2], meta["pos"], meta["layer"], n))' "$m" "$(basename "$m")"
done
