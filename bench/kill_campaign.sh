#!/bin/bash
# kill_campaign.sh: SIGKILL `refgeo train` (full and LoRA) and `refgeo run`
# at random moments, resume after each kill, and check that the run that
# finally completes is bitwise the uninterrupted one, with nothing left
# beside it (issue 43's acceptance 2).
#
# On the tiny Qwen2 model of the tests (tests/fixtures/hf_tiny/qwen2_bf16,
# written here by `refgeo synth-model`): a train run of 4 updates (a state
# after each, checkpoints 0 2 4 in float32) and a `refgeo run` job (train
# 2 updates, capture, geometry, asr). Each trial starts the command, kills
# it after a random delay drawn from [0, the uninterrupted run's time), and
# starts it again (with --resume for train) until one attempt completes;
# every kill counts. `run` trials kill the `refgeo run` process alone, so
# its stage child must die with it (PR_SET_PDEATHSIG) or the next attempt
# is refused by the run directory's lock.
#
# At the end of each trial: state/ holds the newest state alone, no *.tmp*
# or *.old is left anywhere, params.f32, moments.f32 and every checkpoint's
# model.safetensors equal the reference's byte for byte, and `sha256sum -c`
# accepts the run's SHA256SUMS. Prints one line per trial and the totals;
# exits 1 on any difference.
#
# Trials go on until at least KILLS_TRAIN kills (20) per train mode and
# KILLS_RUN (10) on run have landed (a kill drawn after the end misses).
#
#   bench/kill_campaign.sh [SEED]   (BUILD=build-dir, KILLS_TRAIN=N, KILLS_RUN=N)
set -u
SEED=${1:-43}
BUILD=${BUILD:-build}
KILLS_TRAIN=${KILLS_TRAIN:-20}
KILLS_RUN=${KILLS_RUN:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "$BUILD" && pwd)/refgeo
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kill-campaign.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RANDOM=$SEED

FIX=$ROOT/tests/fixtures/hf_tiny/qwen2_bf16
MODEL=$WORK/model
synth=$(jq -r '.synth | "--seed \(.seed) --dtype \(.dtype) --std \(.std) --norm-std \(.norm_std)"' "$FIX.expected.json")
# shellcheck disable=SC2086
"$BIN" synth-model --config "$FIX/config.json" --out "$MODEL" $synth --quiet >/dev/null || exit 1
cp "$FIX/config.json" "$FIX/tokenizer.json" "$FIX/tokenizer_config.json" "$MODEL/"

train_ini() { # $1: extra [model] lines, with \n escapes
  printf '[model]\nmodel = %s\nthreads = 2\ncheckpoint_dtype = f32\n%b' "$MODEL" "$1"
  printf '[optim]\nlr = 1e-3\nupdates = 4\ngrad_accum = 2\nsave_steps = 0 2 4\nstate_every = 1\n'
  printf '[pool]\npool_size = 3\ncases_per_step = 2\ngcg_steps = 1\nsearch_width = 8\ntop_k = 4\ngcg_batch = 8\nreset_every = 2\n'
  printf '[data]\nutility_prompts = 6\nutility_max_new_tokens = 8\nutility_per_step = 2\nutility_labels = assistant\n'
  printf 'max_case_tokens = 400\nmax_utility_tokens = 128\n'
}
train_ini "" > "$WORK/full.ini"
train_ini 'mode = lora\nlora_rank = 4\nlora_targets = q,v,gate\n' > "$WORK/lora.ini"
sed -e 's/^updates = 4/updates = 2/' -e 's/^save_steps = .*/save_steps = 0 1 2/' "$WORK/full.ini" > "$WORK/train.ini"
run_ini() { # $1: the run directory
  printf '[run]\nout = %s\ntrain_config = train.ini\nthreads = 2\nstages = train capture geometry asr\n' "$1"
  printf '[capture]\nn_train = 6\nn_val = 4\n[geometry]\nmax_val = 4\nn_min = 2\n'
  printf '[asr]\nbehaviors = %s\nlimit = 3\nmax_new_tokens = 4\n' "$ROOT/data/harmbench/harmbench_behaviors_text_val.csv"
}

now() { date +%s.%N; }
# A delay in [0, $1) seconds from the seeded stream, as a decimal.
delay() { awk -v r=$(( (RANDOM << 15) | RANDOM )) -v t="$1" 'BEGIN { printf "%.3f", t * r / 1073741824 }'; }

# The files that must come out bitwise equal, as "sha256  path" lines.
outputs() {
  (cd "$1" && find state checkpoint-* -name '*.f32' -o -name model.safetensors 2>/dev/null | sort | xargs sha256sum)
}

# Whatever a finished trial must not hold beside its results.
leftovers() {
  (cd "$1" && { find . -name '*.tmp*' -o -name '*.old'; ls state | grep -vx "step-$2"; } 2>/dev/null | sort | tr '\n' ' ')
}

kills_total=0 kills_kind=0 failed=0
# trial KIND NAME: KIND train (full.ini or lora.ini in NAME) or run
trial() {
  local kind=$1 cfg=$2 ref=$3 ref_time=$4 dir=$5 kills=0 attempt rc pid
  rm -rf "$dir"
  for attempt in $(seq 1 50); do
    if [ "$kind" = train ]; then
      local more=""
      [ -f "$dir/config.ini" ] && more=--resume
      "$BIN" train --config "$cfg" --out "$dir" $more --quiet >/dev/null 2>"$WORK/err" &
    else
      "$BIN" run "$cfg" >/dev/null 2>"$WORK/err" &
    fi
    pid=$!
    local d
    d=$(delay "$ref_time")
    # the first attempt is always killed; later ones with probability 3/4
    if [ "$attempt" -eq 1 ] || [ $((RANDOM % 4)) -ne 0 ]; then
      sleep "$d"
      if kill -KILL "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
    fi
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ]; then break; fi
    if [ "$rc" -ne 137 ]; then echo "  attempt $attempt exit $rc: $(head -c 300 "$WORK/err")"; fi
  done
  local why="" newest
  newest=$(ls "$dir/state" | sed -n 's/^step-\([0-9]*\)$/\1/p' | sort -n | tail -1)
  [ "$rc" -eq 0 ] || why="$why never completed;"
  [ -z "$(leftovers "$dir" "$newest")" ] || why="$why left: $(leftovers "$dir" "$newest");"
  [ "$(outputs "$dir")" = "$(outputs "$ref")" ] || why="$why outputs differ from the reference;"
  (cd "$dir" && sha256sum --quiet -c SHA256SUMS && cd "state/step-$newest" && sha256sum --quiet -c SHA256SUMS) \
    >/dev/null 2>&1 || why="$why sha256sum -c fails;"
  kills_total=$((kills_total + kills))
  kills_kind=$((kills_kind + kills))
  if [ -n "$why" ]; then failed=$((failed + 1)); fi
  echo "$kind $(basename "$cfg") trial $6: $kills kills, $attempt attempts: ${why:-bitwise the reference, nothing left}"
}

for mode in full lora; do
  t0=$(now)
  "$BIN" train --config "$WORK/$mode.ini" --out "$WORK/ref-$mode" --quiet >/dev/null 2>&1 || exit 1
  t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  echo "train $mode: uninterrupted run ${t} s"
  kills_kind=0 i=0
  while [ "$kills_kind" -lt "$KILLS_TRAIN" ] && [ "$i" -lt 100 ]; do
    i=$((i + 1))
    trial train "$WORK/$mode.ini" "$WORK/ref-$mode" "$t" "$WORK/k-$mode" "$i"
  done
  echo "train $mode: $kills_kind kills in $i trials"
done
run_ini "$WORK/ref-run" > "$WORK/ref-run.ini"
run_ini "$WORK/k-run" > "$WORK/k-run.ini"
t0=$(now)
"$BIN" run "$WORK/ref-run.ini" >/dev/null 2>&1 || { echo "reference run failed"; exit 1; }
t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
echo "run: uninterrupted job ${t} s"
kills_kind=0 i=0
while [ "$kills_kind" -lt "$KILLS_RUN" ] && [ "$i" -lt 100 ]; do
  i=$((i + 1))
  trial run "$WORK/k-run.ini" "$WORK/ref-run" "$t" "$WORK/k-run" "$i"
done
echo "run: $kills_kind kills in $i trials"
echo "seed $SEED: $kills_total kills, $failed trials with a difference"
[ "$failed" -eq 0 ]
