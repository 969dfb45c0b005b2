#!/usr/bin/env bash
# r2d2_qwen.sh: an R2D2 series on Qwen2.5-Coder-0.5B-Instruct, a model that
# refuses about half of HarmBench before training, measured per checkpoint
# (issue 42, section 5). Hours on 2 cores: start it early and rerun it after
# any interruption; every stage resumes (train --resume; the measurements of
# bench/r2d2_eval.sh resume their outputs).
#   1. train data/r2d2-qwen.ini (LoRA, 60 updates, checkpoints 0 5 10 20 40
#      60) into $RUN. The first start copies $BUILD/refgeo to $RUN.refgeo
#      and every resume trains with that copy: the run stays one program's
#      even when the source changes between sessions (a resume state is only
#      promised to read back into the program that wrote it);
#   2. bench/r2d2_eval.sh: ASR, over-refusal, and the geometry verdict under
#      the pre-registered plan data/verdict-r2d2.ini.
# The run directory lives outside the work tree by default, so that a later
# session on this machine finds it.
#
#   bench/r2d2_qwen.sh     (BUILD=build, RUN=~/.cache/refgeo/runs/qwen-r2d2, OUT=$RUN-eval, THREADS=2,
#                           TRAIN_FLAGS="--recompute 1" to train in about a third of the memory,
#                           and r2d2_eval.sh's N_ATTACK, GCG_STEPS, GCG_WIDTH, NEW_TOKENS, PLAN)
#   bench/r2d2_qwen.sh train   only stage 1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
RUN=${RUN:-$HOME/.cache/refgeo/runs/qwen-r2d2}
OUT=${OUT:-$RUN-eval}
THREADS=${THREADS:-2}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
MODEL=${MODEL:-$(bash "$ROOT/scripts/fetch-model.sh" qwen2.5-coder-0.5b)}
TRAIN_BIN="$RUN.refgeo"
mkdir -p "$(dirname "$RUN")" "$OUT"

echo "== 1. train"
source "$ROOT/bench/refgeo_copy.sh"
refgeo_copy "$BUILD/refgeo" "$TRAIN_BIN"
if [ -f "$RUN/config.ini" ]; then RESUME=--resume; else RESUME=; fi
# --resume with no update left prints so and exits 0
/usr/bin/time -v "$TRAIN_BIN" train --config "$ROOT/data/r2d2-qwen.ini" --model "$MODEL" --threads "$THREADS" \
  --out "$RUN" $RESUME $TRAIN_FLAGS 2>>"$OUT/train.log" || { tail -5 "$OUT/train.log"; exit 1; }
grep -E '^(step|train:|.*Elapsed|.*Maximum resident)' "$OUT/train.log" | tail -4
head -2 "$RUN/train_log.csv"
tail -1 "$RUN/train_log.csv"
[ "${1:-}" = train ] && exit 0

echo "== 2. measurements per checkpoint"
BUILD="$BUILD" THREADS="$THREADS" bash "$ROOT/bench/r2d2_eval.sh" "$RUN" "$OUT" "$MODEL"
