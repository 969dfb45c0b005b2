/* backend/cpu/cpu_internal.h: what the CPU backend's files share (private to
 * backend/cpu/cpu.c, which holds the forward operations and the operation
 * table, backend/cpu/attention.c, attention and its gradient, and
 * backend/cpu/grad.c, the other gradient operations). */
#ifndef RG_BACKEND_CPU_INTERNAL_H
#define RG_BACKEND_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"

/* Floats of dequantized weight per thread's sgemm tile (4 MiB): large
 * enough that sgemm runs near its peak, small enough to stay in cache. */
enum { TILE_FLOATS = 1 << 20 };
/* Below this many floats an elementwise op runs on one thread: forking the
 * team costs more than the work. */
enum { PAR_MIN = 1 << 14 };

/* e^x in a form the compiler vectorizes, for attention's softmax and the
 * loss's normalizer (x <= 0) and SiLU: x = n ln2 + r with |r| <= ln2 / 2,
 * e^r by the degree-7 polynomial of Cephes' expf (Moshier, "Methods and
 * Programs for Mathematical Functions", 1989), times 2^n built in the
 * exponent bits; within 8.4e-8 relative of exp (test_cpu_expf). x is
 * clamped to [-87, 88]: below, e^-87 (1.6e-38) instead of an underflow,
 * which against a softmax row's sum (it holds e^0 = 1) or SiLU's 1 + e^-g
 * is nothing; above, 1.7e38 instead of infinity, so SiLU's g / (1 + e^-g)
 * is still 0 to float precision. glibc's expf is a library call per
 * element: at long context the scores' exponentials cost as much as the
 * products themselves, and in a prefill SiLU's cost 8% of the time. */
static inline float cpu_expf(float x) {
  const float LOG2E = 1.44269504088896341f, LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f;
  const float ROUND = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
  const float n = (x * LOG2E + ROUND) - ROUND;
  const float r = x - n * LN2_HI - n * LN2_LO, r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

typedef struct {
  rg_backend base;
  float *tile; /* dequantization scratch for tiled weights, tile_floats per thread */
  size_t tile_floats;
  const struct q8_kernels *q8; /* the 8-bit products' kernels this CPU runs, or NULL (cpu_q8_pick) */
  bool split;                   /* the split products run here (cpu_split_pick) */
  void *q8_scratch;             /* activations and weight panels of cpu_matmul_q8 and cpu_matmul_split */
  size_t q8_scratch_bytes;
  float *panel_xt; /* cpu_matmul_panel's transposed activations, panel_xt_floats */
  size_t panel_xt_floats;
  bool commit;     /* rg_backend_opts.commit */
  bool failed;     /* an operation failed since the last rg_backend_status */
  char error[256]; /* its message */
} cpu_backend;

struct rg_bweight {
  const rg_tensor *t;
  int64_t rows, cols;
  size_t row_bytes; /* of one row in the file dtype */
  const float *f32; /* rows*cols float32 (own copy or the f32 file data), or NULL: tiled */
  float *owned;     /* the copy we allocated (== f32, writable), freed with the weight */
  bool q8;          /* every product runs cpu_matmul_q8 (RG_FORM_FILE_Q8) on q8_rows */
  /* The rows cpu_matmul_q8 reads, q8_row_bytes apart, in dtype q8_type: the
   * file's blocks, or for a float32, f16 or bf16 matrix q8_owned, a q8_0
   * copy (what a Q8_0 GGUF of it would hold). */
  const uint8_t *q8_rows;
  size_t q8_row_bytes;
  int q8_type;
  uint8_t *q8_owned;
  /* Every product runs cpu_matmul_split on the file's blocks: their
   * float32 copy, if any, still equals them (no optimizer has it). */
  bool split;
};

static inline cpu_backend *cpu(rg_backend *be) { return (cpu_backend *)be; }

static inline const uint8_t *row_ptr(const rg_bweight *w, int64_t r) {
  return (const uint8_t *)w->t->data + (size_t)r * w->row_bytes;
}

/* Dot product with 8 independent partial sums, which the compiler turns
 * into one SIMD register (a single running sum is a serial dependency it
 * may not reorder). */
static inline float dot8(const float *a, const float *b, int n) {
  float acc[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; i++) s += a[i] * b[i];
  for (int j = 0; j < 8; j++) s += acc[j];
  return s;
}

/* y += a x over n floats. restrict: the three streams of the attention
 * backward's update otherwise defeat GCC's alias checks and the loop runs
 * scalar. */
static inline void axpy(float *restrict y, float a, const float *restrict x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* At most this many activation rows, a matmul on a weight kept in its file
 * dtype runs cpu_matmul_skinny instead of dequantized tiles and sgemm. */
enum { SKINNY_MAX_M = 16 };
/* Weight rows it dequantizes and multiplies together (a register block). */
enum { SKINNY_ROWS = 4 };
/* A tiled weight's scratch holds at least this many rows per thread: a
 * register block of cpu_matmul_skinny or cpu_matmul_panel. */
enum { TILE_MIN_ROWS = 16 };

/* From SKINNY_MAX_M + 1 to this many activation rows, a matmul on a weight
 * kept in its file dtype runs cpu_matmul_panel (unless the weight runs split
 * products); above, dequantized tiles and sgemm. At 128 rows, Qwen2.5-0.5B
 * shapes, Zen 4: 100 GFLOP/s a thread, OpenBLAS's peak, where sgemm loses
 * up to a fifth to copying the weight; at 2048 rows (in passes of 512) it
 * was no faster than sgemm on a float32 copy. */
enum { PANEL_MAX_M = 512 };

/* backend/cpu/panel.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for M <= PANEL_MAX_M rows of x, W in its file dtype (w->f32 == NULL),
 * with c->panel_xt of at least cpu_panel_scratch_floats(cols) floats and
 * c->tile of TILE_MIN_ROWS rows per thread. */
size_t cpu_panel_scratch_floats(int64_t cols);
void cpu_matmul_panel(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                      float beta);

/* backend/cpu/skinny.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for M <= SKINNY_MAX_M rows of x, W in its file dtype (w->f32 == NULL). */
void cpu_matmul_skinny(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                       const rg_bweight *bias, float beta);

/* backend/cpu/q8/q8.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for any M, with the activations quantized to 8 bits (RG_FORM_FILE_Q8).
 * Only for weights whose cpu_q8_supported is true, with c->q8_scratch of
 * at least cpu_q8_scratch_bytes(cols, threads).
 * cpu_q8_pick sets *OUT to the best kernels this CPU runs under the cap of
 * the environment's REFGEO_MAX_ISA (avx512, avx2 or none), or to NULL; -1
 * with the error set for an unknown cap. */
int cpu_q8_pick(const struct q8_kernels **out);
bool cpu_q8_supported(const cpu_backend *c, int type, int64_t cols);
size_t cpu_q8_scratch_bytes(int64_t cols, int threads);
void cpu_matmul_q8(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                   float beta);

/* backend/cpu/q8/q8.c, split products: y = x . W^T + bias (beta 0) or
 * y += x . W^T (beta 1) in float32 on AMX-BF16 tiles, x cut into three
 * bf16 parts (backend/cpu/q8/split_amx.c), for weights whose
 * cpu_split_supported is true and c->q8_scratch of at least
 * cpu_split_scratch_bytes(cols, rows, threads). Every product of such a
 * weight runs here, whatever M: each row's result is then the same
 * operations whatever the batch (a prompt's rows alone or in a batch,
 * GCG's suffix rows on a cached prefix or the whole sequence), where
 * sgemm below some M and the tiles above it differed by float32
 * rounding. Decoding the blocks costs the few-row products more than a
 * cache-resident sgemv (576x1536 q4_1, 1 row: 15 vs 60 GFLOP/s), but a whole
 * model's float32 copy is not cache-resident: greedy SmolLM2 Q4_1 on its
 * float32 copies, 2 threads, runs 41.6 tok/s split vs 38.3 by sgemm at
 * batch 1, 270 vs 137 at batch 8 (bench_generate --f32). cpu_split_pick: whether the CPU runs them under the cap that
 * chose the 8-bit kernels K (they are AMX kernels). */
bool cpu_split_pick(const struct q8_kernels *k);
bool cpu_split_supported(const cpu_backend *c, int type, int64_t cols);
size_t cpu_split_scratch_bytes(int64_t cols, int64_t rows, int threads);
void cpu_matmul_split(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                      float beta);
/* backend/cpu/fail.c: records the first failure of an operation (backend.h,
 * "Errors"). */
void cpu_fail(rg_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* backend/cpu/rope.c: rotates x's pairs by sign * (float)pos[t] * inv_freq[i]: +1 is RoPE, -1
 * its transpose (the backward of RoPE). */
void cpu_rope_rotate(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
                     bool adjacent, float sign);

/* backend/cpu/attention.c: attention and its gradient. */
void cpu_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                   const rg_buf *v_cache, const rg_attn_desc *a);
void cpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                            const rg_buf *v_cache, const rg_attn_desc *a);

/* backend/cpu/grad.c: the gradient entries of the operation table. */
void cpu_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n);
void cpu_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width);
void cpu_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                         int M, const rg_bweight *w);
void cpu_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d);
void cpu_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                          const rg_bweight *w, int rows, int d, float eps);
void cpu_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                       const rg_buf *inv_freq, bool adjacent);
void cpu_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                         const rg_buf *up, size_t n);
void cpu_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                           const rg_attn_desc *a);
void cpu_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab);
void cpu_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                      const float *scale, int rows, int vocab, float log_p_min);
int cpu_sum_squares(rg_backend *be, const rg_buf *b, double *out);
void cpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st);

#endif
