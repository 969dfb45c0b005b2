#!/bin/sh
# capture_7b.sh: `refgeo capture` on the Mistral-7B-shaped synthetic bf16
# model of scale_7b.sh (written once, then reused), 8 prompts (3+3 train,
# 1+1 val from data/prompts), resid_pre at every layer, under
# /usr/bin/time -v. Prints peak RSS and wall time; fails above 20 GiB.
#   bench/capture_7b.sh            (BUILD=build-dir, THREADS=2)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REFGEO_HOME=${REFGEO_HOME:-$HOME/.cache/refgeo}
DIR="$REFGEO_HOME/synth/mistral-7b-shape"
THREADS=${THREADS:-2}
LIMIT_GIB=20

# scale_7b.sh writes the model (and runs its own forward bench) if it is missing.
[ -f "$DIR/model.safetensors.index.json" ] || BUILD="$BUILD" sh bench/scale_7b.sh

OUT=$(mktemp -d)
LOG="$OUT/time.log"
trap 'rm -rf "$OUT"' EXIT
/usr/bin/time -v "$BUILD/refgeo" capture --model "$DIR" --out "$OUT/acts.h5" --n-train 3 --n-val 1 \
  --threads "$THREADS" 2>"$LOG" || { cat "$LOG" >&2; exit 1; }
grep "tokens/s" "$LOG" >&2 || true
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$LOG")
wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$LOG")
rss_gib=$(awk -v k="$rss_kb" 'BEGIN { printf "%.2f", k / 1048576 }')
echo "capture_7b: peak RSS $rss_gib GiB, wall $wall (8 prompts, resid_pre at 32 layers, $THREADS threads)"
if awk -v k="$rss_kb" -v l="$LIMIT_GIB" 'BEGIN { exit !(k / 1048576 > l) }'; then
  echo "capture_7b: FAIL: peak RSS $rss_gib GiB exceeds $LIMIT_GIB GiB" >&2
  exit 1
fi
