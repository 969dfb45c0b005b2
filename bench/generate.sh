#!/bin/sh
# generate.sh: batched greedy generation throughput of refgeo vs transformers
# `generate` on this machine: same GGUF (loaded in transformers as float32),
# same chat-templated prompts (bench_generate.c's INSTRUCTIONS, repeated in
# bench/generate_peer.py), 2 threads each, batch 8 x 64 new tokens, every
# sequence forced to the full length (refgeo: no stop ids; transformers:
# min_new_tokens = max_new_tokens), median of 3 (transformers after one
# warm-up). Prints both new-tokens/s and the ratio refgeo/transformers, and
# the same for refgeo --fast-decode (prompt and decode on 8-bit activations).
#
#   bench/generate.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-python3}
B=8 N=64 R=3 THREADS=2
HERE=$(dirname "$0")

rg() { OMP_NUM_THREADS=$THREADS "$BUILD/bench_generate" --model "$MODEL" --batch $B --new-tokens $N \
  --threads $THREADS --repeats $R "$@" | awk '/^median/ {print $2}'; }
rg_tps=$(rg)
rg_fast=$(rg --fast-decode)
hf_tps=$(OMP_NUM_THREADS=$THREADS "$PY" "$HERE/generate_peer.py" "$MODEL" $B $N $R $THREADS 2>/dev/null)
sh "$(dirname "$0")/cpu_info.sh"
echo "refgeo:       $rg_tps new tokens/s"
echo "transformers: $hf_tps new tokens/s"
echo "refgeo --fast-decode (8-bit activations): $rg_fast new tokens/s"
awk -v a="$rg_tps" -v b="$hf_tps" -v f="$rg_fast" 'BEGIN {
  printf "ratio refgeo/transformers: %.2f\n", a / b
  printf "ratio refgeo --fast-decode/transformers: %.2f\n", f / b }'
