#!/usr/bin/env bash
# gpu-carry.sh: packs a CUDA build of refgeo for a GPU machine that has the
# NVIDIA driver but none of refgeo's libraries (the device of
# bench/gpu_check.sh): a Release build for a generic x86-64 CPU
# (REFGEO_NATIVE=OFF; the SIMD kernels dispatch at run time), its programs
# in DEST/bin, and in DEST/lib every shared library they load that is not
# glibc's. The CUDA runtime is linked in, and cuBLAS is found on the GPU
# machine at run time (its toolkit's, or PyTorch's wheels'), so neither is
# carried. Packs DEST into DEST.tar.xz and prints the sizes: the device
# tool carries at most 64 MiB.
#
#   scripts/gpu-carry.sh [BUILD_DIR] [DEST]     (defaults: build-carry, gpu-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-carry}
DEST=${2:-gpu-carry}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DREFGEO_NATIVE=OFF -DREFGEO_CUDA=ON >/dev/null
PROGRAMS=(refgeo bench_forward bench_train tests/test_backend tests/test_backend_grad tests/test_backward
          tests/test_r2d2_update tests/test_train tests/test_train_device tests/test_forward)
cmake --build "$BUILD" -j "$(nproc)" --target refgeo bench_forward bench_train test_backend test_backend_grad \
  test_backward test_r2d2_update test_train test_train_device test_forward
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
for p in "${PROGRAMS[@]}"; do
  cp "$BUILD/$p" "$DEST/bin/"
  strip "$DEST/bin/$(basename "$p")"
done
# every library a program resolves, but glibc's own (present everywhere)
for p in "$DEST"/bin/*; do ldd "$p"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libresolv)\.so' |
  while read -r lib; do cp -L "$lib" "$DEST/lib/"; done
# OpenBLAS alone is 36 MB: the device gets an xz archive, which
# bench/gpu_check.sh unpacks
tar -C "$DEST" -cJf "$DEST.tar.xz" bin lib
du -sh "$DEST" "$DEST.tar.xz" | awk '{print "gpu-carry: " $2 " " $1}'
echo "gpu-carry: carry $DEST.tar.xz (the device tool carries at most 64 MiB)"
