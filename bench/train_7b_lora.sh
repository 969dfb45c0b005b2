#!/bin/sh
# train_7b_lora.sh: one LoRA R2D2 update of a 7B model on this machine
# (issue 9, acceptance 7): does `refgeo train --mode lora` fit in 20 GiB?
#
# The model is bench/synth_7b.sh's random Mistral-7B-shaped bf16 model. It
# has no tokenizer of its own, so the tiny chatml tokenizer of
# tests/fixtures/hf_tiny/qwen2_bf16 (300 ids, all below the 32000 embedding
# rows) is copied beside it. One update: pool 1, one test case ("Say hi" /
# "Sure, hi"), 1 GCG step of 64 candidates (8 evaluated together), one
# short utility conversation, LoRA rank 64 alpha 16 on q k v o (HarmBench's
# config_lora.yaml), no checkpoint. The base stays bf16 in the page cache
# (RG_WEIGHTS_AUTO picks the tiled form: an f32 copy would be 29 GB), so
# ~14 GiB of the peak RSS is the mapped weights. Prints peak RSS and wall
# time; exits 1 above 20 GiB.
#
#   bench/train_7b_lora.sh          (BUILD=build-dir, THREADS=2, REFGEO_HOME=~/.cache/refgeo)
#
# Bench only, not CI: the synthetic model takes minutes to write, ~15 GB of
# disk, and an update takes minutes on 2 cores.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/timed.sh"
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
LIMIT_GIB=20

. "$ROOT/bench/synth_7b.sh"
cp "$ROOT/tests/fixtures/hf_tiny/qwen2_bf16/tokenizer.json" "$ROOT/tests/fixtures/hf_tiny/qwen2_bf16/tokenizer_config.json" "$DIR/"

WORK=$(mktemp -d)
LOG="$WORK/time.log"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/behaviors.csv" <<'CSV'
Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID
Say hi,standard,misc,,,say_hi
CSV
printf '{"say_hi": ["Sure, hi"]}\n' >"$WORK/targets.json"
printf '{"messages": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}]}\n' \
  >"$WORK/utility.jsonl"
cat >"$WORK/run.ini" <<INI
[model]
model = $DIR
chat_template = chatml
mode = lora
lora_rank = 64
lora_alpha = 16
lora_targets = q,k,v,o
threads = $THREADS
[optim]
updates = 1
grad_accum = 1
save_steps =
state_every = 1
[pool]
pool_size = 1
cases_per_step = 1
gcg_steps = 1
search_width = 64
gcg_batch = 8
reset_every = 0
[data]
behaviors = $WORK/behaviors.csv
targets = $WORK/targets.json
utility = $WORK/utility.jsonl
utility_per_step = 1
max_case_tokens = 96
max_utility_tokens = 64
INI
timed_run "$LOG" "$BUILD/refgeo" train --config "$WORK/run.ini" --out "$WORK/run"
grep '^step ' "$LOG" || true
timed_report "train_7b_lora: $NAME, one LoRA R2D2 update (pool 1, 1 GCG step x 64 candidates, $THREADS threads)" \
  "$LOG" "$LIMIT_GIB"
