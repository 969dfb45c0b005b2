#!/usr/bin/env bash
# islands_kill_campaign.sh: kills the coordinator and the islands of a run
# across islands at random moments (SIGKILL: no handler runs), restarts each
# after a delay, and checks that (issue 46, acceptance 4)
#   - the run completes: every island and the coordinator exit 0;
#   - no torn global state is read: every kept global version passes
#     `sha256sum -c` of its SHA256SUMS, and every island adopted each version
#     from its updates with theta checked bit for bit against it, or read it
#     whole (said in its log);
#   - a fault-free replay of the same schedule of arrivals (the versions'
#     records and archived contributions, `refgeo islands --replay`) gives
#     every kept theta_global bit for bit.
# The kill schedule is seeded (SEED): the victim (an island or the
# coordinator) and the gap before each kill. Rerun with the same OUT after a
# kill of the campaign itself: the processes resume and the kills counted in
# kills.log are kept.
#
#   bench/islands_kill_campaign.sh   (BUILD=build OUT=runs/islands-kills KILLS=20 SEED=46 K=3 H=2 UPDATES=24
#                                     QUORUM=2 COMPRESSION=int8 MIN_GAP=0.5 MAX_GAP=2 RESTART_DELAY=0.5 NETNS=1
#                                     MODEL=the tiny Qwen2 of tests/fixtures, synthesized)
# tests/test_islands_kill.sh runs it with a few kills (CI size).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
BIN=${BIN:-$ROOT/$BUILD/refgeo}
OUT=$(mkdir -p "${OUT:-runs/islands-kills}" && cd "${OUT:-runs/islands-kills}" && pwd)
KILLS=${KILLS:-20} SEED=${SEED:-46} K=${K:-3} H=${H:-2} UPDATES=${UPDATES:-24} QUORUM=${QUORUM:-2}
MIN_GAP=${MIN_GAP:-0.5} MAX_GAP=${MAX_GAP:-2} COMPRESSION=${COMPRESSION:-int8}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=1
source "$ROOT/bench/islands_lib.sh"
mkdir -p "$OUT/logs"
if [ -z "${MODEL:-}" ]; then MODEL=$OUT/model; tiny_model "$MODEL"; fi
[ -f "$OUT/run.ini" ] || write_config "$OUT/run.ini"
rm -f "$OUT"/pids/*.failed "$OUT"/pids/[a-z]*[0-9] "$OUT/pids/coordinator" 2>/dev/null || true
t0=$(date +%s.%N)

supervise coordinator "$BIN" islands --config "$OUT/run.ini" &
sups=($!)
for ((i = 0; i < K; i++)); do
  supervise "island$i" "$BIN" train --config "$OUT/run.ini" --island "$i" --out "$OUT/island$i" "{RESUME}" &
  sups+=($!)
done

# the kills: seeded victims and gaps; kills.log keeps the count over reruns
RANDOM=$SEED
touch "$OUT/kills.log" "$OUT/restarts.log"
done_kills=$(wc -l <"$OUT/kills.log")
for ((j = 0; j < done_kills; j++)); do : $((RANDOM)) $((RANDOM)); done # the schedule continues where it was
names=(coordinator)
for ((i = 0; i < K; i++)); do names+=("island$i"); done
while [ "$done_kills" -lt "$KILLS" ]; do
  gap=$(awk -v a="$MIN_GAP" -v b="$MAX_GAP" -v r=$RANDOM 'BEGIN { printf "%.3f", a + (b - a) * r / 32767 }')
  victim=${names[$((RANDOM % ${#names[@]}))]}
  sleep "$gap"
  all_ok=1
  for n in "${names[@]}"; do [ -e "$OUT/pids/$n.ok" ] || all_ok=0; done
  [ $all_ok = 1 ] && break
  ls "$OUT"/pids/*.failed >/dev/null 2>&1 && break
  pid=$(cat "$OUT/pids/$victim" 2>/dev/null || true)
  [ -n "$pid" ] || continue # between a death and its restart, or finished
  if kill -9 "$pid" 2>/dev/null; then
    done_kills=$((done_kills + 1))
    echo "$(date +%s.%N) $victim $pid" >>"$OUT/kills.log"
  fi
done
rc=0
for s in "${sups[@]}"; do wait "$s" || rc=1; done
t1=$(date +%s.%N)
[ $rc = 0 ] || { echo "islands_kill_campaign: a process failed (see $OUT/logs)" >&2; exit 1; }

# checks
bad=0
for v in "$OUT"/sync/global/v*; do
  case $v in *.tmp | *.old) continue ;; esac
  (cd "$v" && sha256sum --quiet -c SHA256SUMS) || { echo "torn: $v" >&2; bad=1; }
done
replay=$("$BIN" islands --config "$OUT/run.ini" --replay 2>&1) || { echo "$replay" >&2; bad=1; }
# the run's end: every island's last checkpoint holds the final version
# (f32 checkpoints of the same theta_global: the same bytes)
[ -f "$OUT/sync/final.json" ] || { echo "no $OUT/sync/final.json" >&2; bad=1; }
# (each island ends at its UPDATES unless the run ends on merged updates)
for ((i = 1; i < K && ${RUN_UPDATES:-0} == 0; i++)); do
  cmp -s "$OUT/island0/checkpoint-$UPDATES/model.safetensors" "$OUT/island$i/checkpoint-$UPDATES/model.safetensors" ||
    { echo "island $i's last checkpoint differs from island 0's" >&2; bad=1; }
done
versions=$(ls -d "$OUT"/sync/global/v* | grep -v '\.' | sed 's/.*v//' | sort -n | tail -1)
whole=$(cat "$OUT"/logs/island*.log | grep -c "reads version" || true)
dropped=$( (cat "$OUT/sync/dropped.log" 2>/dev/null || true) | wc -l)
restarts=$( (cat "$OUT/restarts.log" 2>/dev/null || true) | wc -l)
by_victim=$(awk '{print $2}' "$OUT/kills.log" | sort | uniq -c | awk '{printf "%s%s %s", sep, $2, $1; sep=", "}')
echo "islands_kill_campaign: $done_kills kills ($by_victim), $restarts restarts, $K islands x $UPDATES updates (H $H," \
  "quorum $QUORUM, $COMPRESSION), $versions global versions, $dropped dropped messages, $whole whole-state reads;" \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }'); $replay"
[ "$done_kills" -ge "$KILLS" ] || { echo "islands_kill_campaign: the run ended after $done_kills of $KILLS kills: raise UPDATES" >&2; bad=2; }
exit $bad
