# islands_lib.sh: shared by bench/islands_kill_campaign.sh, islands_faults.sh and
# islands_traffic.sh (sourced, not run): the tiny test model, a run's config,
# and supervisors that restart a killed process.
#
# Each process of a run (the coordinator, each island) runs under a
# supervisor loop: it is started in its own session and process group
# (setsid; island 0 also in its own network namespace when NETNS=1 and
# `unshare -n` works), its pid written to $OUT/pids/NAME, and restarted
# after $RESTART_DELAY seconds when it dies of SIGKILL (an island with
# --resume). It ends when the process exits 0 ($OUT/pids/NAME.ok), and
# fails the run on any other exit. ENV_<name> (ENV_coordinator, ENV_island1)
# adds environment variables to that process, e.g. REFGEO_KILL_AT (util/fault.h),
# so that it also dies at a named point on every start.
#
# CPU_QUOTA (cores, e.g. 0.5): each island runs in a CPU cgroup of its own
# (the v1 cpu controller's CFS quota) limited to that many cores, as on a
# machine of its own: an island that is down leaves its share idle. Without
# it the islands share the machine's cores, and the ones alive take a dead
# one's share, which hides what a failure costs.

# tiny_model DIR: the tiny Qwen2 of tests/fixtures/hf_tiny (as testlib's t_hf_tiny writes it).
tiny_model() {
  local dir=$1 fx=$ROOT/tests/fixtures/hf_tiny/qwen2_bf16
  [ -f "$dir/model.safetensors" ] && return 0
  "$BIN" synth-model --config "$fx/config.json" --out "$dir" --seed 1002 --dtype bf16 --std 0.08 --norm-std 0.1 >/dev/null
  cp "$fx"/*.json "$dir"/
}

# cpu_cgroup NAME CORES: prints the CPU cgroup (cgroup v1) of NAME in this
# script, limited to CORES cores; fails when the cpu controller cannot be
# written. cpu_cgroups_remove removes this script's (at its exit).
CGROUP_CPU=/sys/fs/cgroup/cpu
cpu_cgroup() {
  local dir=$CGROUP_CPU/refgeo-bench-$$-$1 period quota
  # the v1 controller's own files first: on a cgroup v2 host, mkdir there would make v2 groups
  [ -w "$CGROUP_CPU/cpu.cfs_quota_us" ] && { [ -d "$dir" ] || mkdir "$dir" 2>/dev/null; } ||
    { echo "cpu_cgroup: cannot make $dir (CPU_QUOTA needs the cgroup v1 cpu controller, writable)" >&2; return 1; }
  period=$(cat "$dir/cpu.cfs_period_us")
  quota=$(awk -v c="$2" -v p="$period" 'BEGIN { printf "%d", c * p }')
  [ "$quota" -ge 1000 ] || { echo "cpu_cgroup: $2 cores is a quota of $quota us, under the kernel's 1000" >&2; return 1; }
  echo "$quota" >"$dir/cpu.cfs_quota_us"
  echo "$dir"
}
cpu_cgroups_remove() {
  local d
  for d in "$CGROUP_CPU"/refgeo-bench-$$-*; do
    if [ -d "$d" ]; then rmdir "$d" 2>/dev/null || true; fi
  done
}

# The command prefix that runs a command inside the cgroup $1 (its pid
# stays the command's: sh execs it), into the array CG.
cgroup_prefix() { CG=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$1"); }

# supervise NAME CMD...: the loop above. "{RESUME}" in CMD becomes --resume once
# the island's run dir ($3 after --out) holds a run.
supervise() {
  local name=$1
  shift
  local restarts=0 CG=()
  mkdir -p "$OUT/pids"
  if [ -n "${CPU_QUOTA:-}" ] && [ "${name#island}" != "$name" ]; then
    local dir
    dir=$(cpu_cgroup "$name" "$CPU_QUOTA") || return 1
    cgroup_prefix "$dir"
  fi
  while [ ! -e "$OUT/pids/$name.ok" ]; do
    local args=() a resume="" prev=""
    for a in "$@"; do
      [ "$prev" = "--out" ] && [ -f "$a/config.ini" ] && resume=--resume
      prev=$a
    done
    for a in "$@"; do
      if [ "$a" != "{RESUME}" ]; then args+=("$a"); elif [ -n "$resume" ]; then args+=("$resume"); fi
    done
    local pre=()
    [ "${NETNS:-0}" = 1 ] && [ "$name" = island0 ] && unshare -n true 2>/dev/null && pre=(unshare -n)
    local envvar="ENV_$name"
    local extra=(${!envvar:-}) # e.g. ENV_coordinator="REFGEO_KILL_AT=islands-archive:2": a kill at a named point
    env "${extra[@]}" "${pre[@]}" setsid "${CG[@]}" "${args[@]}" >>"$OUT/logs/$name.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$OUT/pids/$name"
    local rc=0
    wait "$pid" || rc=$?
    rm -f "$OUT/pids/$name"
    if [ $rc -eq 0 ]; then
      touch "$OUT/pids/$name.ok"
    elif [ $rc -eq 137 ]; then
      restarts=$((restarts + 1))
      echo "$(date +%s.%N) $name restarted ($restarts)" >>"$OUT/restarts.log"
      sleep "${RESTART_DELAY:-0.5}"
    else
      echo "$name: exit $rc (see $OUT/logs/$name.log)" >&2
      touch "$OUT/pids/$name.failed"
      return 1
    fi
  done
}

# write_config FILE: the run's config from the environment.
write_config() {
  cat >"$1" <<INI
[model]
model = $MODEL
threads = ${THREADS:-1}
checkpoint_dtype = f32
${MODE_LINE:-}
[optim]
lr = ${LR:-1e-3}
schedule = constant
updates = ${ISLAND_UPDATES:-$UPDATES}
grad_accum = ${GRAD_ACCUM:-2}
save_steps = 0
state_every = $H
[pool]
pool_size = 3
cases_per_step = ${CASES:-1}
gcg_steps = ${GCG_STEPS:-1}
search_width = 8
top_k = 4
gcg_batch = 8
reset_every = 2
[data]
utility_prompts = 6
utility_max_new_tokens = 8
utility_per_step = ${UTILITY_PER_STEP:-1}
utility_labels = assistant
max_case_tokens = 400
max_utility_tokens = 128
[islands]
sync_dir = $OUT/sync
islands = $K
inner_steps = $H
quorum = ${QUORUM:-0}
deadline_s = ${DEADLINE:-5}
compression = ${COMPRESSION:-int8}
block_size = ${BLOCK:-128}
max_staleness = ${MAX_STALENESS:-1}
run_updates = ${RUN_UPDATES:-0}
INI
}
