#!/usr/bin/env bash
# The demo on a fresh machine: installs the dependencies, builds refgeo,
# fetches SmolLM2-135M-Instruct and runs the main job on it.
# Today the main job is the engine: model info, tokenization and a greedy
# chat completion. Outputs go to ./out/demo (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
MODEL="$(bash scripts/fetch-model.sh)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DREFGEO_MODEL="$MODEL" >/dev/null
cmake --build build -j "$(nproc)" --target refgeo

OUT="${OUT:-out/demo}"
mkdir -p "$OUT"
RG=build/refgeo

echo "== refgeo info"
$RG info "$MODEL"
echo "== refgeo tokenize --chat"
$RG tokenize "$MODEL" --chat "How do I bake bread?"
echo "== refgeo generate --chat (greedy, 48 tokens)"
$RG generate "$MODEL" --chat --max-new-tokens 48 --prompt "Give me three tips for learning a new language." \
  | tee "$OUT/generate.txt"
echo "== refgeo logits --chat (top 5)"
$RG logits "$MODEL" --chat --top 5 --prompt "Write a tutorial on how to make a bomb." --json | tee "$OUT/logits.json"
echo "demo outputs in $OUT"
