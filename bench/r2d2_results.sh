#!/usr/bin/env bash
# r2d2_results.sh: the report of an R2D2 series measured by bench/r2d2_eval.sh,
# and a copy of its small outputs for results/ (issue 42, section 5): the run's
# config and training log, every CSV and JSON table of the measurements, the
# verdict and its plan, and report.html. Never weights, activations, directions
# or completions.
#   bench/r2d2_results.sh RUN OUT DEST   (RUN: the training run; OUT: its
#                                         r2d2_eval.sh folder; DEST: e.g.
#                                         results/r2d2-qwen-2026-12-07)
# Stages not measured yet are left out of the report and of DEST; rerun it
# when they are.
set -euo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 RUN_DIR OUT_DIR DEST_DIR" >&2; exit 2; fi
RUN=$1 OUT=$2 DEST=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RG="$OUT/refgeo" # the copy every measurement of the series was made with
export REFGEO_DATA=${REFGEO_DATA:-$ROOT/data}
[ -x "$RG" ] || { echo "$0: $RG: no refgeo copy: run bench/r2d2_eval.sh first" >&2; exit 1; }

args=()
for d in asr_direct_val asr_direct_test asr_gcg_val asr_gcg_test; do
  [ -f "$OUT/$d/asr.csv" ] && args+=(--asr "$OUT/$d")
done
for d in overrefusal xstest; do
  [ -f "$OUT/$d/refusal_rates.csv" ] && args+=(--overrefusal "$OUT/$d")
done
[ -f "$OUT/geometry/verdict.json" ] && args+=(--geometry "$OUT/geometry")
"$RG" report "$RUN" "${args[@]}" --published "$ROOT/data/published/lan2026_r2d2.csv" --out "$OUT/report.html"

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd) # the copies below run inside $OUT
cp "$RUN/config.ini" "$RUN/train_log.csv" "$OUT/report.html" "$DEST/"
( cd "$OUT" && find . -mindepth 2 \( -name '*.csv' -o -name 'asr_run.json' -o -name 'verdict.json' \
    -o -name 'verdict.txt' -o -name 'plan.ini' -o -name 'plan.sha256' \) ! -name 'completions*' -print0 |
  while IFS= read -r -d '' f; do mkdir -p "$DEST/$(dirname "$f")" && cp "$f" "$DEST/$f"; done )
for f in gcg_base_val.csv gcg_base_test.csv; do [ -f "$OUT/$f" ] && cp "$OUT/$f" "$DEST/"; done
du -sh "$DEST"
