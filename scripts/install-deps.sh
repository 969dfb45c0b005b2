#!/usr/bin/env bash
# Installs refgeo's build and test dependencies from Debian's packages.
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and
# libomp-dev (OpenMP for clang) build the fuzzing harnesses (scripts/fuzz.sh).
# chromium and python3-venv serve the optional report checks (tests/check/,
# scripts/check-env.sh). hipcc and libamdhip64-dev build the HIP flavor of
# the GPU backend (scripts/test.sh compiles it); libtbb-dev serves
# scripts/gpu-check-cpu.sh. The CUDA toolkit is not a Debian package here: a
# CUDA build uses the one installed under /usr/local/cuda, when there is one.
# Idempotent: packages already present are skipped, so a second run is quick
# and needs no network.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config unzip ca-certificates python3-pip python3-venv
  libopenblas-dev liblapacke-dev
  libhdf5-dev hdf5-tools
  libcsv-dev libcjson-dev
  libpcre2-dev libinih-dev libutf8proc-dev
  libopenmpi-dev openmpi-bin
  libcmocka-dev
  time strace
  clang libclang-rt-14-dev libomp-dev
  chromium
  hipcc libamdhip64-dev libtbb-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
