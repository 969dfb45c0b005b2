#!/bin/sh
# train_step.sh: one full-parameter training step (forward, next-token cross
# entropy at every position, backward, gradient clipping, AdamW) of refgeo vs
# torch on this machine: same GGUF-derived float32 weights, 2 threads each,
# batch 4 x 128 random tokens, median of 5 steps each after one warm-up step.
# Prints both step times and the ratio torch/refgeo (> 1: refgeo faster).
#
#   bench/train_step.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-/root/.cache/refgeo-pyenv/bin/python}
B=4 T=128 R=5 THREADS=2

"$BUILD/bench_train" --model "$MODEL" --batch $B --tokens $T --threads $THREADS --repeats $R | tee /tmp/bench_train.$$
rg_s=$(awk '/^median/ {print $2}' /tmp/bench_train.$$)
rm -f /tmp/bench_train.$$

torch_s=$(OMP_NUM_THREADS=$THREADS "$PY" - "$MODEL" $B $T $R $THREADS <<'PYEOF' 2>/dev/null
import os, statistics, sys, time
import torch
from transformers import AutoModelForCausalLM
path, B, T, R, threads = sys.argv[1], *map(int, sys.argv[2:6])
torch.set_num_threads(threads)
d, name = os.path.split(os.path.abspath(path))
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
g = torch.Generator().manual_seed(12345)
ids = torch.randint(0, model.config.vocab_size, (B, T), generator=g)
times = []
for r in range(R + 1):
    t0 = time.perf_counter()
    opt.zero_grad()
    logits = model(ids, use_cache=False).logits[:, :-1]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if r:
        times.append(time.perf_counter() - t0)
print(f"{statistics.median(times):.3f}")
PYEOF
)
echo "refgeo: $rg_s s per step"
echo "torch:  $torch_s s per step"
awk -v a="$rg_s" -v b="$torch_s" 'BEGIN { printf "ratio torch/refgeo: %.2f\n", b / a }'
