#!/usr/bin/env bash
# gpu_check.sh: the GPU backend's device check (issue 15), one prepared
# script for one NVIDIA GPU, meant to end inside 8 minutes on an H200. It
# runs a CUDA build made elsewhere (scripts/gpu-carry.sh packs it with the
# shared libraries a bare machine lacks into gpu-carry.tar.xz, which this
# unpacks), from the repository root:
#
#   bench/gpu_check.sh            (CARRY=gpu-carry, OUT=where logs go)
#
# Stages (each: PASS/FAIL/SKIP, its wall time, its log under $OUT):
#  1. the machine: nvidia-smi, refgeo info --devices;
#  2. op parity: test_backend and test_backend_grad on "cuda" (cuBLAS) and
#     "cuda-tiled" (the project's own product), every operation forward and
#     backward against the references the CPU passes;
#  3. whole-model gradients and training on the GPU (REFGEO_DEVICE=cuda):
#     test_backward (every parameter's gradient of four tiny models against
#     torch), test_r2d2_update (R2D2 updates against torch), test_train
#     (updates, resume) and test_train_device (five updates on the GPU
#     against the same five on the CPU);
#  4. SmolLM2's logits and greedy continuations against the transformers
#     fixtures (test_forward), when REFGEO_MODEL names the GGUF;
#  5. the Mistral-7B-shaped synthetic model (refgeo synth-model, bf16):
#     prefill tokens/s (bench_forward), against PyTorch on the same GPU
#     (bench/gpu_prefill_peer.py, same shapes and batch), and one LoRA R2D2
#     training step (bench_train --lora-rank 64), with the GPU's peak memory
#     (nvidia-smi, sampled) and the model FLOP utilization of each.
# cuBLAS is opened at run time: the toolkit's, or the one PyTorch's wheels
# bring (nvidia/cublas/lib), found below. GPU=hip runs a HIP carry (stage 2
# on "hip" alone), and SKIP_7B=1 leaves out stage 5: how a machine without
# a GPU rehearses this script on a HIP-CPU build (CARRY=a folder with bin/
# holding that build's programs).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=$(realpath -m "${CARRY:-gpu-carry}")
OUT=$(realpath -m "${OUT:-${TMPDIR:-/tmp}/gpu-check}")
BIN="$CARRY/bin"
mkdir -p "$OUT"
if [ ! -d "$CARRY" ] && [ -f "$CARRY.tar.xz" ]; then mkdir -p "$CARRY" && tar -C "$CARRY" -xJf "$CARRY.tar.xz"; fi
[ -x "$BIN/refgeo" ] || { echo "gpu_check.sh: no $BIN/refgeo (scripts/gpu-carry.sh makes it)" >&2; exit 1; }
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
PY=${PY:-python3}
cublas_dir=$("$PY" -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2>/dev/null || true)
[ -n "$cublas_dir" ] && export LD_LIBRARY_PATH="$cublas_dir:$LD_LIBRARY_PATH"
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
export REFGEO_FIXTURES="$PWD/tests/fixtures" REFGEO_DATA="$PWD/data" REFGEO_BIN="$BIN/refgeo" REFGEO_TMP="$OUT/tmp"
mkdir -p "$REFGEO_TMP"
H200_BF16_PEAK=989e12 # dense bf16 FLOP/s of an H200 SXM (NVIDIA's datasheet)

stage() { # name, timeout seconds, command...: runs it, logs, prints one line
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS rc
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  local verdict=PASS
  [ "$rc" = 77 ] && verdict=SKIP
  [ "$rc" != 0 ] && [ "$rc" != 77 ] && verdict="FAIL (exit $rc)"
  printf '%-28s %-14s %4ds\n' "$name" "$verdict" $((SECONDS - t0))
  [ "$verdict" = PASS ] || tail -5 "$OUT/$name.log" | sed 's/^/    /'
}

GPU=${GPU:-cuda}
BACKENDS="$GPU"
[ "$GPU" = cuda ] && BACKENDS="cuda cuda-tiled"

echo "== 1. machine"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
  echo "(no nvidia-smi)"
fi
"$BIN/refgeo" info --devices

echo "== 2. op parity (forward and backward, every operation)"
for be in $BACKENDS; do
  stage "test_backend_$be" 120 env REFGEO_TEST_BACKEND=$be "$BIN/test_backend"
  stage "test_backend_grad_$be" 120 env REFGEO_TEST_BACKEND=$be "$BIN/test_backend_grad"
done
grep -h -o "rel err [0-9.e+-]*" "$OUT"/test_backend*.log | awk '{print $3}' | sort -g | tail -1 |
  sed 's/^/  largest relative error of any operation: /'

echo "== 3. gradients and training on the GPU"
for t in test_backward test_r2d2_update test_train test_train_device; do
  stage "$t" 120 env REFGEO_DEVICE="$GPU" "$BIN/$t"
done

echo "== 4. SmolLM2 against transformers"
if [ -n "${REFGEO_MODEL:-}" ] && [ -f "$REFGEO_MODEL" ]; then
  stage test_forward 180 env REFGEO_DEVICE="$GPU" "$BIN/test_forward"
else
  echo "test_forward                 SKIP (REFGEO_MODEL: no SmolLM2 GGUF here)"
fi

if [ -n "${SKIP_7B:-}" ]; then
  echo "== 5. skipped (SKIP_7B)"
  exit 0
fi
echo "== 5. Mistral-7B-shaped model"
# written once under $OUT (synth_7b.sh reuses a complete one; SCALE_CONFIG
# and SCALE_NAME, passed on, rehearse this stage on a small model)
SYNTH="$OUT/synth/${SCALE_NAME:-mistral-7b-shape}"
stage synth_7b 240 env BUILD="$BIN" REFGEO_HOME="$OUT" bash -c '. bench/synth_7b.sh' 
peak_mem() { # command...: runs it while sampling the GPU's memory; prints the peak MiB last
  local f="$OUT/mem.$$" pid
  : >"$f"
  if command -v nvidia-smi >/dev/null; then
    (while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.2; done) >"$f" &
    pid=$!
  fi
  "$@"
  local rc=$?
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
  echo "peak GPU memory: $(sort -n "$f" | tail -1) MiB"
  rm -f "$f"
  return $rc
}
P7=7.24e9 # parameters of the Mistral-7B shape (embeddings and head included)
peak_mem "$BIN/bench_forward" --device "$GPU" --model "$SYNTH" --batch 4 --tokens 512 --tiled --repeats 3 \
  >"$OUT/prefill.log" 2>&1
REFGEO_TPS=$(sed -n 's/^median: \([0-9.]*\) tokens\/s.*/\1/p' "$OUT/prefill.log")
echo "refgeo prefill 4 x 512: ${REFGEO_TPS:-?} tok/s; $(tail -1 "$OUT/prefill.log")"
TORCH_TPS=$("$PY" bench/gpu_prefill_peer.py --batch 4 --tokens 512 --repeats 3 2>"$OUT/peer.log" | tail -1)
echo "PyTorch prefill 4 x 512: ${TORCH_TPS:-?} tok/s (bf16, scaled_dot_product_attention)"
awk -v a="${REFGEO_TPS:-0}" -v b="${TORCH_TPS:-0}" -v p="$P7" -v peak="$H200_BF16_PEAK" 'BEGIN {
  if (a > 0 && b > 0) printf "prefill ratio refgeo / PyTorch: %.2f (goal 1.0); refgeo MFU %.1f%%\n", a / b, 100 * 2 * p * a / peak }'
peak_mem "$BIN/bench_train" --device "$GPU" --model "$SYNTH" --batch 1 --tokens 2048 --lora-rank 64 --repeats 2 \
  >"$OUT/train_lora.log" 2>&1
echo "LoRA step 1 x 2048: $(grep -E '^median|peak GPU' "$OUT/train_lora.log" | tr '\n' ' ')"
