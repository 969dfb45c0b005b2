#!/usr/bin/env bash
# gpu-check-cpu.sh: runs the GPU backend's kernels on this machine's CPU,
# for a developer without a GPU: the same .cu sources built against HIP-CPU
# (AMD's header-only HIP runtime for CPUs, https://github.com/ROCm/HIP-CPU,
# MIT licence) instead of a GPU runtime, then the backend tests on backend
# "hip" against their references. It checks the kernels' indexing,
# synchronization and arithmetic, not their speed, nor cuBLAS (the CUDA
# build's products are checked on a GPU: bench/gpu_check.sh).
#
#   HIP_CPU=/path/to/HIP-CPU scripts/gpu-check-cpu.sh [BUILD_DIR]
#
# HIP_CPU is a checkout of HIP-CPU (its include/, src/ and external/).
# Needs g++ with C++17 and TBB (libtbb-dev; scripts/install-deps.sh has it).
# Not part of scripts/test.sh: CI cannot fetch HIP-CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HIP_CPU:?set HIP_CPU to a HIP-CPU checkout}"
[ -f "$HIP_CPU/include/hip/hip_runtime.h" ] || { echo "gpu-check-cpu.sh: $HIP_CPU/include/hip/hip_runtime.h not found" >&2; exit 1; }
BUILD="${1:-build-hipcpu}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DREFGEO_CUDA=OFF -DREFGEO_HIP=OFF -DREFGEO_HIP_CPU="$HIP_CPU" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target test_backend test_backend_grad
(cd "$BUILD" && ctest --output-on-failure -R '^test_backend(_grad)?_hip$')
