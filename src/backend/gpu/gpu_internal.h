/* backend/gpu/gpu_internal.h: what the GPU backend's files share (backend/gpu/gpu.cu
 * is the table and the memory; backend/gpu/gemm.cu the matrix products;
 * backend/gpu/ops.cu the elementwise, loss and optimizer operations;
 * backend/gpu/attention.cu attention forward and backward).
 *
 * Memory: every rg_buf, batch array and weight lives on the device. All
 * work goes to one stream in call order, so an operation may reuse a
 * buffer the previous one wrote without waiting. Host arrays an operation
 * receives (gather rows, loss targets and scales) are copied into the
 * backend's scratch; an upload has read its host array when it returns
 * (gpu_upload), so the caller may reuse it.
 *
 * Weights: a bf16 file's matrices in the file forms stay bf16 (a 7B model
 * in 14 GB); everything else is float32 on the device, dequantized on the
 * host at upload (block formats and f16 in bf16 would round, and refgeo's
 * results are exact against transformers on every backend). */
#ifndef RG_BACKEND_GPU_INTERNAL_H
#define RG_BACKEND_GPU_INTERNAL_H

#include <stdint.h>

#include "backend/gpu/gpu_vendor.h"
#ifdef RG_GPU_CUBLAS
#include <cublas_v2.h>
#endif

extern "C" {
#include "backend/backend.h"
#include "backend/registry.h"
#include "tensor/dtype.h"
#include "util/error.h"
}

struct rg_bweight {
  const rg_tensor *t;
  int64_t rows, cols;
  float *f32;     /* device float32 values, or NULL */
  uint16_t *bf16; /* device bf16 values (a matrix in a file form), or NULL */
};

/* A batch: the rg_batch arrays on the device, and how attention walks it:
 * the tokens grouped by sequence (order: batch indices, each sequence's in
 * batch order) and, per sequence present, 4 ints: its id, its first index
 * into order, its token count and its largest position. */
typedef struct {
  rg_batch base;
  int *order;  /* device [cap] */
  int *seqs;   /* device [4 * cap] */
  int n_seqs;  /* sequences present */
  int max_pos; /* the largest position of the batch */
  int *host;   /* host staging: order [cap], seqs [4 * cap], each token's sequence [cap] */
} gpu_batch;

static inline const gpu_batch *gpu_batch_of(const rg_batch *b) { return (const gpu_batch *)b; }

typedef struct {
  rg_backend base;
  int device;
  cudaStream_t stream;
#ifdef RG_GPU_CUBLAS
  cublasHandle_t blas;
  bool tiled; /* the "cuda-tiled" backend: the own product instead of cuBLAS (tests) */
#endif
  bool failed;
  char error[256];
  char *scratch; /* device memory for one operation's uploads and temporaries */
  size_t scratch_bytes;
} gpu_backend;

static inline gpu_backend *gpu(rg_backend *be) { return (gpu_backend *)be; }

/* Records the first failure (backend.h, "Errors"). */
void gpu_fail(rg_backend *be, const char *fmt, ...);
/* Records E under WHAT when a runtime call failed (HIP marks them
 * nodiscard; every call is checked alike). 0 or -1. */
int gpu_ok(rg_backend *be, cudaError_t e, const char *what);
/* After a launch or a queued call: records a launch error under WHAT.
 * Returns 0, or -1 when the backend has failed. */
int gpu_check(rg_backend *be, const char *what);
/* BYTES of device scratch for the current operation (the previous
 * operation's contents may be overwritten); NULL with the failure recorded. */
void *gpu_scratch(rg_backend *be, size_t bytes);
/* Copies BYTES from host memory SRC to device memory DST, in stream order. */
void gpu_upload(rg_backend *be, void *dst, const void *src, size_t bytes);

/* One block of threads for these launches; reductions assume a power of 2. */
enum { GPU_THREADS = 256 };
static inline unsigned gpu_blocks(size_t n) {
  const size_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
  return (unsigned)(b < 65535 ? (b > 0 ? b : 1) : 65535); /* grid-stride loops cover the rest */
}

/* bf16 (the high half of a float32) to float32. */
__device__ static inline float gpu_bf16_to_f32(uint16_t h) { return rg_uint_as_float((uint32_t)h << 16); }

/* The sum of every thread's V over the block (blockDim.x a power of 2),
 * through SH[blockDim.x]; all threads get it. Always the same order of
 * additions for a given block size: deterministic. */
template <typename T> __device__ static inline T gpu_block_sum(T v, T *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();
  return r;
}

template <typename T> __device__ static inline T gpu_block_max(T v, T *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && sh[threadIdx.x + s] > sh[threadIdx.x]) sh[threadIdx.x] = sh[threadIdx.x + s];
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();
  return r;
}

/* backend/gpu/gemm.cu */
#ifdef RG_GPU_CUBLAS
/* Opens cuBLAS (at run time: backend/gpu/gemm.cu says why) and makes the
 * backend's handle on its stream, unless the backend is "cuda-tiled".
 * 0, or -1 with the error set. */
int gpu_blas_init(rg_backend *be);
void gpu_blas_free(rg_backend *be);
#endif
void gpu_matmul(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias);
void gpu_matmul_add(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w);
void gpu_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                         int M, const rg_bweight *w);
/* The project's own tiled product, on every build (cuBLAS's peer in tests):
 * C[m, n] = beta C[m, n] + sum_k A(m, k) B(k, n), with A(m, k) = a[m * am +
 * k * ak] and B(k, n) = b[k * bk + n * bn] (float32, or bf16 when b16 is
 * set instead of b), C row-major with row stride ldc. */
void gpu_gemm_tiled(rg_backend *be, float *c, int ldc, const float *a, long am, long ak, const float *b,
                    const uint16_t *b16, long bk, long bn, int M, int N, int K, float beta);

/* backend/gpu/ops.cu */
void gpu_gather_rows(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n, int width);
void gpu_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width);
void gpu_embed(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b);
void gpu_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d);
void gpu_rmsnorm(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d, float eps);
void gpu_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                          const rg_bweight *w, int rows, int d, float eps);
void gpu_rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
              bool adjacent);
void gpu_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                       const rg_buf *inv_freq, bool adjacent);
void gpu_swiglu(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n);
void gpu_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                         const rg_buf *up, size_t n);
void gpu_add(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n);
void gpu_scale(rg_backend *be, rg_buf *x, size_t n, float c);
void gpu_ablate(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit);
void gpu_add_scaled(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c);
void gpu_kv_store(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                  const rg_attn_desc *a);
void gpu_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                           const rg_attn_desc *a);
void gpu_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab);
void gpu_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                      const float *scale, int rows, int vocab, float log_p_min);
int gpu_sum_squares(rg_backend *be, const rg_buf *b, double *out);
void gpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st);

/* backend/gpu/attention.cu */
void gpu_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                   const rg_buf *v_cache, const rg_attn_desc *a);
void gpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                            const rg_buf *v_cache, const rg_attn_desc *a);

#endif
