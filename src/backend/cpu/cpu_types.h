/* backend/cpu/cpu_types.h: what the CPU backend's kernels share with its
 * operation table (cpu.c): a weight as the backend keeps it (rg_bweight),
 * the scratch a kernel is handed (cpu_scratch), small inline helpers, and the
 * float32 kernels' entry points. A kernel sees these and never the backend
 * struct (cpu_internal.h), so the table calls the kernels and no kernel
 * reads the table's state. */
#ifndef RG_BACKEND_CPU_TYPES_H
#define RG_BACKEND_CPU_TYPES_H

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

/* The scratch the backend grows for its weights (rg_cpu_scratch_for,
 * cpu_q8_scratch_bytes, cpu_split_scratch_bytes) and hands to a kernel with
 * its thread count; a kernel uses at most THREADS threads, each its own
 * slice of the per-thread parts. */
typedef struct {
  int threads;
  float *tile; /* dequantized weight rows, tile_floats per thread */
  size_t tile_floats;
  float *panel_xt; /* cpu_matmul_panel's transposed activations, panel_xt_floats */
  size_t panel_xt_floats;
  void *q8; /* activations and weight panels of cpu_matmul_q8 and cpu_matmul_split */
  size_t q8_bytes;
} cpu_scratch;

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
 * products); above, dequantized tiles and sgemm: past it the panel products
 * stop gaining on sgemm, whose copy of the weight is then a small share
 * (docs/benchmarks.md, "Figures behind the CPU kernels' choices"). */
enum { PANEL_MAX_M = 512 };

/* backend/cpu/panel.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for M <= PANEL_MAX_M rows of x, W in its file dtype (w->f32 == NULL),
 * with s->panel_xt of at least cpu_panel_scratch_floats(cols) floats and
 * s->tile of TILE_MIN_ROWS rows per thread. */
size_t cpu_panel_scratch_floats(int64_t cols);
void cpu_matmul_panel(const cpu_scratch *s, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                      const rg_bweight *bias, float beta);

/* backend/cpu/skinny.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for M <= SKINNY_MAX_M rows of x, W in its file dtype (w->f32 == NULL). */
void cpu_matmul_skinny(const cpu_scratch *s, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                       const rg_bweight *bias, float beta);

#endif
