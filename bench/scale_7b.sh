#!/bin/sh
# scale_7b.sh: does refgeo handle a 7B model within 20 GiB of memory?
#
# Writes a Mistral-7B-shaped config (hidden 4096, intermediate 14336, 32
# layers, 32 heads, 8 kv heads, vocab 32000, sliding_window 4096,
# rope_theta 10000, rms_norm_eps 1e-5), instantiates it once with
# `refgeo synth-model` as random bf16 safetensors (~14.5 GB) under
# $REFGEO_HOME/synth/mistral-7b-shape (regeneration is skipped when the
# directory is complete), then runs one forward pass over 4 prompts x 64
# tokens with resid_pre captured at every layer (bench_forward) under
# /usr/bin/time -v. Prints peak RSS (GiB) and wall time; exits 1 if the peak
# RSS exceeds 20 GiB. Weights stay bf16 in the page cache (--tiled): an f32
# copy of a 7B model alone would be 29 GB. Note that touched pages of the
# mmapped shards count towards RSS, so ~14 GiB of the peak is the weights.
#
#   bench/scale_7b.sh                 (BUILD=build-dir, REFGEO_HOME=~/.cache/refgeo)
#   SCALE_CONFIG=small.json SCALE_NAME=small bench/scale_7b.sh   (dry run on another config)
#
# Bench only, not CI: the synthetic model takes minutes to write and ~15 GB
# of disk.
set -eu
. "$(dirname "$0")/timed.sh"
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
LIMIT_GIB=20

. "$(dirname "$0")/synth_7b.sh"

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
timed_run "$LOG" "$BUILD/bench_forward" --model "$DIR" --batch 4 --tokens 64 --capture-resid-pre --tiled \
  --threads "$THREADS" --repeats 1
timed_report "scale_7b: $NAME (4 x 64 tokens, resid_pre at every layer, $THREADS threads)" "$LOG" "$LIMIT_GIB"
