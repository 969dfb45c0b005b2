#!/bin/sh
# capture.sh: `refgeo capture` throughput on SmolLM2-135M-Instruct: the
# default prompt sets of data/prompts (all train and val prompts, harmful and
# harmless), resid_pre at every layer's eoi positions, one checkpoint, under
# /usr/bin/time -v. Prints prompt tokens/s (forward only, and whole step
# including tokenization and the HDF5 write), peak RSS and wall time.
#   bench/capture.sh [MODEL.gguf]      (BUILD=build-dir, THREADS=2)
set -eu
cd "$(dirname "$0")/.."
. bench/timed.sh
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
timed_run "$OUT/time.log" "$BUILD/refgeo" capture --model "$MODEL" --out "$OUT/acts.h5" --threads "$THREADS"
grep "tokens/s" "$OUT/time.log"
timed_report "capture ($THREADS threads)" "$OUT/time.log" 20
