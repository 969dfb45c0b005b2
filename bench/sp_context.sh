#!/bin/bash
# sp_context.sh: AutoSP's measurement (arXiv 2604.27089) for refgeo: how
# much longer a sequence full fine-tuning of SmolLM2 trains on at a fixed
# memory budget per rank with sequence parallelism (2 ranks) and the
# planner's recompute policy than with one process that keeps every
# activation, at what throughput; and the planner's error against the
# measured peak RSS.
#
#   bench/sp_context.sh      (BUILD=build-dir, MODEL=SmolLM2 GGUF, BUDGET=GiB per rank, 4)
#
# 1. Planner accuracy: bench_sp_context at five (ranks, recompute, length)
#    settings; each prints the plan, the largest rank's peak RSS and their
#    ratio (goal: within 15%).
# 2. Trainable context: with --longest, the longest sequence (multiple of
#    64 tokens) whose plan fits BUDGET, (a) in one process keeping every
#    activation, (b) over 2 ranks with the planner's policy (least
#    recompute that fits: at the limit, full recompute) and (c) over 2
#    ranks recomputing all but attention. A length counts only if the
#    measured peak RSS is within BUDGET; otherwise it is cut by 5% and run
#    again. Prints each length, tokens/s, and the ratios to (a).
# 3. The lengths of (b) and (c) in one process keeping everything (past
#    the budget): the tokens/s at equal length.
# Both sides use the machine's cores: one process of all threads, or 2
# ranks of half as many. Bench only, not CI: about 50 minutes on 2 cores.
set -eu
BUILD=${BUILD:-build}
BUDGET=${BUDGET:-4}
MODEL=${MODEL:-${REFGEO_MODEL:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
bash "$(dirname "$0")/cpu_info.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() { # ranks, args...: runs bench_sp_context, output to $TMP/out
  local np="$1"; shift
  if [ "$np" = 1 ]; then "$BUILD/bench_sp_context" --model "$MODEL" "$@" >"$TMP/out"
  else mpirun --oversubscribe -np "$np" "$BUILD/bench_sp_context" --model "$MODEL" "$@" >"$TMP/out"; fi
  cat "$TMP/out"
}
field() { sed -n "$1" "$TMP/out"; }

echo "== planner accuracy (measured peak RSS / plan)"
for setting in "1 none 1024" "2 none 1024" "2 matmuls 2048" "2 full 2048" "2 full 4096"; do
  set -- $setting
  run "$1" --recompute "$2" --length "$3" --steps 1 | sed -n 's/^measured/  '"$1 ranks, $2, $3 tokens"': measured/p'
done

echo "== longest trainable sequence in $BUDGET GiB per rank"
longest() { # label ranks recompute: prints "LENGTH TOKENS_PER_S"
  local label="$1" np="$2" rc="$3" len peak
  run "$np" --budget-gib "$BUDGET" --longest --recompute "$rc" --steps 1 >/dev/null
  for try in 1 2 3 4; do
    len=$(field 's/^model .*, \([0-9]*\) tokens over.*/\1/p')
    peak=$(field 's/^measured peak RSS (largest rank): \([0-9.]*\) GiB.*/\1/p')
    if awk -v p="$peak" -v b="$BUDGET" 'BEGIN { exit !(p <= b) }'; then break; fi
    len=$(awk -v l="$len" 'BEGIN { printf "%d", int(l * 0.95 / 64) * 64 }')
    run "$np" --length "$len" --recompute "$(field 's/.*recompute \([a-z]*\) *:.*/\1/p')" --steps 1 >/dev/null
  done
  local tps; tps=$(field 's/.*s (median.*), \([0-9.]*\) tokens\/s/\1/p')
  echo "  $label: $(field 's/^plan: *//p')" >&2
  echo "  $label: $len tokens, peak RSS $peak GiB, $tps tokens/s" >&2
  echo "$len $tps"
}
read -r L0 T0 < <(longest "1 process, keep everything" 1 none)
read -r L1 T1 < <(longest "2 ranks, the planner's policy" 2 auto)
read -r L2 T2 < <(longest "2 ranks, recompute all but attention" 2 matmuls)
awk -v l0="$L0" -v t0="$T0" -v l1="$L1" -v t1="$T1" -v l2="$L2" -v t2="$T2" 'BEGIN {
  printf "context: planner %.2fx (%d / %d tokens) at %.2fx the tokens/s; all but attention %.2fx at %.2fx the tokens/s (AutoSP: 2.7x at negligible loss)\n",
         l1 / l0, l1, l0, t1 / t0, l2 / l0, t2 / t0 }'
# tokens/s falls with the length itself (attention is quadratic): the same
# lengths in one process keeping everything, past the budget, separate the
# cost of the split and the recompute from that of the length
echo "== one process, keep everything, at the same lengths (no budget)"
for pair in "$L1 $T1" "$L2 $T2"; do
  set -- $pair
  run 1 --length "$1" --recompute none --steps 1 >/dev/null
  tps=$(field 's/.*s (median.*), \([0-9.]*\) tokens\/s/\1/p')
  awk -v l="$1" -v a="$tps" -v b="$2" 'BEGIN { printf "  %d tokens: one process %.1f tokens/s; 2 ranks %.1f (%.2fx)\n", l, a, b, b / a }'
done
