#!/bin/sh
# integrity_cost.sh: what the run directory's checksums (issue 43) add to a
# SmolLM2 R2D2 update and to a whole `refgeo run`, from a finished run of
# refgeo train or refgeo run (e.g. `refgeo run data/demo.ini`).
#
# Measures refgeo's SHA-256 over the run's own files (bench_sha256, CPU
# seconds: the shared machine's wall clock counts other jobs): a state
# (params.f32 + moments.f32 + meta.json: hashed once when saved, once when
# resumed), and the checkpoints (hashed when written and by every stage
# that reads them: capture, geometry, each asr). Divides by the run's own
# update times (train_log.csv, wall) and state_every (config.ini), and by
# the run's wall time (run.log) for the stages.
#
#   bench/integrity_cost.sh RUN_DIR [READERS]   (BUILD=build-dir; READERS: stages that read
#                                                the checkpoints, default 4 as in data/demo.ini)
set -eu
RUN=$1
READERS=${2:-4}
BUILD=${BUILD:-build}
state=$(ls -d "$RUN"/state/step-* | tail -1)
every=$(sed -n 's/^state_every = //p' "$RUN/config.ini")
out=$("$BUILD/bench_sha256" "$state/params.f32" "$state/moments.f32" "$state/meta.json" "$RUN"/checkpoint-*/model.safetensors)
echo "$out"
state_s=$(echo "$out" | awk '/step-/ { s += $(NF-3) } END { print s }')
ck_s=$(echo "$out" | awk '/checkpoint-/ { s += $(NF-3) } END { print s }')
n_states=$(sed -n 's/^updates = //p' "$RUN/config.ini" | awk -v e="$every" '{ print int($1 / e) }')
# the update times: train_log.csv's last column (seconds, wall)
sort_updates=$(tail -n +2 "$RUN/train_log.csv" | awk -F, '{ print $NF }' | sort -g)
median=$(echo "$sort_updates" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
fastest=$(echo "$sort_updates" | head -1)
echo "state: ${state_s} s CPU to hash; state_every ${every}; updates ${fastest} s (fastest) ${median} s (median) wall"
awk -v h="$state_s" -v e="$every" -v f="$fastest" -v m="$median" 'BEGIN {
  printf "per update: %.3f s = %.2f%% of the fastest update, %.2f%% of the median\n", h / e, 100 * h / e / f, 100 * h / e / m }'
if [ -f "$RUN/run.log" ]; then
  wall=$(awk '/started/ && !t0 { t0 = $1 } { t1 = $1 } END { print t0, t1 }' "$RUN/run.log" | {
    read -r a b; echo $(( $(date -d "$b" +%s) - $(date -d "$a" +%s) )); })
  awk -v hs="$state_s" -v ns="$n_states" -v hc="$ck_s" -v r="$READERS" -v w="$wall" 'BEGIN {
    total = hs * ns + hc * (1 + r)
    printf "run: %.2f s CPU of hashing (%d states, checkpoints written once and read by %d stages) in a %d s run: %.2f%%\n", total, ns, r, w, 100 * total / w }'
fi
