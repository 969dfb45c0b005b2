#!/usr/bin/env bash
# Runs every test: installs dependencies, fetches the test models, then builds
# and runs the CTest suite twice: a Release build, and a Debug build under
# AddressSanitizer + UndefinedBehaviorSanitizer; then every libFuzzer harness
# for 30 s on its corpus (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
REFGEO_MODEL="$(bash scripts/fetch-model.sh)"
export REFGEO_MODEL
# the second real model (qwen2): the fixture tests run on both
REFGEO_MODEL_QWEN="$(bash scripts/fetch-model.sh qwen2.5-coder-0.5b)"
export REFGEO_MODEL_QWEN
# llama.cpp's tokenizer conformance suite for test_tokenizer_suite
REFGEO_TOKENIZER_SUITE="$(bash scripts/fetch-tokenizer-suite.sh)"
export REFGEO_TOKENIZER_SUITE
JOBS="$(nproc)"

run_suite() { # build-dir, cmake args...
  local dir="$1"; shift
  cmake -S . -B "$dir" -DREFGEO_MODEL="$REFGEO_MODEL" -DREFGEO_MODEL_QWEN="$REFGEO_MODEL_QWEN" -DREFGEO_TOKENIZER_SUITE="$REFGEO_TOKENIZER_SUITE" "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS")
}

echo "== release build"
run_suite build -DCMAKE_BUILD_TYPE=Release
echo "== ASan + UBSan build"
# leak checking stays on; OpenMP's runtime keeps thread pools alive at exit,
# which LeakSanitizer does not count as leaks.
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DREFGEO_SANITIZE=ON
echo "== fuzzing, 30 s per harness"
bash scripts/fuzz.sh 30
