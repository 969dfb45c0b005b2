#!/usr/bin/env bash
# r2d2_smollm2.sh: R2D2 on SmolLM2-135M-Instruct measured end to end
# (issue 9, acceptance 9). Every step resumes: rerun the script after a kill
# and it continues where it stopped (train --resume; the measurements of
# bench/r2d2_eval.sh resume their outputs).
#   1. train data/r2d2-smollm2.ini into $RUN (checkpoints 0 10 25 50 100);
#   2. bench/r2d2_eval.sh: the base model's GCG test cases, DirectRequest and
#      fixed-source ASR per checkpoint, over-refusal, and the geometry verdict
#      under the pre-registered plan data/verdict-r2d2.ini.
# Long on 2 cores (on a 2-vCPU Sapphire Rapids, 2026-12-07: training 32 min,
# geometry 13, the attack on 5 test behaviors (ATTACK_SPLITS=test) and ASR
# about 10, over-refusal about 10 per checkpoint when shared): bench only, not CI.
#
#   bench/r2d2_smollm2.sh      (BUILD=build, RUN=runs/smollm2-r2d2, OUT=runs/smollm2-r2d2-eval, THREADS=2,
#                               and r2d2_eval.sh's N_ATTACK, GCG_STEPS, GCG_WIDTH, NEW_TOKENS, PLAN)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
RUN=${RUN:-runs/smollm2-r2d2}
OUT=${OUT:-runs/smollm2-r2d2-eval}
THREADS=${THREADS:-2}
MODEL=${MODEL:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
TRAIN_BIN="$RUN.refgeo"
mkdir -p "$(dirname "$RUN")" "$OUT"

echo "== 1. train"
# the first start copies $BUILD/refgeo to $RUN.refgeo; every resume trains with it
source "$ROOT/bench/refgeo_copy.sh"
refgeo_copy "$BUILD/refgeo" "$TRAIN_BIN"
if [ -f "$RUN/config.ini" ]; then RESUME=--resume; else RESUME=; fi
/usr/bin/time -v "$TRAIN_BIN" train --config "$ROOT/data/r2d2-smollm2.ini" --model "$MODEL" --threads "$THREADS" \
  --out "$RUN" $RESUME 2>>"$OUT/train.log" || { tail -5 "$OUT/train.log"; exit 1; }
grep -E '^(step|train:|.*Elapsed|.*Maximum resident)' "$OUT/train.log" | tail -4
head -2 "$RUN/train_log.csv"
tail -1 "$RUN/train_log.csv"

echo "== 2. measurements per checkpoint"
BUILD="$BUILD" THREADS="$THREADS" bash "$ROOT/bench/r2d2_eval.sh" "$RUN" "$OUT" "$MODEL"
