#!/usr/bin/env bash
# The demo on a fresh machine: installs the dependencies, builds refgeo,
# fetches SmolLM2-135M-Instruct and runs the main job on it:
#   a two-checkpoint series (the base model and a perturbed copy that refgeo
#   writes) -> activation capture (HDF5) -> refusal geometry (three CSVs)
#   -> HarmBench DirectRequest ASR per checkpoint -> verdict against
#   Lan et al. 2026's published R2D2 curve.
# Outputs go to ./out/demo (override with OUT=...). Takes about 17 minutes
# on 2 cores once built (most of it is scoring 180 carrier candidates per
# checkpoint); DEMO_SMALL=0 uses the full default prompt sets.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
MODEL="$(bash scripts/fetch-model.sh)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DREFGEO_MODEL="$MODEL" >/dev/null
cmake --build build -j "$(nproc)" --target refgeo

OUT="${OUT:-out/demo}"
mkdir -p "$OUT"
RG=build/refgeo
if [ "${DEMO_SMALL:-1}" = 1 ]; then SUBSET=(--n-train 32 --n-val 16); VAL=(--max-val 8); else SUBSET=(); VAL=(); fi

echo "== the model"
$RG info "$MODEL"
$RG generate "$MODEL" --chat --max-new-tokens 40 --prompt "Give me three tips for learning a new language."

echo "== a two-checkpoint series: step 0 = base, step 100 = a perturbed copy"
[ -f "$OUT/perturbed.gguf" ] || $RG perturb --model "$MODEL" --out "$OUT/perturbed.gguf" --scale 0.05 --seed 1
printf 'step,path\n0,%s\n100,%s\n' "$MODEL" "$(cd "$OUT" && pwd)/perturbed.gguf" >"$OUT/manifest.csv"

echo "== capture: resid_pre at the post-instruction positions of every layer"
$RG capture --manifest "$OUT/manifest.csv" --out "$OUT/acts.h5" "${SUBSET[@]}"

echo "== geometry: directions, spectra, carrier scores, migration"
$RG geometry --acts "$OUT/acts.h5" --manifest "$OUT/manifest.csv" --out "$OUT/geometry" "${VAL[@]}"
cat "$OUT/geometry/migration.csv"
# A 135M model barely refuses, so RD's induce >= 0 rule may leave nothing
# admissible; these are the candidates that failed only that rule.
echo "== lowest-bypass candidates rejected only by the induce rule (step,pos,layer,bypass,induce,kl)"
awk -F, '$8 == "induce"' "$OUT/geometry/carriers.csv" | sort -t, -k4,4g | head -n 5 | cut -d, -f1-6

# HarmBench ships in data/harmbench; refgeo asr finds its refusal list there.
echo "== HarmBench DirectRequest ASR on the standard val behaviors (64 new tokens)"
$RG asr --manifest "$OUT/manifest.csv" --behaviors data/harmbench/harmbench_behaviors_text_val.csv \
  --functional-category standard --max-new-tokens 64 --out "$OUT/asr"
cat "$OUT/asr/asr.csv"
echo "== does this series reproduce Lan et al. 2026's R2D2 curve? (it is not R2D2-trained, so it should not)"
# The published curve is fixed-source ASR at steps 50-500; the demo has
# DirectRequest at steps 0 and 100, so only step 100 is compared, and the
# output says that the protocols differ. Exit 1 (not reproduced) is expected.
$RG repro --published data/published/lan2026_r2d2.csv --measured "$OUT/asr/asr.csv" --method R2D2 \
  --attack fixed_source --measured-attack DirectRequest --common-steps || [ $? = 1 ]
echo "demo outputs in $OUT"
