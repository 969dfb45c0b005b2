#!/bin/sh
# train_plan.sh: is `refgeo train --plan` within 15% of a real run's peak RSS?
#
# Plans data/r2d2-smollm2.ini on the cpu (--json), then runs one update of
# it (--updates 1 --gcg-steps 1 --utility-prompts 8 --save-steps 0, into a
# temporary run dir) twice under /usr/bin/time -v:
#   1. with MALLOC_PERTURB_ set: glibc then writes every block it hands out
#      (calloc zeroes even fresh mmapped pages), so every allocated page is
#      resident, as a device backend's allocations are; the plan counts
#      allocations, so this peak RSS must be within 15% of it (exit 1
#      otherwise);
#   2. as a user runs it: pages of calloc'ed buffers stay unmapped until a
#      batch writes them, and batches shorter than the config's caps
#      (max_case_tokens, max_utility_tokens, GCG's target rows) leave part
#      of every activation, logit and cache buffer untouched, so the peak
#      RSS is lower than the plan; printed for information.
#
#   bench/train_plan.sh          (BUILD=build-dir, MODEL=SmolLM2 GGUF, THREADS=2)
#
# Bench only, not CI: two training runs take about 8 minutes on 2 cores.
set -eu
. "$(dirname "$0")/timed.sh"
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
MODEL=${MODEL:-${REFGEO_MODEL:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
set -- --config "$ROOT/data/r2d2-smollm2.ini" --model "$MODEL" --updates 1 --gcg-steps 1 --utility-prompts 8 \
  --save-steps 0 --threads "$THREADS"

"$BUILD/refgeo" train --plan "$@"
PLAN=$("$BUILD/refgeo" train --plan "$@" --json | sed -n 's/.*"total":\([0-9.e+]*\).*/\1/p')

MALLOC_PERTURB_=204 timed_run "$TMP/perturbed.log" "$BUILD/refgeo" train "$@" --out "$TMP/run-perturbed"
timed_run "$TMP/plain.log" "$BUILD/refgeo" train "$@" --out "$TMP/run-plain"

rss() { sed -n 's/.*Maximum resident set size (kbytes): *//p' "$1"; }
awk -v plan="$PLAN" -v a="$(rss "$TMP/perturbed.log")" -v b="$(rss "$TMP/plain.log")" 'BEGIN {
  g = 1024 * 1024 * 1024; a *= 1024; b *= 1024
  printf "train_plan: plan %.3f GiB; peak RSS %.3f GiB with every allocated page resident (plan/RSS %.3f), %.3f GiB as run (plan/RSS %.3f)\n", plan / g, a / g, plan / a, b / g, plan / b
  if (plan > 1.15 * a || plan < 0.85 * a) { print "train_plan: FAIL: the plan is not within 15% of the resident peak"; exit 1 }
}'
