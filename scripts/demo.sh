#!/usr/bin/env bash
# The demo on a fresh machine: installs the dependencies, builds refgeo,
# fetches the model and runs the main job on it with one command,
# `refgeo run CONFIG`:
#   a short R2D2 run -> activation capture (HDF5) -> refusal geometry (CSVs,
#   directions.h5) -> HarmBench DirectRequest ASR and XSTest over-refusal per
#   checkpoint -> report.html with plots, and a notebook in notebooks-export/.
#
#   scripts/demo.sh                 Qwen2.5-Coder-0.5B-Instruct, data/demo-qwen.ini
#                                   (a model that refuses: its refusal direction is
#                                   found, ablated and added; about 7 minutes)
#   MODEL=smollm2 scripts/demo.sh   SmolLM2-135M-Instruct, data/demo.ini (about 7 minutes)
#
# Outputs go to runs/demo-qwen or runs/demo (override with OUT=...); a second
# run finds every stage up to date and says so. It ends with a summary: the
# refusal carrier, ASR with it ablated, refusal with it added, and the
# verdict against Lan et al. 2026's published curve.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${MODEL:-qwen}" in
  qwen | qwen2.5-coder-0.5b) NAME=qwen2.5-coder-0.5b CONFIG=data/demo-qwen.ini DEFAULT_OUT=runs/demo-qwen ;;
  smollm2) NAME=smollm2 CONFIG=data/demo.ini DEFAULT_OUT=runs/demo ;;
  *)
    echo "demo: unknown MODEL '$MODEL' (qwen or smollm2)" >&2
    exit 2
    ;;
esac

bash scripts/install-deps.sh
MODEL_PATH="$(bash scripts/fetch-model.sh "$NAME")"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target refgeo

OUT="${OUT:-$DEFAULT_OUT}"
build/refgeo run "$CONFIG" --set "run.out=$OUT" --set "train.model=$MODEL_PATH"
bash scripts/demo_summary.sh build/refgeo "$OUT"
echo "demo: the report is $OUT/report.html; the notebook notebooks-export/$(basename "$OUT").ipynb"
