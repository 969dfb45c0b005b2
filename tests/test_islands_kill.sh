#!/usr/bin/env bash
# test_islands_kill.sh: a run across islands survives kills (issue 46,
# acceptance 4, at CI size): bench/islands_kill_campaign.sh on the tiny
# Qwen2 with 2 islands and 30 updates (H 2, quorum 1, int4), 3 random
# SIGKILLs, and on every start
#   - the coordinator killed at its 2nd version, written but its
#     contributions not yet archived (fault point islands-archive): the
#     restarted one must not merge them again;
#   - island 1 killed after its 2nd contribution, before its state
#     (islands-published): it resumes from its previous boundary;
# then every island and the coordinator must exit 0, every kept version
# pass sha256sum -c, `refgeo islands --replay` give every kept
# theta_global bit for bit, every island's last checkpoint hold the final
# version (the same bytes), and no (island, step) appear twice in the
# archive's records (a restarted island's repeat of a merged step is
# dropped, not merged again). About 10 s.
#   tests/test_islands_kill.sh REFGEO_BIN TMP_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
out=$2/islands_kill
rm -rf "$out"
log=$(BIN=$1 OUT=$out KILLS=3 SEED=7 K=2 H=2 UPDATES=30 QUORUM=1 COMPRESSION=int4 MIN_GAP=0.2 MAX_GAP=0.8 \
  ENV_coordinator=REFGEO_KILL_AT=islands-archive:2 ENV_island1=REFGEO_KILL_AT=islands-published:2 \
  bash "$HERE/../bench/islands_kill_campaign.sh" 2>&1) || { echo "$log"; exit 1; }
echo "$log" | tail -n 1
restarts=$(grep -c coordinator "$out/restarts.log" || true)
[ "$restarts" -ge 2 ] || { echo "the coordinator was restarted $restarts times: expected its fault point to fire" >&2; exit 1; }
grep -q island1 "$out/restarts.log" || { echo "island 1 never restarted" >&2; exit 1; }
echo "$log" | grep -q "the same" || { echo "no replay line" >&2; exit 1; }
# each contributor's "island" line precedes its "step" line (cJSON_Print of record.json)
dups=$(awk -F: '/"island":/ { i = $2 + 0 } /"step":/ { print i "," $2 + 0 }' "$out"/sync/archive/v*/record.json | sort | uniq -d)
[ -z "$dups" ] || { echo "merged more than once (island,step): $(echo $dups)" >&2; exit 1; }
