#!/bin/sh
# train_step.sh: one full-parameter training step (forward, next-token cross
# entropy at every position, backward, gradient clipping, AdamW) of refgeo vs
# torch on this machine: same GGUF-derived float32 weights, 2 threads each,
# batch 4 x 128 random tokens, median of 3 steps each after one warm-up step,
# in ROUNDS (3) rounds of refgeo and torch back to back (bench/rounds.sh says
# why). Prints refgeo's per-step breakdown, each round's step times and ratio
# torch/refgeo (> 1: refgeo faster), and the median of the rounds' ratios.
# LORA=R trains rank-R LoRA adapters (alpha 16, dropout 0) on q k v o over the
# frozen float32 base instead: refgeo's --lora-rank against peft's LoraConfig.
#
#   bench/train_step.sh [MODEL.gguf]     (BUILD=build-dir, PY=python with torch [and peft], LORA=R,
#                                         ROUNDS=N)
# Dev-only: needs the torch environment; CI does not run it.
set -eu
MODEL=${1:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BUILD=${BUILD:-build}
PY=${PY:-python3}
B=4 T=128 R=3 THREADS=2
LORA=${LORA:-0}
# refgeo restarts itself with GOMP_SPINCOUNT=10000 (tools/cli.h,
# cli_runtime_env); torch runs with its own defaults, its fastest here.
# shellcheck source=bench/rounds.sh
. "$(dirname "$0")/rounds.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# refgeo_step prints bench_train's lines to stderr, and its median step time
# and median backward/forward ratio to stdout.
refgeo_step() {
  "$BUILD/bench_train" --model "$MODEL" --batch $B --tokens $T --threads $THREADS --repeats $R \
    --lora-rank "$LORA" >"$log"
  sed 's/^/  refgeo /' "$log" >&2
  awk '/^median/ {print $2, $NF}' "$log"
}

torch_step() {
  OMP_NUM_THREADS=$THREADS "$PY" - "$MODEL" $B $T $R $THREADS "$LORA" <<'PYEOF' 2>/dev/null
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
}

sh "$(dirname "$0")/cpu_info.sh"
echo "mode: $([ "$LORA" -gt 0 ] && echo "LoRA rank $LORA on q k v o" || echo full)"
ratios=""
r=1
while [ $r -le "$ROUNDS" ]; do
  play_round "$r" refgeo_step torch_step
  torch_s=$round_torch
  read -r rg_s bwd_fwd <<EOF
$round_refgeo
EOF
  ratio=$(awk -v a="$rg_s" -v b="$torch_s" 'BEGIN { printf "%.2f", b / a }')
  echo "round $r ($(first_of "$r") first): refgeo $rg_s s (backward/forward $bwd_fwd), torch $torch_s s per step," \
    "ratio torch/refgeo $ratio"
  ratios="$ratios $ratio"
  r=$((r + 1))
done
echo "ratio torch/refgeo: $(echo "$ratios" | median) (median of $ROUNDS rounds:$ratios)"
