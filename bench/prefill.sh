#!/bin/sh
# prefill.sh: prefill throughput of refgeo vs transformers (torch) on this
# machine, same GGUF-derived weights, float32, 2 threads each, batch 16 x 128
# random tokens, median of 5 runs each (after one warm-up run for torch).
# Prints both tokens/s, the ratio refgeo/torch, and refgeo's GFLOP/s as a
# share of OpenBLAS's 2048^3 sgemm GFLOP/s on the same 2 threads.
#
#   bench/prefill.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-python3}
B=16 T=128 R=5 THREADS=2

peak=$("$BUILD/bench_forward" --sgemm-peak --threads $THREADS | awk '{print $(NF-1)}')
rg=$("$BUILD/bench_forward" --model "$MODEL" --batch $B --tokens $T --threads $THREADS --repeats $R | tail -1)
rg_tps=$(echo "$rg" | awk '{print $2}')
rg_gf=$(echo "$rg" | awk '{print $4}')

torch_tps=$(OMP_NUM_THREADS=$THREADS "$PY" - "$MODEL" $B $T $R $THREADS <<'PYEOF' 2>/dev/null
import os, statistics, sys, time
import torch
from transformers import AutoModelForCausalLM
path, B, T, R, threads = sys.argv[1], *map(int, sys.argv[2:6])
torch.set_num_threads(threads)
d, name = os.path.split(os.path.abspath(path))
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
g = torch.Generator().manual_seed(12345)
ids = torch.randint(0, model.config.vocab_size, (B, T), generator=g)
rates = []
with torch.inference_mode():
    for r in range(R + 1):
        t0 = time.perf_counter()
        model(ids, use_cache=False, logits_to_keep=1)  # last-position logits, as refgeo's prefill
        if r:
            rates.append(B * T / (time.perf_counter() - t0))
print(f"{statistics.median(rates):.1f}")
PYEOF
)
sh "$(dirname "$0")/cpu_info.sh"
echo "refgeo: $rg_tps tokens/s ($rg_gf GFLOP/s)"
echo "torch:  $torch_tps tokens/s"
awk -v a="$rg_tps" -v b="$torch_tps" -v g="$rg_gf" -v p="$peak" 'BEGIN {
  printf "ratio refgeo/torch: %.2f\n", a / b
  printf "refgeo GFLOP/s share of sgemm peak (%.1f GFLOP/s): %.0f%%\n", p, 100 * g / p }'
