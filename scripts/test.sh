#!/usr/bin/env bash
# Runs every test: installs dependencies, fetches the test models, then builds
# and runs the CTest suite twice: a Release build (in a copy of the tree with
# no shared data folder next to it: see below), and a Debug build under
# AddressSanitizer + UndefinedBehaviorSanitizer (both with the CUDA flavor of
# the GPU backend where nvcc is found; its tests skip without a GPU); the
# matmul tests again built for AVX2; a compile-only HIP build where hipcc is
# found; then every libFuzzer harness for 30 s on its corpus (scripts/fuzz.sh).
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
# the optional checks' Python (report in Chromium, notebook in Jupyter); without
# it (no PyPI) test_report skips those checks and says so
REFGEO_CHECK_PYTHON="$(bash scripts/check-env.sh)" || REFGEO_CHECK_PYTHON=""
export REFGEO_CHECK_PYTHON
JOBS="$(nproc)"

run_suite() { # build-dir, cmake args...
  local dir="$1"; shift
  cmake -S . -B "$dir" -DREFGEO_MODEL="$REFGEO_MODEL" -DREFGEO_MODEL_QWEN="$REFGEO_MODEL_QWEN" -DREFGEO_TOKENIZER_SUITE="$REFGEO_TOKENIZER_SUITE" -DREFGEO_CHECK_PYTHON="$REFGEO_CHECK_PYTHON" "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS")
}

# The Release suite runs in a copy of the tree that has no shared/ folder next to
# it, so it fails if any test, default path or script reads data from outside
# the repository (issue 10: the project carries its own data). The copy holds
# every file git tracks or would add (a clean clone in CI; uncommitted work
# too when run by hand), none that it ignores (builds, models, out/). Its
# build/ is kept between runs, so a rerun by hand rebuilds only what changed:
# a file is copied, stamped now, only where its content differs from the
# copy's (a file restored with an older mtime would otherwise keep its stale
# object).
copy_tree() { # dest: make dest's sources (all but build/) this tree's
  local dest="$1" stage f
  stage=$(mktemp -d)
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done |
    tar --null -T - -cf - | tar -xf - -C "$stage"
  mkdir -p "$dest"
  (cd "$dest" && find . -path ./build -prune -o \( -type f -o -type l \) -print0) |
    while IFS= read -r -d '' f; do [ -e "$stage/$f" ] || [ -L "$stage/$f" ] || rm -f "$dest/$f"; done
  (cd "$stage" && find . \( -type f -o -type l \) -print0) |
    while IFS= read -r -d '' f; do
      if [ -L "$stage/$f" ] || [ -L "$dest/$f" ] || ! cmp -s "$stage/$f" "$dest/$f"; then
        mkdir -p "$(dirname "$dest/$f")" && rm -f "$dest/$f" && cp -P "$stage/$f" "$dest/$f"
      fi
    done
  rm -rf "$stage"
}
# keep_build_of SRC BUILD: removes BUILD when its cache was made from
# another source folder (an older test.sh configured it from the checkout
# it ran in), which cmake refuses to reuse
keep_build_of() {
  local cache="$2/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$1" "$cache"; then
    echo "test.sh: $2 was configured from another source; starting it anew"
    rm -rf "$2"
  fi
}
COPY_ROOT="${TMPDIR:-/tmp}/refgeo-selfcontained-$(id -u)"
copy_tree "$COPY_ROOT/refgeo"
keep_build_of "$COPY_ROOT/refgeo" "$COPY_ROOT/refgeo/build"
if [ -e "$COPY_ROOT/shared" ]; then echo "test.sh: $COPY_ROOT/shared exists; remove it" >&2; exit 1; fi
echo "== release build (in $COPY_ROOT/refgeo, with no shared/ beside it)"
(cd "$COPY_ROOT/refgeo" && run_suite build -DCMAKE_BUILD_TYPE=Release)
# The folders depend on each other only in their order and nothing is in a
# cycle, by includes and by the objects' calls (scripts/check-deps.sh); and
# the check can fail: an include from tensor/ into engine/ must be refused.
echo "== dependency check"
sh scripts/check-deps.sh "$COPY_ROOT/refgeo" "$COPY_ROOT/refgeo/build"
mutant=$(mktemp -d)
cp -r src tools "$mutant"
echo '#include "engine/forward.h"' >>"$mutant/src/tensor/dequant.c"
if sh scripts/check-deps.sh "$mutant" >"$mutant/out.txt" 2>&1; then
  echo "test.sh: check-deps.sh accepted an include from tensor/ into engine/" >&2; exit 1
fi
echo "check-deps.sh refuses the mutant: $(grep -m1 'tensor/dequant' "$mutant/out.txt")"
rm -rf "$mutant"
# cmake --install, and the installed refgeo run from elsewhere (below, with an
# out-of-tree build too)
echo "== install check"
bash scripts/check-install.sh "$COPY_ROOT/refgeo/build" "$REFGEO_MODEL"
echo "== ASan + UBSan build"
# leak checking stays on; OpenMP's runtime keeps thread pools alive at exit,
# which LeakSanitizer does not count as leaks.
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DREFGEO_SANITIZE=ON
# The skinny and panel products pick their vectors at compile time; neither
# suite above builds their AVX2 variant (Release is -march=native, the
# sanitizer build has no -march: SSE2). Where the CPU has AVX2, the product
# tests (and test_lora, whose real-model gradients are the tightest check of
# their accuracy) run once more, built for x86-64-v3.
if grep -qw avx2 /proc/cpuinfo; then
  echo "== AVX2 build of the product tests"
  avx2_tests=(test_panel_matmul test_backend test_q8_matmul test_lora)
  # outside the source tree: an out-of-tree build must find its data too. Its
  # source is the copy, whose path never changes: a build folder kept in
  # $COPY_ROOT from a checkout elsewhere (CI's clone, a hand run in another
  # tree) would otherwise hold a cache cmake refuses for the new source.
  avx2_build="$COPY_ROOT/build-avx2"
  keep_build_of "$COPY_ROOT/refgeo" "$avx2_build"
  cmake -S "$COPY_ROOT/refgeo" -B "$avx2_build" -DCMAKE_BUILD_TYPE=Release -DREFGEO_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v3 \
    -DREFGEO_CUDA=OFF -DREFGEO_HIP=OFF -DREFGEO_MODEL="$REFGEO_MODEL" -DREFGEO_MODEL_QWEN="$REFGEO_MODEL_QWEN" >/dev/null
  cmake --build "$avx2_build" -j "$JOBS" --target refgeo "${avx2_tests[@]}" # test_lora makes its models with the CLI
  (cd "$avx2_build" && ctest --output-on-failure -R "^($(IFS='|'; echo "${avx2_tests[*]}"))\$")
  echo "== out-of-tree build check"
  bash scripts/check-install.sh "$COPY_ROOT/refgeo/build" "$REFGEO_MODEL" "$avx2_build"
fi
# The GPU backend's other flavor: the suites above build CUDA where nvcc is
# found (their GPU tests skip without a device); HIP is compiled here, with
# warnings as errors, so that a source only nvcc accepts fails CI.
if command -v hipcc >/dev/null; then
  echo "== HIP build (compile only)"
  cmake -S . -B build-hip -DCMAKE_BUILD_TYPE=Release -DREFGEO_CUDA=OFF -DREFGEO_HIP=ON -DREFGEO_TESTS=OFF >/dev/null
  cmake --build build-hip -j "$JOBS" --target refgeo
fi
echo "== fuzzing, 30 s per harness"
bash scripts/fuzz.sh 30
