#!/bin/sh
# train_plan.sh: is `refgeo train --plan` within 15% of a real run's peak RSS?
#
# Plans data/r2d2-smollm2.ini on the cpu (--json), then runs one update of
# it (--updates 1 --gcg-steps 1 --utility-prompts 8 --save-steps 0, into a
# temporary run dir) under /usr/bin/time -v. The trainer commits its memory
# when it allocates it (rg_backend_opts.commit: every buffer's pages
# written at once, as a device allocation is held), so the run's peak RSS
# is what the plan counts plus the process's own code and libraries: it
# must be within 15% of the plan (exit 1 otherwise).
#
#   bench/train_plan.sh          (BUILD=build-dir, MODEL=SmolLM2 GGUF, THREADS=2)
#
# Bench only, not CI: a training run takes about 4 minutes on 2 cores.
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

timed_run "$TMP/run.log" "$BUILD/refgeo" train "$@" --out "$TMP/run"

RSS_KB=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$TMP/run.log")
awk -v plan="$PLAN" -v kb="$RSS_KB" 'BEGIN {
  g = 1024 * 1024 * 1024; rss = kb * 1024
  printf "train_plan: plan %.3f GiB, peak RSS %.3f GiB, plan/RSS %.3f\n", plan / g, rss / g, plan / rss
  if (plan > 1.15 * rss || plan < 0.85 * rss) { print "train_plan: FAIL: the plan is not within 15% of the peak RSS"; exit 1 }
}'
