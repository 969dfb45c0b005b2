#!/bin/sh
# capture_7b.sh: `refgeo capture` on the Mistral-7B-shaped synthetic bf16
# model of scale_7b.sh (written once, then reused), 8 prompts (3+3 train,
# 1+1 val from data/prompts), resid_pre at every layer, under
# /usr/bin/time -v. Prints peak RSS and wall time; fails above 20 GiB.
#   bench/capture_7b.sh            (BUILD=build-dir, THREADS=2)
set -eu
cd "$(dirname "$0")/.."
. bench/timed.sh
BUILD=${BUILD:-build}
REFGEO_HOME=${REFGEO_HOME:-$HOME/.cache/refgeo}
DIR="$REFGEO_HOME/synth/mistral-7b-shape"
THREADS=${THREADS:-2}
LIMIT_GIB=20

# scale_7b.sh writes the model (and runs its own forward bench) if it is missing.
[ -f "$DIR/model.safetensors.index.json" ] || BUILD="$BUILD" sh bench/scale_7b.sh

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
timed_run "$OUT/time.log" "$BUILD/refgeo" capture --model "$DIR" --out "$OUT/acts.h5" --n-train 3 --n-val 1 \
  --threads "$THREADS"
grep "tokens/s" "$OUT/time.log" >&2 || true
timed_report "capture_7b (8 prompts, resid_pre at 32 layers, $THREADS threads)" "$OUT/time.log" "$LIMIT_GIB"
