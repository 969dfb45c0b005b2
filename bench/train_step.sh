#!/bin/sh
# train_step.sh: one full-parameter training step (forward, next-token cross
# entropy at every position, backward, gradient clipping, AdamW) of refgeo vs
# torch on this machine: same GGUF-derived float32 weights, 2 threads each,
# batch 4 x 128 random tokens, median of 5 steps each after one warm-up step.
# Prints both step times and the ratio torch/refgeo (> 1: refgeo faster).
# LORA=R trains rank-R LoRA adapters (alpha 16, dropout 0) on q k v o over the
# frozen float32 base instead: refgeo's --lora-rank against peft's LoraConfig.
#
#   bench/train_step.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch [and peft], LORA=R)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-python3}
B=4 T=128 R=5 THREADS=2
LORA=${LORA:-0}
# refgeo restarts itself with GOMP_SPINCOUNT=10000 (tools/cli.h,
# cli_runtime_env); torch runs with its own defaults, its fastest here.

"$BUILD/bench_train" --model "$MODEL" --batch $B --tokens $T --threads $THREADS --repeats $R --lora-rank "$LORA" |
  tee /tmp/bench_train.$$
rg_s=$(awk '/^median/ {print $2}' /tmp/bench_train.$$)
rm -f /tmp/bench_train.$$

torch_s=$(OMP_NUM_THREADS=$THREADS "$PY" - "$MODEL" $B $T $R $THREADS "$LORA" <<'PYEOF' 2>/dev/null
import os, statistics, sys, time
import torch
from transformers import AutoModelForCausalLM
path, B, T, R, threads, lora = sys.argv[1], *map(int, sys.argv[2:7])
torch.set_num_threads(threads)
d, name = os.path.split(os.path.abspath(path))
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
if lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=lora, lora_alpha=16, lora_dropout=0.0,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
model.train()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
g = torch.Generator().manual_seed(12345)
ids = torch.randint(0, model.config.vocab_size, (B, T), generator=g)
times = []
for r in range(R + 1):
    t0 = time.perf_counter()
    opt.zero_grad()
    logits = model(ids, use_cache=False).logits[:, :-1]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    if r:
        times.append(time.perf_counter() - t0)
print(f"{statistics.median(times):.3f}")
PYEOF
)
sh "$(dirname "$0")/cpu_info.sh"
echo "mode: $([ "$LORA" -gt 0 ] && echo "LoRA rank $LORA on q k v o" || echo full)"
echo "refgeo: $rg_s s per step"
echo "torch:  $torch_s s per step"
awk -v a="$rg_s" -v b="$torch_s" 'BEGIN { printf "ratio torch/refgeo: %.2f\n", b / a }'
