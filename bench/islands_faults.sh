#!/usr/bin/env bash
# islands_faults.sh: goodput under failures (issue 46, acceptance 3): the
# same R2D2 run as K islands (refgeo islands + K `refgeo train` islands) and
# as synchronous data parallelism (`mpirun -np K refgeo train`, grad_accum K
# times an island's, so an update is the same work as one inner update of
# every island), under the same seeded schedule of SIGKILLs: gaps drawn from
# an exponential distribution of mean MTBF seconds, each killing one process
# (an island; for mpirun a random rank, which ends the whole job), the
# victim restarted after RESTART_DELAY seconds (an island with --resume; the
# synchronous job with mpirun ... --resume from its newest state, written
# every H updates as an island's is).
# How the islands' run ends (END): "run" (default) with run_updates = K x
# UPDATES, each island capped at 2 x UPDATES: the run ends once that many
# inner updates are merged, whichever islands made them, so a killed island
# costs the time it was away; "own": each island makes its own UPDATES and
# the run waits for the last, a restarted one included.
# Goodput = useful inner updates / (islands x wall time), relative to the
# mode's own fault-free run (MTBF inf): the synchronous run's useful updates
# are its UPDATES, the islands' those merged (final.json's merged_updates;
# with END=run the last outer step may merge a few past K x UPDATES).
# Prints a table and writes $OUT/goodput.csv (mode, mtbf_s, kills, wall_s,
# useful_updates, goodput). Resumable: a finished (mode, MTBF) keeps its
# result file and is skipped on a rerun.
#
#   bench/islands_faults.sh   (BUILD=build OUT=runs/islands-faults K=4 H=5 UPDATES=40 MTBFS="inf 120 40 12"
#                              RESTART_DELAY=5 SEED=46 QUORUM=0 COMPRESSION=int4 GRAD_ACCUM=2 END=run
#                              CPU_QUOTA= MODES="islands sync" (e.g. MODES=islands for another END)
#                              MODEL=the tiny Qwen2 (synthesized); e.g. MODEL=~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf)
# The fault-free runs (MTBF inf) are the baselines; keep MTBFS starting with inf.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
OUT=$(mkdir -p "${OUT:-runs/islands-faults}" && cd "${OUT:-runs/islands-faults}" && pwd)
# every run and resume uses one copy of refgeo kept in OUT (bench/refgeo_copy.sh)
BIN=${BIN:-$OUT/refgeo}
source "$ROOT/bench/refgeo_copy.sh"
refgeo_copy "$ROOT/$BUILD/refgeo" "$BIN"
K=${K:-4} H=${H:-5} UPDATES=${UPDATES:-40} MTBFS=${MTBFS:-inf 120 40 12} RESTART_DELAY=${RESTART_DELAY:-5}
SEED=${SEED:-46} GRAD_ACCUM=${GRAD_ACCUM:-2} COMPRESSION=${COMPRESSION:-int4} END=${END:-run}
case $END in run | own) ;; *) echo "$0: END=$END: run or own" >&2; exit 2 ;; esac
MODES=${MODES:-islands sync}
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=1 RESTART_DELAY
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
source "$ROOT/bench/islands_lib.sh"
if [ -z "${MODEL:-}" ]; then MODEL=$OUT/model; mkdir -p "$OUT/logs"; tiny_model "$MODEL"; fi

# kill_schedule MTBF: "gap victim" lines (victim in 0..K-1), seeded
kill_schedule() {
  awk -v m="$1" -v k="$K" -v seed="$SEED" 'BEGIN { srand(seed); for (i = 0; i < 10000; i++) {
    g = -m * log(1 - rand()); printf "%.3f %d\n", g, int(rand() * k) } }'
}

# killer MTBF KILL_ONE: runs KILL_ONE VICTIM GAP after each gap of the schedule,
# in the background of the run it attacks. The run's wall time ends when its
# processes do: the caller stops the killer then, in the middle of a gap
# (the gap's sleep, waited on, is interrupted by the TERM).
killer() {
  local mtbf=$1 kill_one=$2 gap victim sp=
  trap 'kill "$sp" 2>/dev/null || true; exit 0' TERM
  while read -r gap victim; do
    sleep "$gap" &
    sp=$!
    wait "$sp"
    "$kill_one" "$victim" "$gap"
  done < <(kill_schedule "$mtbf")
}

# stop_killer: ends the running killer ($KILLER) and reaps it. Also on the
# script's exit (an island that fails ends the script under set -e, as does
# Ctrl-C), so that no killer outlives its run and attacks the next one.
KILLER=
stop_killer() {
  [ -n "$KILLER" ] || return 0
  kill "$KILLER" 2>/dev/null || true
  wait "$KILLER" 2>/dev/null || true
  KILLER=
}
trap 'stop_killer; cpu_cgroups_remove' EXIT
trap 'exit 130' INT TERM

# record_result DIR T0 USEFUL: the run has ended: stops the killer, and
# DIR/result gets the kills, the wall seconds since T0 and the useful updates
record_result() {
  local t1
  t1=$(date +%s.%N)
  stop_killer
  echo "$(wc -l <"$1/kills.log") $(awk -v a="$2" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') $3" >"$1/result"
}

kill_island() { # VICTIM GAP: SIGKILL of island VICTIM, if it is running
  local pid
  pid=$(cat "$OUT/pids/island$1" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then echo "$2 island$1" >>"$OUT/kills.log"; fi
}

run_islands() { # DIR MTBF
  local dir=$1 mtbf=$2
  OUT=$dir
  mkdir -p "$OUT/logs"
  : >"$OUT/kills.log"
  if [ "$END" = run ]; then
    ISLAND_UPDATES=$((2 * UPDATES)) RUN_UPDATES=$((K * UPDATES)) write_config "$OUT/run.ini"
  else
    write_config "$OUT/run.ini"
  fi
  local t0 s
  t0=$(date +%s.%N)
  supervise coordinator "$BIN" islands --config "$OUT/run.ini" &
  local sups=($!)
  for ((i = 0; i < K; i++)); do
    supervise "island$i" "$BIN" train --config "$OUT/run.ini" --island "$i" --out "$OUT/island$i" "{RESUME}" &
    sups+=($!)
  done
  if [ "$mtbf" != inf ]; then killer "$mtbf" kill_island & KILLER=$!; fi
  for s in "${sups[@]}"; do wait "$s"; done
  local merged
  merged=$(sed -n 's/.*"merged_updates": *\([0-9]*\).*/\1/p' "$OUT/sync/final.json" 2>/dev/null || true)
  [ -n "$merged" ] || { echo "$0: $OUT/sync/final.json: no merged_updates (did the run end?)" >&2; exit 1; }
  record_result "$dir" "$t0" "$merged"
}

kill_rank() { # VICTIM GAP: SIGKILL of rank VICTIM (mod the ranks alive) of the running mpirun
  local mp ranks
  mp=$(cat "$OUT/mpirun.pid" 2>/dev/null || true)
  [ -n "$mp" ] || return 0
  mapfile -t ranks < <(pgrep -P "$mp" || true) # the ranks: mpirun's children on one host
  [ ${#ranks[@]} -gt 0 ] || return 0
  if kill -9 "${ranks[$(($1 % ${#ranks[@]}))]}" 2>/dev/null; then echo "$2 rank$1" >>"$OUT/kills.log"; fi
}

run_sync() { # DIR MTBF
  local dir=$1 mtbf=$2
  OUT=$dir
  mkdir -p "$OUT/logs"
  : >"$OUT/kills.log"
  write_config "$OUT/run.ini"
  local t0 pidfile=$OUT/mpirun.pid CG=()
  # with CPU_QUOTA the job gets the islands' cores together (K x CPU_QUOTA)
  if [ -n "${CPU_QUOTA:-}" ]; then
    local cg_dir
    cg_dir=$(cpu_cgroup sync "$(awk -v k="$K" -v c="$CPU_QUOTA" 'BEGIN { print k * c }')") || exit 1
    cgroup_prefix "$cg_dir"
  fi
  t0=$(date +%s.%N)
  ( # the supervisor: mpirun again with --resume after every death
    while :; do
      resume=""
      [ -f "$OUT/run/config.ini" ] && resume=--resume
      setsid "${CG[@]}" "$MPIRUN" --oversubscribe -np "$K" "$BIN" train --config "$OUT/run.ini" --sync-dir "" \
        --grad-accum $((K * GRAD_ACCUM)) --out "$OUT/run" $resume >>"$OUT/logs/sync.log" 2>&1 &
      echo $! >"$pidfile"
      rc=0
      wait $! || rc=$?
      rm -f "$pidfile"
      [ $rc = 0 ] && break
      # a kill ends the job (docs/training.md): restart, as for an island
      grep -q "train: $UPDATES updates" "$OUT/logs/sync.log" && break
      sleep "$RESTART_DELAY"
    done
  ) &
  local sup=$!
  if [ "$mtbf" != inf ]; then killer "$mtbf" kill_rank & KILLER=$!; fi
  wait "$sup"
  record_result "$dir" "$t0" "$UPDATES"
}

base=$OUT
for mode in $MODES; do
  for mtbf in $MTBFS; do
    dir=$base/$mode-$mtbf
    # a result of three fields (kills, wall, useful updates); an older bench's two are run again
    [ -f "$dir/result" ] && [ "$(wc -w <"$dir/result")" = 3 ] && continue
    rm -rf "$dir"
    echo "islands_faults: $mode, MTBF $mtbf s" >&2
    "run_$mode" "$dir" "$mtbf"
  done
done
OUT=$base
{
  echo "mode,mtbf_s,kills,wall_s,useful_updates,goodput"
  for mode in $MODES; do
    read -r _ free_wall free_useful <"$OUT/$mode-inf/result"
    for mtbf in $MTBFS; do
      read -r kills wall useful <"$OUT/$mode-$mtbf/result"
      echo "$mode,$mtbf,$kills,$wall,$useful,$(awk -v w0="$free_wall" -v u0="$free_useful" -v w="$wall" -v u="$useful" \
        'BEGIN { printf "%.3f", (u / w) / (u0 / w0) }')"
    done
  done
} >"$OUT/goodput.csv"
column -t -s, "$OUT/goodput.csv"
