#!/usr/bin/env bash
# islands_traffic.sh: bytes across islands against synchronous data
# parallelism on the same R2D2 run (issue 46, acceptance 2).
#   1. islands: `refgeo islands` and K `refgeo train` islands of CONFIG with
#      [islands] from the environment (H, COMPRESSION, quorum), UPDATES inner
#      updates each;
#   2. sync: `mpirun -np K refgeo train` of the same CONFIG without islands
#      and grad_accum K times an island's, UPDATES updates (each the work of
#      one inner update of every island);
#   3. bytes per update. Islands: what crossed the sync directory, from
#      islands_log.csv: the contributions merged (islands to the store), each
#      version's update message once per island (store to islands: an upper
#      bound; islands that skip a version fetch less), and the whole states
#      read on restarts. Sync: a ring all-reduce of the float32 gradient of
#      the PARAMS trainable floats per update moves 2 (K - 1) / K x 4 PARAMS
#      bytes per rank, 2 (K - 1) x 4 PARAMS over the K ranks (Patarasuk and
#      Yuan 2009; the volume Open MPI's ring allreduce moves for large
#      messages). The reduction is 1 - islands / sync; the issue's goal is
#      99.6%.
#   4. the final losses (mean of the last 5 rows of train_log.csv; islands:
#      over the islands) side by side, and their relative differences (goal:
#      within 5%);
#   5. the final models' losses on one fixed batch: island 0's last
#      checkpoint (the run's final theta_global) and the synchronous run's,
#      each trained one update at lr 0 with no GCG step and the islands'
#      utility replies, so both score the same test cases, suffixes and
#      utility examples (FIXED_ACCUM micro-batches, default 16): the
#      inner losses of step 4 are each island's own weights on one
#      micro-batch, which vary widely from one to the next;
#   6. with EVAL=1, bench/r2d2_eval.sh on both runs (fixed-source ASR with
#      Wilson intervals; island 0's checkpoints hold theta_global at its save
#      steps).
# Resumable: the runs resume (train --resume, the coordinator from its newest
# version); a finished stage is skipped.
#
#   bench/islands_traffic.sh   (BUILD=build OUT=runs/islands-traffic K=2 H=20 UPDATES=40 COMPRESSION=int4 BLOCK=128
#                               QUORUM=0 GRAD_ACCUM=2 CONFIG=data/r2d2-smollm2.ini (its keys, overridden by
#                               the above); CONFIG=tiny: the tiny Qwen2 of tests/fixtures, to check the script;
#                               EVAL=0, EXTRA="--KEY VALUE ..." more flags for every run, e.g. a short check:
#                               EXTRA="--gcg-steps 0 --utility-prompts 8 --threads 1")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
OUT=$(mkdir -p "${OUT:-runs/islands-traffic}" && cd "${OUT:-runs/islands-traffic}" && pwd)
# every run and resume uses one copy of refgeo kept in OUT (bench/refgeo_copy.sh)
BIN=${BIN:-$OUT/refgeo}
source "$ROOT/bench/refgeo_copy.sh"
refgeo_copy "$ROOT/$BUILD/refgeo" "$BIN"
K=${K:-2} H=${H:-20} UPDATES=${UPDATES:-40} COMPRESSION=${COMPRESSION:-int4} BLOCK=${BLOCK:-128}
QUORUM=${QUORUM:-0} GRAD_ACCUM=${GRAD_ACCUM:-2} CONFIG=${CONFIG:-$ROOT/data/r2d2-smollm2.ini} EVAL=${EVAL:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
source "$ROOT/bench/islands_lib.sh"
mkdir -p "$OUT/logs"
if [ "$CONFIG" = tiny ]; then
  MODEL=$OUT/model
  tiny_model "$MODEL"
  write_config "$OUT/base.ini"
  CONFIG=$OUT/base.ini
fi
# every run: CONFIG's keys, these flags over them
common=(--config "$CONFIG" --updates "$UPDATES" --save-steps "0 $UPDATES" --state-every "$H" ${EXTRA:-})
isl=(--sync-dir "$OUT/sync" --islands "$K" --inner-steps "$H" --quorum "$QUORUM" --compression "$COMPRESSION"
  --block-size "$BLOCK" --grad-accum "$GRAD_ACCUM")

if [ ! -e "$OUT/pids/coordinator.ok" ] || ! ls "$OUT"/pids/island*.ok >/dev/null 2>&1; then
  echo "== islands: K $K, H $H, $COMPRESSION, $UPDATES inner updates each" >&2
  supervise coordinator "$BIN" islands "${common[@]}" "${isl[@]}" &
  sups=($!)
  for ((i = 0; i < K; i++)); do
    supervise "island$i" "$BIN" train "${common[@]}" "${isl[@]}" --island "$i" --out "$OUT/island$i" "{RESUME}" &
    sups+=($!)
  done
  for s in "${sups[@]}"; do wait "$s"; done
fi
if ! grep -q "train: $UPDATES updates" "$OUT/logs/sync.log" 2>/dev/null; then
  echo "== sync: mpirun -np $K, grad_accum $((K * GRAD_ACCUM)), $UPDATES updates" >&2
  resume=""
  [ -f "$OUT/sync-run/config.ini" ] && resume=--resume
  mpirun --oversubscribe -np "$K" "$BIN" train "${common[@]}" --sync-dir "" --grad-accum $((K * GRAD_ACCUM)) --out "$OUT/sync-run" \
    $resume >>"$OUT/logs/sync.log" 2>&1
fi

params=$(sed -n 's/.*"params": \([0-9]*\).*/\1/p' "$OUT/sync/run.json")
# the messages the coordinator dropped (stale ones) crossed the wire too
# (no dropped/ folder when nothing was dropped: find fails, which pipefail would make fatal)
dropped=$({ find "$OUT/sync/dropped" -type f -printf '%s\n' 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }')
awk -F, -v k="$K" -v u="$UPDATES" -v p="$params" -v h="$H" -v c="$COMPRESSION" -v dropped="$dropped" 'NR > 1 {
    up += $5; down += $7 * k; reported += $6; rec += $8; n++ }
  END {
    up += dropped
    isl = (up + down + rec) / u; sync = 2 * (k - 1) * 4 * p
    printf "traffic: %d trainable floats, K %d, H %d, %s, %d updates, %d outer steps\n", p, k, h, c, u, n
    printf "  islands: %.0f bytes up (%.0f of them dropped), %.0f down (upper bound; islands reported %.0f), %.0f recovery: %.0f bytes per update\n", up, dropped, down, reported, rec, isl
    printf "  sync data parallelism (ring all-reduce of float32 gradients): %.0f bytes per update\n", sync
    printf "  reduction: %.2f%% (goal 99.6%%)\n", 100 * (1 - isl / sync) }' "$OUT/sync/islands_log.csv" | tee "$OUT/traffic.txt"

last5() { # FILE...: the mean of the last 5 rows' utility, away and toward losses over the files
  for f in "$@"; do tail -n 5 "$f"; done | awk -F, '{ u += $4; a += $5; t += $6; n++ } END { printf "%.6f %.6f %.6f", u / n, a / n, t / n }'
}
read -r iu ia it <<<"$(last5 "$OUT"/island*/train_log.csv)"
read -r su sa st <<<"$(last5 "$OUT/sync-run/train_log.csv")"
awk -v iu="$iu" -v ia="$ia" -v it="$it" -v su="$su" -v sa="$sa" -v st="$st" 'function rel(a, b) { return 100 * (a - b) / b }
  BEGIN { printf "losses (mean of the last 5 updates): utility %.4f vs %.4f (%+.1f%%), away %.4f vs %.4f (%+.1f%%), toward %.4f vs %.4f (%+.1f%%) (islands vs sync; goal within 5%%)\n",
    iu, su, rel(iu, su), ia, sa, rel(ia, sa), it, st, rel(it, st) }' | tee -a "$OUT/traffic.txt"
fixed_losses() { # CHECKPOINT DIR: "utility away toward" of CHECKPOINT on the fixed batch (DIR keeps the run)
  [ -f "$2/train_log.csv" ] || "$BIN" train "${common[@]}" --sync-dir "" --model "$1" --lr 0 --updates 1 --gcg-steps 0 \
    --utility "$OUT/island0/utility.jsonl" --save-steps "" --grad-accum "${FIXED_ACCUM:-16}" --out "$2" --quiet \
    >>"$OUT/logs/fixed.log" 2>&1
  awk -F, 'NR == 2 { printf "%s %s %s", $4, $5, $6 }' "$2/train_log.csv"
}
read -r fu fa ft <<<"$(fixed_losses "$OUT/island0/checkpoint-$UPDATES" "$OUT/fixed-islands")"
read -r gu ga gt <<<"$(fixed_losses "$OUT/sync-run/checkpoint-$UPDATES" "$OUT/fixed-sync")"
awk -v iu="$fu" -v ia="$fa" -v it="$ft" -v su="$gu" -v sa="$ga" -v st="$gt" -v n="${FIXED_ACCUM:-16}" 'function rel(a, b) { return 100 * (a - b) / b }
  BEGIN { printf "losses of the final models on one fixed batch (%d micro-batches): utility %.4f vs %.4f (%+.1f%%), away %.4f vs %.4f (%+.1f%%), toward %.4f vs %.4f (%+.1f%%) (islands vs sync; goal within 5%%)\n",
    n, iu, su, rel(iu, su), ia, sa, rel(ia, sa), it, st, rel(it, st) }' | tee -a "$OUT/traffic.txt"
if [ "$EVAL" = 1 ]; then
  MODEL_PATH=$(sed -n 's/^model = //p' "$OUT/sync-run/config.ini")
  BUILD=$BUILD bash "$ROOT/bench/r2d2_eval.sh" "$OUT/island0" "$OUT/eval-islands" "$MODEL_PATH"
  BUILD=$BUILD bash "$ROOT/bench/r2d2_eval.sh" "$OUT/sync-run" "$OUT/eval-sync" "$MODEL_PATH"
fi
