#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [SECONDS] [HARNESS...]
#
# Builds the libFuzzer harnesses of tests/fuzz/ (build-fuzz: clang,
# -fsanitize=fuzzer,address,undefined) and runs each one (all of them, or the
# HARNESS names given, e.g. gguf tokenizer) for SECONDS (default 30) on its
# working corpus $REFGEO_HOME/fuzz-corpus/NAME (default REFGEO_HOME
# ~/.cache/refgeo). The working corpus lives outside git and grows from run to
# run; the committed seeds of tests/fuzz/corpus/NAME are read every time.
#
# Stops at the first finding (a crash, a sanitizer report, a leak, a timeout,
# an allocation over 256 MB, or a fuzz oracle of tests/fuzz/fuzz_util.h),
# prints the reproducer's path and exits 1. Otherwise prints, per harness,
# executions, executions per second and coverage (libFuzzer's cov: edges and
# ft: features), and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${1:-30}"
shift || true
REFGEO_HOME="${REFGEO_HOME:-$HOME/.cache/refgeo}"
BUILD="build-fuzz"
# -O2 -g without NDEBUG: asserts stay on and reports have line numbers. No
# GPU backend: the harnesses read files, and nvcc takes no fuzzer flags.
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DREFGEO_FUZZ=ON -DREFGEO_TESTS=OFF -DREFGEO_CUDA=OFF -DREFGEO_HIP=OFF >/dev/null
cmake --build "$BUILD" --target fuzzers -j "$(nproc)" >/dev/null

if [ "$#" -gt 0 ]; then
  names=("$@")
else
  names=()
  for src in tests/fuzz/fuzz_*.c; do
    name="$(basename "$src" .c)"
    [ "$name" = fuzz_util ] || names+=("${name#fuzz_}")
  done
fi

total=0
for name in "${names[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$name"
  [ -x "$bin" ] || { echo "fuzz.sh: no harness '$name' ($bin)" >&2; exit 2; }
  corpus="$REFGEO_HOME/fuzz-corpus/$name"
  findings="$REFGEO_HOME/fuzz-findings/$name"
  log="$REFGEO_HOME/fuzz-logs/$name.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  dict=()
  [ -f "tests/fuzz/dict/$name.dict" ] && dict=("-dict=tests/fuzz/dict/$name.dict")
  # -malloc_limit_mb=256: no input of a few KB may make refgeo allocate
  # 256 MB at once (issue 17: refuse hostile sizes before allocating).
  # -timeout=10: one input may take at most 10 s (the slowest seed takes ms).
  rc=0
  "$bin" -max_total_time="$SECS" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -artifact_prefix="$findings/" "${dict[@]}" \
    "$corpus" "tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log" >&2
    repro="$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1 | cut -d' ' -f5)"
    echo "fuzz.sh: FINDING in harness '$name' (log $log)" >&2
    echo "fuzz.sh: reproducer: ${repro:-none written; see the log}" >&2
    echo "fuzz.sh: rerun: $bin ${repro:-}; then add it as tests/data/bad/fuzz-$name/<what-it-is> (README, Fuzzing)" >&2
    exit 1
  fi
  runs="$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | awk '{print $2}')"
  speed="$(grep -o "stat::average_exec_per_sec: *[0-9]*" "$log" | awk '{print $2}')"
  cov="$(grep -o "cov: [0-9]* ft: [0-9]*" "$log" | tail -n 1)"
  printf 'fuzz %-14s %10d execs %7d exec/s  %s\n' "$name" "$runs" "$speed" "${cov:-cov: ? ft: ?}"
  total=$((total + runs))
done
echo "fuzz: ${#names[@]} harnesses, $total executions, no findings"
