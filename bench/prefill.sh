#!/bin/sh
# prefill.sh: prefill throughput of refgeo vs transformers (torch) on this
# machine, same GGUF-derived weights, float32, 2 threads each, batch 16 x 128
# random tokens, median of 3 runs each (after one warm-up run for torch), in
# ROUNDS (3) rounds of refgeo and torch back to back (bench/rounds.sh says
# why). Each round prints both tokens/s, the ratio refgeo/torch, and refgeo's
# GFLOP/s as a share of OpenBLAS's 2048^3 sgemm GFLOP/s on the same 2 threads,
# that sgemm timed right before each prefill (bench_forward --share); the last
# lines give the medians over rounds.
#
#   bench/prefill.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch, ROUNDS=N)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-python3}
B=16 T=128 R=3 THREADS=2

# shellcheck source=bench/rounds.sh
. "$(dirname "$0")/rounds.sh"

# refgeo_prefill prints "tokens/s GFLOP/s share" of one bench_forward run
# (its output is taken whole first, so that a failed run stops the script).
refgeo_prefill() {
  out=$("$BUILD/bench_forward" --model "$MODEL" --batch $B --tokens $T --threads $THREADS --repeats $R --share)
  echo "$out" | tail -1 | awk '{ sub(/%/, "", $6); print $2, $4, $6 }'
}

torch_prefill() {
  OMP_NUM_THREADS=$THREADS "$PY" - "$MODEL" $B $T $R $THREADS <<'PYEOF' 2>/dev/null
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
}

sh "$(dirname "$0")/cpu_info.sh"
ratios="" shares=""
r=1
while [ $r -le "$ROUNDS" ]; do
  play_round "$r" refgeo_prefill torch_prefill
  torch_tps=$round_torch
  read -r rg_tps rg_gf rg_share <<EOF
$round_refgeo
EOF
  ratio=$(awk -v a="$rg_tps" -v b="$torch_tps" 'BEGIN { printf "%.2f", a / b }')
  echo "round $r ($(first_of "$r") first): refgeo $rg_tps tokens/s ($rg_gf GFLOP/s, $rg_share% of the sgemm peak)," \
    "torch $torch_tps tokens/s, ratio refgeo/torch $ratio"
  ratios="$ratios $ratio" shares="$shares $rg_share"
  r=$((r + 1))
done
echo "ratio refgeo/torch: $(echo "$ratios" | median) (median of $ROUNDS rounds:$ratios)"
echo "refgeo GFLOP/s share of sgemm peak: $(echo "$shares" | median)% (median of $ROUNDS rounds:$shares)"
