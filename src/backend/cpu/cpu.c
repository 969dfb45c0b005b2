/* backend/cpu/cpu.c: the CPU implementation of backend.h.
 *
 * Matrix products take one of five paths, chosen per weight and per
 * product (matmul_into):
 *  - OpenBLAS cblas_sgemm on float32: a float32 weight, or another dtype
 *    copied to float32 once (rg_backend_weight, when the whole model fits
 *    comfortably in RAM), or kept in its file dtype and, above PANEL_MAX_M
 *    rows of x, dequantized in row tiles into a scratch buffer right before
 *    each sgemm on the tile, which keeps a 7B bf16 model at its mmap size
 *    plus one tile per thread.
 *    Measured on SmolLM2-135M (2 threads, 16 x 128 prefill) the f32 copy
 *    is ~15% faster (90 vs 79 GFLOP/s), hence RG_WEIGHTS_AUTO.
 *  - skinny products (backend/cpu/skinny.c): a tiled weight and a few rows
 *    of x, the blocks decoded a register block at a time.
 *  - panel products (backend/cpu/panel.c): a tiled weight and up to
 *    PANEL_MAX_M rows of x, the blocks decoded a register block at a time,
 *    x transposed once; no copy of the weight, which sgemm makes and at
 *    such M pays for.
 *  - 8-bit products (backend/cpu/q8/q8.c, cpu_matmul_q8): RG_FORM_FILE_Q8,
 *    x quantized to 8 bits per product, llama.cpp's arithmetic.
 *  - split products (the same file, cpu_matmul_split): a block-quantized
 *    weight nothing has updated, on a CPU with AMX-BF16; float32-exact,
 *    1.4-1.6x sgemm's speed on SmolLM2's shapes at 2048 rows
 *    (bench_matmul). REFGEO_MAX_ISA=avx512 turns them (and the AMX 8-bit
 *    kernels) off.
 *
 * Everything else (norms, RoPE, elementwise ops) is OpenMP loops. Attention,
 * forward and backward, is in backend/cpu/attention.c; the other gradient and
 * optimizer operations are in backend/cpu/grad.c.
 *
 * Threads: every parallel region names its team size (num_threads) from
 * this backend's count, so two CPU backends with different counts coexist,
 * even used from two threads at once; nothing calls omp_set_num_threads. A
 * matmul gives each thread of the team a slice of the weight rows and a
 * single-threaded sgemm, so OpenBLAS's own (process-wide) thread count is
 * set to 1, once, when the first CPU backend is made (Debian's OpenBLAS is
 * the pthreads build; see cpu_matmul for why).
 */
#include "backend/backend.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/registry.h"
#include "util/error.h"

/* ---------------------------------------------------------------- errors */

static int cpu_status(rg_backend *be) {
  cpu_backend *c = cpu(be);
  if (!c->failed) return 0;
  c->failed = false;
  return rg_error_set("cpu backend: %s", c->error);
}

/* ---------------------------------------------------------------- buffers */

static rg_buf *cpu_buf_new(rg_backend *be, size_t n) {
  rg_buf *b = malloc(sizeof *b);
  /* calloc reserves zero pages that are taken only when written; to commit
   * them, write them (explicit_bzero: a memset after calloc is a store the
   * compiler may drop as redundant) */
  const bool commit = cpu(be)->commit;
  float *d = commit ? malloc((n ? n : 1) * sizeof(float)) : calloc(n ? n : 1, sizeof(float));
  if (!b || !d) {
    free(b);
    free(d);
    rg_error_set("cpu backend: out of memory allocating %zu floats", n);
    return NULL;
  }
  if (commit) explicit_bzero(d, (n ? n : 1) * sizeof(float));
  b->n = n;
  b->data = d;
  return b;
}

static void cpu_buf_free(rg_backend *be, rg_buf *b) {
  free(b->data);
  free(b);
}

static void cpu_buf_upload(rg_backend *be, rg_buf *dst, size_t offset, const float *src, size_t n) {
  memcpy(dst->data + offset, src, n * sizeof(float));
}

static void cpu_buf_copy(rg_backend *be, rg_buf *dst, size_t dst_offset, const rg_buf *src, size_t src_offset,
                         size_t n) {
  memcpy(dst->data + dst_offset, src->data + src_offset, n * sizeof(float));
}

static void cpu_buf_copy_rows(rg_backend *be, rg_buf *dst, size_t dst_offset, size_t dst_stride, const rg_buf *src,
                              size_t src_offset, size_t src_stride, int rows, size_t width) {
  for (int i = 0; i < rows; i++)
    memcpy(dst->data + dst_offset + (size_t)i * dst_stride, src->data + src_offset + (size_t)i * src_stride,
           width * sizeof(float));
}

static int cpu_buf_download(rg_backend *be, const rg_buf *src, size_t offset, float *dst, size_t n) {
  memcpy(dst, src->data + offset, n * sizeof(float));
  return cpu_status(be);
}

static rg_batch *cpu_batch_new(rg_backend *be, int cap) {
  rg_batch *b = calloc(1, sizeof *b);
  const size_t n = cap > 0 ? (size_t)cap : 1;
  if (b) {
    b->cap = cap;
    b->ids = malloc(n * sizeof *b->ids);
    b->seq = malloc(n * sizeof *b->seq);
    b->pos = malloc(n * sizeof *b->pos);
  }
  if (!b || !b->ids || !b->seq || !b->pos) {
    if (b) free(b->ids), free(b->seq), free(b->pos);
    free(b);
    rg_error_set("cpu backend: out of memory for a %d-token batch", cap);
    return NULL;
  }
  return b;
}

static void cpu_batch_free(rg_backend *be, rg_batch *b) {
  free(b->ids);
  free(b->seq);
  free(b->pos);
  free(b);
}

static void cpu_batch_set(rg_backend *be, rg_batch *b, const int32_t *ids, const int *seq, const int *pos, int n) {
  if (n < 0 || n > b->cap) {
    cpu_fail(be, "batch of %d tokens, room for %d", n, b->cap);
    return;
  }
  if (ids) memcpy(b->ids, ids, (size_t)n * sizeof *ids);
  memcpy(b->seq, seq, (size_t)n * sizeof *seq);
  memcpy(b->pos, pos, (size_t)n * sizeof *pos);
  b->n = n;
}

static void cpu_gather_rows(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n, int width) {
  for (int i = 0; i < n; i++)
    memmove(dst->data + (size_t)i * width, src->data + (size_t)rows[i] * width, (size_t)width * sizeof(float));
}

/* ---------------------------------------------------------------- weights */

/* Dequantizes rows [r0, r0+n) into dst; the dtype was checked at creation,
 * so rg_dequantize_row cannot fail here. */
static void dequant_rows(rg_backend *be, const rg_bweight *w, int64_t r0, int64_t n, float *dst) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * w->cols > PAR_MIN)
  for (int64_t r = 0; r < n; r++) rg_dequantize_row(w->t->type, row_ptr(w, r0 + r), dst + r * w->cols, w->cols);
}

/* Makes *p hold at least NEED units of UNIT bytes (*have counts units):
 * the per-backend scratch a weight's products need. 0, or -1 (out of
 * memory: *p is unchanged). */
static int grow_scratch(void **p, size_t *have, size_t need, size_t unit) {
  if (need <= *have) return 0;
  void *grown = realloc(*p, need * unit);
  if (!grown) return -1;
  *p = grown;
  *have = need;
  return 0;
}

/* RG_FORM_FILE_Q8: points W's 8-bit products at the rows they read, when
 * this CPU has kernels for them: the file's blocks, or for a float matrix a
 * q8_0 copy made here (gguf-py's rule, rg_quantize_row_q8_0), and grows the
 * products' scratch. Leaves W on the float32 paths otherwise. 0, or -1 with
 * the error set (out of memory). */
static int q8_prepare(rg_backend *be, rg_bweight *w) {
  cpu_backend *c = cpu(be);
  const rg_tensor *t = w->t;
  const bool from_float = t->type == RG_F32 || t->type == RG_F16 || t->type == RG_BF16;
  const int type = from_float ? RG_Q8_0 : t->type;
  if (!cpu_q8_supported(c->q8, type, w->cols)) return 0;
  const char *name = t->name ? t->name : "(tensor)";
  if (grow_scratch(&c->scratch.q8, &c->scratch.q8_bytes, cpu_q8_scratch_bytes(w->cols, be->threads), 1) < 0)
    return rg_error_set("%s: out of memory for the matmul scratch", name);
  w->q8_rows = t->data, w->q8_row_bytes = w->row_bytes, w->q8_type = type;
  if (from_float) {
    const size_t rb = rg_dtype_row_bytes(RG_Q8_0, w->cols);
    if (!(w->q8_owned = malloc(rb * (size_t)w->rows)))
      return rg_error_set("%s: out of memory for a q8_0 copy", name);
    bool failed = false;
#pragma omp parallel num_threads(be->threads)
    {
      float *row = malloc((size_t)w->cols * sizeof *row);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < w->rows; r++)
        if (row) {
          rg_dequantize_row(t->type, row_ptr(w, r), row, w->cols);
          rg_quantize_row_q8_0(row, w->q8_owned + (size_t)r * rb, w->cols);
        }
      if (!row) {
#pragma omp atomic write
        failed = true;
      }
      free(row);
    }
    if (failed) {
      free(w->q8_owned), w->q8_owned = NULL;
      return rg_error_set("%s: out of memory quantizing to q8_0", name);
    }
    w->q8_rows = w->q8_owned, w->q8_row_bytes = rb;
  }
  w->q8 = true;
  return 0;
}

rg_cpu_scratch rg_cpu_scratch_for(int64_t cols) {
  const size_t tile = (size_t)cols * TILE_MIN_ROWS;
  return (rg_cpu_scratch){.tile_floats = tile > TILE_FLOATS ? tile : TILE_FLOATS,
                          .panel_floats = cpu_panel_scratch_floats(cols)};
}

static rg_bweight *cpu_weight_new(rg_backend *be, const rg_tensor *t, rg_weight_form form) {
  const rg_dtype_info *info = rg_dtype_get(t->type);
  const char *name = t->name ? t->name : "(tensor)";
  if (!info || !info->can_dequantize) {
    rg_error_set("%s: dtype %d cannot be used for compute", name, t->type);
    return NULL;
  }
  int64_t cols = t->ne[0], rows = rg_tensor_nrows(t);
  size_t row_bytes = rg_dtype_row_bytes(t->type, cols);
  if (cols <= 0 || rows <= 0 || row_bytes == 0 || (size_t)rows > SIZE_MAX / row_bytes ||
      row_bytes * (size_t)rows > t->nbytes) {
    rg_error_set("%s: %lld x %lld %s elements do not fit its %zu bytes", name, (long long)rows, (long long)cols,
                 info->name, t->nbytes);
    return NULL;
  }
  rg_bweight *w = calloc(1, sizeof *w);
  if (!w) {
    rg_error_set("%s: out of memory", name);
    return NULL;
  }
  *w = (rg_bweight){.t = t, .rows = rows, .cols = cols, .row_bytes = row_bytes};
  bool aligned_f32 = t->type == RG_F32 && ((uintptr_t)t->data % sizeof(float)) == 0;
  if (aligned_f32) {
    w->f32 = t->data;
  } else if (rows == 1 || form == RG_FORM_F32 || t->type == RG_F32) {
    /* Vectors (norms, biases) are always copied: they are tiny and used
     * whole. A misaligned f32 matrix is copied too. */
    w->owned = malloc((size_t)rows * (size_t)cols * sizeof(float));
    if (!w->owned) {
      free(w);
      rg_error_set("%s: out of memory for a %lld x %lld f32 copy", name, (long long)rows, (long long)cols);
      return NULL;
    }
    dequant_rows(be, w, 0, rows, w->owned);
    w->f32 = w->owned;
  } else {
    /* A tiled matrix: make sure each thread's scratch holds a register
     * block of its rows (cpu_matmul_skinny, cpu_matmul_panel) and the
     * panel products' transposed activations fit. */
    cpu_backend *c = cpu(be);
    const rg_cpu_scratch need = rg_cpu_scratch_for(cols);
    cpu_scratch *sc = &c->scratch;
    if (grow_scratch((void **)&sc->tile, &sc->tile_floats, need.tile_floats, (size_t)be->threads * sizeof(float)) < 0 ||
        grow_scratch((void **)&sc->panel_xt, &sc->panel_xt_floats, need.panel_floats, sizeof(float)) < 0) {
      free(w);
      rg_error_set("%s: out of memory for the matmul scratch", name);
      return NULL;
    }
  }
  if (form == RG_FORM_FILE_Q8 && rows > 1 && q8_prepare(be, w) < 0) {
    free(w->owned), free(w);
    return NULL;
  }
  if (!w->q8 && rows > 1 && cpu(be)->split && cpu_split_supported(t->type, cols)) {
    cpu_scratch *sc = &cpu(be)->scratch;
    if (grow_scratch(&sc->q8, &sc->q8_bytes, cpu_split_scratch_bytes(cols, rows, be->threads), 1) < 0) {
      free(w->owned), free(w);
      rg_error_set("%s: out of memory for the matmul scratch", name);
      return NULL;
    }
    w->split = true;
  }
  return w;
}

static void cpu_weight_free(rg_backend *be, rg_bweight *w) {
  free(w->owned), free(w->q8_owned);
  free(w);
}

static size_t cpu_weight_bytes(const rg_bweight *w) {
  return (w->owned ? (size_t)w->rows * (size_t)w->cols * sizeof(float) : 0) +
         (w->q8_owned ? (size_t)w->rows * w->q8_row_bytes : 0);
}

static int cpu_weight_make_f32(rg_backend *be, rg_bweight *w) {
  /* an optimizer updates the float32 copy: the 8-bit products' rows would be stale */
  free(w->q8_owned);
  w->q8_owned = NULL, w->q8 = false, w->split = false;
  if (w->owned) return 0;
  const size_t n = (size_t)w->rows * (size_t)w->cols;
  float *copy = malloc(n * sizeof *copy);
  if (!copy)
    return rg_error_set("%s: out of memory for a %zu-float f32 copy", w->t->name ? w->t->name : "(tensor)", n);
  if (w->f32)
    memcpy(copy, w->f32, n * sizeof *copy);
  else
    dequant_rows(be, w, 0, w->rows, copy);
  w->owned = copy;
  w->f32 = copy;
  return 0;
}

static int cpu_weight_download(rg_backend *be, const rg_bweight *w, float *dst) {
  if (w->f32)
    memcpy(dst, w->f32, (size_t)w->rows * (size_t)w->cols * sizeof *dst);
  else
    dequant_rows(be, w, 0, w->rows, dst);
  return cpu_status(be);
}

static int cpu_weight_upload(rg_backend *be, rg_bweight *w, const float *src) {
  if (!w->owned) return rg_error_set("%s: not a float32 weight of its own", w->t->name ? w->t->name : "(tensor)");
  memcpy(w->owned, src, (size_t)w->rows * (size_t)w->cols * sizeof *src);
  w->split = false; /* the file's blocks no longer hold these values */
  return cpu_status(be);
}

static int cpu_weight_f32_view(rg_backend *be, rg_bweight *w, rg_buf *view) {
  if (!w->owned) return rg_error_set("%s: not a float32 weight of its own", w->t->name ? w->t->name : "(tensor)");
  *view = (rg_buf){.n = (size_t)w->rows * (size_t)w->cols, .data = w->owned};
  return 0;
}

/* ---------------------------------------------------------------- matmul */

/* Every thread of the OpenMP team multiplies its own slice with a
 * single-threaded sgemm (OpenBLAS runs at 1 thread, set once in
 * rg_backend_cpu_new): OpenBLAS's own pthreads running the sgemm right
 * after an OpenMP region compete with the idle OpenMP workers, which keep
 * spinning on the same cores (libgomp's default wait policy); one thread
 * team for everything avoids that.
 *
 * The slice is of W's rows, or of x's rows for a float32 W and at least
 * SLICE_X_MIN_M rows of x: then each thread's sgemm packs only its own rows
 * of x, where slicing W makes every thread pack all of them; that pays only
 * for long prompts (docs/benchmarks.md, "Figures behind the CPU kernels'
 * choices"). */
enum { SLICE_X_MIN_M = 1024 };

/* Thread tid of nt's share [*lo, *hi) of n rows, in whole groups of 16 (the
 * last one ragged). */
static void slice_of_thread(int n, int tid, int nt, int *lo, int *hi) {
  const int groups = (n + 15) / 16, g1 = groups * (tid + 1) / nt;
  *lo = groups * tid / nt * 16;
  *hi = g1 * 16 < n ? g1 * 16 : n;
}

/* y = x . W^T + bias (beta 0) or y += x . W^T (beta 1, no bias). */
static void matmul_into(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                        float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  if (M <= 0) return;
  if (w->q8) { /* any M: a prompt as well as a decode step */
    cpu_matmul_q8(&cpu(be)->scratch, cpu(be)->q8, y, x, M, w, bias, beta);
    return;
  }
  if (!w->f32 && M <= SKINNY_MAX_M) {
    cpu_matmul_skinny(&cpu(be)->scratch, y, x, M, w, bias, beta);
    return;
  }
  if (w->split) {
    cpu_matmul_split(&cpu(be)->scratch, cpu(be)->q8, y, x, M, w, bias, beta);
    return;
  }
  if (!w->f32 && M <= PANEL_MAX_M) {
    cpu_matmul_panel(&cpu(be)->scratch, y, x, M, w, bias, beta);
    return;
  }
  cpu_backend *c = cpu(be);
  const bool slice_x = w->f32 && M >= SLICE_X_MIN_M && be->threads > 1;
  const int team = slice_x || be->threads < N / 16 ? be->threads : (N / 16 > 0 ? N / 16 : 1);
#pragma omp parallel num_threads(team)
  {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    int m0 = 0, m1 = M, n0 = 0, n1 = N;
    if (slice_x) slice_of_thread(M, tid, nt, &m0, &m1);
    else slice_of_thread(N, tid, nt, &n0, &n1);
    if (w->f32) {
      if (m1 > m0 && n1 > n0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m1 - m0, n1 - n0, K, 1.0f, x->data + (size_t)m0 * K, K,
                    w->f32 + (size_t)n0 * K, K, beta, y->data + (size_t)m0 * N + n0, N);
    } else {
      /* Tiled: dequantize up to tile_rows rows of this slice into this
       * thread's scratch, multiply, next tile. */
      float *tile = c->scratch.tile + (size_t)tid * c->scratch.tile_floats;
      const int tile_rows = (int)(c->scratch.tile_floats / (size_t)K);
      for (int r0 = n0; r0 < n1; r0 += tile_rows) {
        const int nr = n1 - r0 < tile_rows ? n1 - r0 : tile_rows;
        for (int r = 0; r < nr; r++) rg_dequantize_row(w->t->type, row_ptr(w, r0 + r), tile + (size_t)r * K, K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, nr, K, 1.0f, x->data, K, tile, K, beta,
                    y->data + r0, N);
      }
    }
    if (bias)
      for (int m = m0; m < m1; m++)
        for (int n = n0; n < n1; n++) y->data[(size_t)m * N + n] += bias->f32[n];
  }
}

static void cpu_matmul(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias) {
  matmul_into(be, y, x, M, w, bias, 0.0f);
}

static void cpu_matmul_add(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w) {
  matmul_into(be, y, x, M, w, NULL, 1.0f);
}

static void cpu_embed(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b) {
  const int64_t d = w->cols;
  const int n = b->n;
  const int32_t *ids = b->ids;
  float *o = out->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)n * d > PAR_MIN)
  for (int i = 0; i < n; i++) {
    if (w->f32)
      memcpy(o + (size_t)i * d, w->f32 + (size_t)ids[i] * d, (size_t)d * sizeof(float));
    else
      rg_dequantize_row(w->t->type, row_ptr(w, ids[i]), o + (size_t)i * d, d);
  }
}

/* ---------------------------------------------------------------- elementwise */

static void cpu_rmsnorm(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d, float eps) {
  const float *xd = x->data, *g = w->f32;
  float *yd = y->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * d > PAR_MIN)
  for (int r = 0; r < rows; r++) {
    const float *xr = xd + (size_t)r * d;
    float *yr = yd + (size_t)r * d;
    double ss = 0;
#pragma omp simd reduction(+ : ss) /* in any order: a serial chain of double adds took 4 cycles a float */
    for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
    /* transformers: x * rsqrt(mean + eps) in float32, then weight * that. */
    float inv = (float)(1.0 / sqrt(ss / d + eps));
    for (int i = 0; i < d; i++) yr[i] = g[i] * (xr[i] * inv);
  }
}

static void cpu_rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
                     bool adjacent) {
  cpu_rope_rotate(be, x, b, n_heads, head_dim, inv_freq, adjacent, 1.0f);
}

static void cpu_swiglu(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n) {
  const float *g = gate->data, *u = up->data;
  float *o = out->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) o[i] = g[i] / (1.0f + cpu_expf(-g[i])) * u[i];
}

static void cpu_add(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n) {
  const float *ad = a->data, *bd = b->data;
  float *yd = y->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) yd[i] = ad[i] + bd[i];
}

static void cpu_scale(rg_backend *be, rg_buf *x, size_t n, float c) {
  float *xd = x->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) xd[i] *= c;
}

static void cpu_ablate(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit) {
  const float *u = unit->data;
  float *xd = x->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * d > PAR_MIN)
  for (int r = 0; r < rows; r++) {
    float *xr = xd + (size_t)r * d;
    double dot = 0;
    for (int i = 0; i < d; i++) dot += (double)xr[i] * u[i];
    float p = (float)dot;
    for (int i = 0; i < d; i++) xr[i] -= p * u[i];
  }
}

static void cpu_add_scaled(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c) {
  const float *vd = v->data;
  float *xd = x->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * d > PAR_MIN)
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < d; i++) xd[(size_t)r * d + i] += c * vd[i];
}

/* ---------------------------------------------------------------- attention */

static void cpu_kv_store(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                         const rg_attn_desc *a) {
  const size_t kvd = (size_t)a->n_kv_heads * a->head_dim;
  const rg_batch *b = a->batch;
  for (int t = 0; t < b->n; t++) {
    size_t slot = ((size_t)b->seq[t] * a->max_ctx + b->pos[t]) * kvd;
    memcpy(k_cache->data + slot, k->data + t * kvd, kvd * sizeof(float));
    memcpy(v_cache->data + slot, v->data + t * kvd, kvd * sizeof(float));
  }
}

/* ---------------------------------------------------------------- lifetime */

static void cpu_free(rg_backend *be) {
  cpu_backend *c = cpu(be);
  free(c->scratch.tile);
  free(c->scratch.q8);
  free(c->scratch.panel_xt);
  free(c);
}

static const rg_backend_iface CPU_IFACE = {
    .name = "cpu",
    .free = cpu_free,
    .status = cpu_status,
    .buf_new = cpu_buf_new,
    .buf_free = cpu_buf_free,
    .buf_upload = cpu_buf_upload,
    .buf_download = cpu_buf_download,
    .batch_new = cpu_batch_new,
    .batch_free = cpu_batch_free,
    .batch_set = cpu_batch_set,
    .gather_rows = cpu_gather_rows,
    .buf_copy = cpu_buf_copy,
    .buf_copy_rows = cpu_buf_copy_rows,
    .weight_new = cpu_weight_new,
    .weight_free = cpu_weight_free,
    .weight_bytes = cpu_weight_bytes,
    .weight_make_f32 = cpu_weight_make_f32,
    .weight_download = cpu_weight_download,
    .weight_upload = cpu_weight_upload,
    .matmul = cpu_matmul,
    .matmul_add = cpu_matmul_add,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .scale = cpu_scale,
    .ablate = cpu_ablate,
    .add_scaled = cpu_add_scaled,
    .buf_zero = cpu_buf_zero,
    .gather_rows_backward = cpu_gather_rows_backward,
    .matmul_backward = cpu_matmul_backward,
    .embed_backward = cpu_embed_backward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .rope_backward = cpu_rope_backward,
    .swiglu_backward = cpu_swiglu_backward,
    .attention_backward = cpu_attention_backward,
    .kv_store_backward = cpu_kv_store_backward,
    .cross_entropy = cpu_cross_entropy,
    .unlikelihood = cpu_unlikelihood,
    .sum_squares = cpu_sum_squares,
    .weight_f32_view = cpu_weight_f32_view,
    .adamw = cpu_adamw,
};

static void blas_single_threaded(void) { openblas_set_num_threads(1); }

rg_backend *rg_backend_cpu_new(const rg_backend_opts *opts) {
  static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
  rg_backend_opts o = opts ? *opts : (rg_backend_opts){0};
  cpu_backend *c = calloc(1, sizeof *c);
  if (!c) {
    rg_error_set("cpu backend: out of memory");
    return NULL;
  }
  pthread_once(&blas_once, blas_single_threaded);
  int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) threads = 1;
  c->base = (rg_backend){.iface = &CPU_IFACE, .threads = threads};
  c->scratch.threads = threads;
  c->commit = o.commit;
  if (cpu_q8_pick(&c->q8) < 0) {
    free(c);
    return NULL;
  }
  c->split = cpu_split_pick(c->q8);
  return &c->base;
}
