#!/usr/bin/env bash
# bench/zero.sh: ZeRO-1 and ZeRO-2 (config key zero) on SmolLM2-135M, full
# fine-tuning, under mpirun on this machine: for each run, the final
# parameters against the zero = 0 run of the same ranks, the peak RSS of
# every rank (/usr/bin/time -v) against `refgeo train --plan --ranks W`, and
# tokens/s from train_log.csv (updates 2..5, the first one untimed).
#
#   bench/zero.sh BUILD_DIR [OUT_DIR]
#
# Runs (5 R2D2 updates, threads 1 per rank; PARTS picks among "runs
# throughput compare"): runs: 4 micro-batches per update, 2 ranks with
# zero 0, 2, 1; 4 ranks with zero 0, 2, 1; 4 ranks as 2 groups of sp 2 with
# zero 0, 2; one process (W = 1, zero 0). throughput: 2 micro-batches per
# update on 2 ranks, zero 0 then 2, twice. The parameter comparison needs numpy (the reference
# venv's python, tools/reference/requirements.txt); the rest needs none.
set -euo pipefail
BUILD=${1:?usage: bench/zero.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-${TMPDIR:-/tmp}/refgeo-zero-bench}
REFGEO=$BUILD/refgeo
MODEL=${REFGEO_MODEL:-$HOME/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf}
DATA=$(cd "$(dirname "$0")/../data" && pwd)
PY=${REFGEO_PY:-$HOME/.cache/refgeo/ref-venv/bin/python}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$OUT"
CFG=$OUT/zero.ini
cat > "$CFG" <<EOF
[model]
model = $MODEL
mode = full
threads = 1
checkpoint_dtype = f32
recompute = 0
[optim]
lr = 2e-5
clip = 1
grad_accum = 4
updates = 5
save_steps = 0 5
state_every = 5
seed = 42
[pool]
pool_size = 4
cases_per_step = 1
gcg_steps = 1
search_width = 16
top_k = 64
gcg_batch = 16
reset_every = 2
[data]
behaviors = $DATA/harmbench/adv_training_behaviors.csv
targets = $DATA/harmbench/adv_training_targets.json
utility = harmless
utility_prompts_file = $DATA/prompts/harmless_train.json
utility_prompts = 8
utility_max_new_tokens = 16
utility_per_step = 1
utility_labels = assistant
max_case_tokens = 96
max_utility_tokens = 96
EOF

# run NAME NP ARGS...: the run into $OUT/NAME, each rank's peak RSS into NAME.rss
run() {
  local name=$1 np=$2
  shift 2
  rm -rf "${OUT:?}/$name" "$OUT/$name".rss.*
  local launch=()
  [ "$np" -gt 1 ] && launch=(mpirun --oversubscribe -np "$np")
  "${launch[@]}" sh -c 'exec /usr/bin/time -f "rss_kib %M" -o "$0.rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$OUT/$name" \
    "$REFGEO" train --config "$CFG" --out "$OUT/$name" "$@" < /dev/null > "$OUT/$name.log" 2>&1 || {
    echo "$name failed:"; tail -5 "$OUT/$name.log"; exit 1; }
  local tps
  tps=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="tokens_per_s") c=i} NR>2{s+=$c; n++} END{printf "%.1f", s/n}' \
        "$OUT/$name/train_log.csv")
  local rss
  rss=$(cat "$OUT/$name".rss.* 2>/dev/null | awk '{printf "%s%.0f", sep, $2/1024; sep=" "}')
  printf "%-14s np %d  tokens/s (all ranks) %8s  per rank %8.1f  peak RSS per rank MiB: %s\n" "$name" "$np" "$tps" \
    "$(echo "$tps / $np" | bc -l)" "$rss" | tee -a "$OUT/summary.txt"
}

plan() { # plan RANKS ZERO [SP]: the plan's total per rank, MiB
  "$REFGEO" train --plan --config "$CFG" --ranks "$1" --zero "$2" --sp "${3:-1}" --json |
    sed -n 's/.*"total":\([0-9.e+]*\).*/\1/p' | awk '{printf "%.0f", $1/1048576}'
}

compare() { # compare REF RUN
  "$PY" - "$OUT/$1/state/step-5/params.f32" "$OUT/$2/state/step-5/params.f32" <<'EOF' | sed "s/^/$2 vs $1: /" | tee -a "$OUT/summary.txt"
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32).astype(np.float64)
b = np.fromfile(sys.argv[2], dtype=np.float32).astype(np.float64)
d = np.abs(a - b)
print(f"{int((a != b).sum())} of {a.size} differ, relative L2 {np.linalg.norm(a - b) / np.linalg.norm(a):.3g}, "
      f"max |diff| {d.max():.3g}")
EOF
}

PARTS=${PARTS:-runs throughput compare}
case " $PARTS " in *" runs "*) : > "$OUT/summary.txt" ;; esac
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
if [[ " $PARTS " == *" runs "* ]]; then
  run w2_z0 2 ; run w2_z2 2 --zero 2 ; run w2_z1 2 --zero 1
  run w4_z0 4 ; run w4_z2 4 --zero 2 ; run w4_z1 4 --zero 1
  run sp2x2_z0 4 --sp 2 ; run sp2x2_z2 4 --sp 2 --zero 2
  run w1_z0 1
fi
# throughput: one micro-batch per rank and update (grad_accum 2 on 2 ranks),
# where the reduce-scatter and all-gather move the bytes of one all-reduce;
# zero 0 and 2 alternated, twice
if [[ " $PARTS " == *" throughput "* ]]; then
  for i in 1 2; do run tp_z0_$i 2 --grad-accum 2; run tp_z2_$i 2 --grad-accum 2 --zero 2; done
  run tp_z1 2 --grad-accum 2 --zero 1
fi
if [[ " $PARTS " == *" compare "* ]]; then
  for r in w2_z1 w2_z2; do compare w2_z0 $r; done
  for r in w4_z1 w4_z2; do compare w4_z0 $r; done
  compare sp2x2_z0 sp2x2_z2
  compare tp_z0_1 tp_z2_1
  echo "plan per rank (MiB): W1 z0 $(plan 1 0) | W2 z0 $(plan 2 0) z1 $(plan 2 1) z2 $(plan 2 2) |" \
       "W4 z0 $(plan 4 0) z1 $(plan 4 1) z2 $(plan 4 2) | sp2x2 z0 $(plan 4 0 2) z2 $(plan 4 2 2)" | tee -a "$OUT/summary.txt"
fi
