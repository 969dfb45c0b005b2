#!/usr/bin/env bash
# The demo on a fresh machine: installs the dependencies, builds refgeo,
# fetches SmolLM2-135M-Instruct and runs the main job on it with one
# command, `refgeo run data/demo.ini`:
#   a short R2D2 run (checkpoints at steps 0, 3 and 6) -> activation capture
#   (HDF5) -> refusal geometry (CSVs) -> HarmBench DirectRequest ASR and
#   XSTest over-refusal per checkpoint -> report.html with plots, and a
#   notebook in notebooks-export/.
# Outputs go to runs/demo (override with OUT=...). About 15 minutes on 2
# cores once built; a second run finds every stage up to date and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
MODEL="$(bash scripts/fetch-model.sh)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DREFGEO_MODEL="$MODEL" >/dev/null
cmake --build build -j "$(nproc)" --target refgeo

OUT="${OUT:-runs/demo}"
build/refgeo run data/demo.ini --set "run.out=$OUT" --set "train.model=$MODEL"
echo "demo: the report is $OUT/report.html; the notebook notebooks-export/$(basename "$OUT").ipynb"
