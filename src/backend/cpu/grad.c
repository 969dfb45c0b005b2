/* backend/cpu/grad.c: the CPU backend's gradient and optimizer operations
 * (backend.h, "gradients" and "training"). Matrix products are cblas_sgemm with beta = 1, so they add
 * into the gradients; the rest are OpenMP loops. Work is split so that no
 * two threads ever add into the same float: matmul's dx by column slices
 * and dw by row slices, rmsnorm's dw by columns (attention's backward is in
 * backend/cpu/attention.c). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"

void cpu_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n) {
  memset(b->data + offset, 0, n * sizeof(float));
}

void cpu_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width) {
  for (int i = 0; i < n; i++) { /* serial: rows may repeat */
    float *d = dsrc->data + (size_t)rows[i] * width;
    const float *g = ddst->data + (size_t)i * width;
    for (int j = 0; j < width; j++) d[j] += g[j];
  }
}

/* [lo, hi) of thread tid's share of n items in groups of g (the last one ragged). */
static void slice(int n, int g, int tid, int nt, int *lo, int *hi) {
  const int groups = (n + g - 1) / g;
  *lo = groups * tid / nt * g;
  *hi = groups * (tid + 1) / nt * g;
  if (*hi > n) *hi = n;
  if (*lo > n) *lo = n;
}

/* ---------------------------------------------------------------- matmul */

void cpu_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                         int M, const rg_bweight *w) {
  const int K = (int)w->cols, N = (int)w->rows;
  if (M <= 0) return;
  cpu_backend *c = cpu(be); /* one OpenMP team does all the work, as in cpu_matmul */
  /* A tiled weight is dequantized one shared tile of rows at a time, by all
   * threads, into the backend's scratch (tile_floats per thread). */
  const int tile_rows = w->f32 ? 0 : (int)(c->scratch.tile_floats * (size_t)be->threads / (size_t)K);
#pragma omp parallel num_threads(be->threads)
  {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    int n0, n1, k0, k1;
    slice(N, 16, tid, nt, &n0, &n1);
    slice(K, 16, tid, nt, &k0, &k1);
    if (dw && n1 > n0)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n1 - n0, K, M, 1.0f, dy->data + n0, N, x->data, K, 1.0f,
                  dw->data + (size_t)n0 * K, K);
    if (dbias)
      for (int n = n0; n < n1; n++) {
        float sum = 0;
        for (int m = 0; m < M; m++) sum += dy->data[(size_t)m * N + n];
        dbias->data[n] += sum;
      }
    if (dx && w->f32) {
      if (k1 > k0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, k1 - k0, N, 1.0f, dy->data, N, w->f32 + k0, K, 1.0f,
                    dx->data + k0, K);
    } else if (dx) {
      for (int r0 = 0; r0 < N; r0 += tile_rows) {
        const int nr = N - r0 < tile_rows ? N - r0 : tile_rows;
#pragma omp for schedule(static)
        for (int r = 0; r < nr; r++) rg_dequantize_row(w->t->type, row_ptr(w, r0 + r), c->scratch.tile + (size_t)r * K, K);
        /* (the omp for ends with a barrier: the tile is complete) */
        if (k1 > k0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, k1 - k0, nr, 1.0f, dy->data + r0, N,
                      c->scratch.tile + k0, K, 1.0f, dx->data + k0, K);
#pragma omp barrier
      }
    }
  }
}

void cpu_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d) {
  /* Serial over tokens (repeated ids add into one row); n * d is small
   * next to any matmul of the same batch. */
  for (int i = 0; i < b->n; i++) {
    float *row = dw->data + (size_t)b->ids[i] * d;
    const float *g = dy->data + (size_t)i * d;
    for (int j = 0; j < d; j++) row[j] += g[j];
  }
}

/* ---------------------------------------------------------------- elementwise */

/* y = g * x * r with r = (mean(x^2) + eps)^-1/2:
 * dx_j = r g_j dy_j - x_j r^3 / d * sum_i g_i dy_i x_i,  dg_j = sum_rows dy_j x_j r. */
static double inv_rms(const float *x, int d, float eps) {
  double ss = 0;
#pragma omp simd reduction(+ : ss) /* as cpu_rmsnorm's */
  for (int i = 0; i < d; i++) ss += (double)x[i] * x[i];
  return 1.0 / sqrt(ss / d + eps);
}

void cpu_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                          const rg_bweight *w, int rows, int d, float eps) {
  const float *g = w->f32;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * d > PAR_MIN)
  for (int r = 0; r < rows; r++) {
    const float *xr = x->data + (size_t)r * d, *gr = dy->data + (size_t)r * d;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < d; i++) dot += (double)g[i] * gr[i] * xr[i];
    const double rr = inv_rms(xr, d, eps);
    const float a = (float)rr, b = (float)(rr * rr * rr * dot / d);
    float *dr = dx->data + (size_t)r * d;
    for (int i = 0; i < d; i++) dr[i] += a * g[i] * gr[i] - b * xr[i];
  }
  /* Every row adds into all of dw: serial over rows (rows * d work, small
   * next to the matmuls around a norm). */
  if (dw)
    for (int r = 0; r < rows; r++) {
      const float *xr = x->data + (size_t)r * d, *gr = dy->data + (size_t)r * d;
      const float rr = (float)inv_rms(xr, d, eps);
      for (int i = 0; i < d; i++) dw->data[i] += gr[i] * xr[i] * rr;
    }
}

void cpu_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                       const rg_buf *inv_freq, bool adjacent) {
  /* A rotation's transpose is the rotation by the opposite angle. */
  cpu_rope_rotate(be, dx, b, n_heads, head_dim, inv_freq, adjacent, -1.0f);
}

/* out = silu(g) u, silu(g) = g s(g): dout/du = silu(g), dout/dg = u s (1 + g (1 - s)). */
void cpu_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                         const rg_buf *up, size_t n) {
  const float *g = gate->data, *u = up->data, *d = dy->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    const float s = 1.0f / (1.0f + cpu_expf(-g[i]));
    dgate->data[i] += d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    dup->data[i] += d[i] * g[i] * s;
  }
}

/* ---------------------------------------------------------------- KV store */

void cpu_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                           const rg_attn_desc *a) {
  const size_t kvd = (size_t)a->n_kv_heads * a->head_dim;
  const rg_batch *b = a->batch;
  for (int t = 0; t < b->n; t++) {
    const size_t slot = ((size_t)b->seq[t] * a->max_ctx + b->pos[t]) * kvd;
    float *dkc = dk_cache->data + slot, *dvc = dv_cache->data + slot;
    for (size_t i = 0; i < kvd; i++) {
      dk->data[t * kvd + i] += dkc[i];
      dv->data[t * kvd + i] += dvc[i];
    }
    memset(dkc, 0, kvd * sizeof *dkc);
    memset(dvc, 0, kvd * sizeof *dvc);
  }
}

/* ---------------------------------------------------------------- loss */

/* The row's maximum *m and the sum of exp(z[v] - m) over v != skip (skip
 * -1: all): the softmax's normalizer without overflow. Each term is a float
 * cpu_expf (within 1e-7 of exp; torch's float32 softmax also takes its terms
 * in float). The terms are summed in float over blocks of EXP_BLOCK logits,
 * as SIMD reductions (so 16 terms per lane at 16 lanes: a relative error
 * of about 1e-6 at worst), and the blocks' sums in double. The order of
 * addition is the vector width's, fixed for a build: the same logits give
 * the same sum on every thread count and batch. At SmolLM2's 49k vocabulary
 * this normalizer, then a loop of glibc expf calls summed in double, took
 * 6% of a GCG step. */
enum { EXP_BLOCK = 256 };

static double exp_sum(const float *z, int vocab, int skip, float *m) {
  float mx = z[0];
#pragma omp simd reduction(max : mx)
  for (int v = 1; v < vocab; v++) mx = z[v] > mx ? z[v] : mx;
  double sum = 0;
  for (int v0 = 0; v0 < vocab; v0 += EXP_BLOCK) {
    const int v1 = v0 + EXP_BLOCK < vocab ? v0 + EXP_BLOCK : vocab;
    float block = 0;
#pragma omp simd reduction(+ : block)
    for (int v = v0; v < v1; v++) block += v != skip ? cpu_expf(z[v] - mx) : 0.0f; /* left out, not subtracted */
    sum += block;
  }
  *m = mx;
  return sum;
}

void cpu_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * vocab > PAR_MIN)
  for (int r = 0; r < rows; r++) {
    const float *z = logits->data + (size_t)r * vocab;
    float m;
    const double sum = exp_sum(z, vocab, -1, &m), lse = m + log(sum);
    losses->data[r] = (float)(lse - z[targets[r]]);
    if (dlogits && scale[r] != 0) {
      float *g = dlogits->data + (size_t)r * vocab;
      const float c = (float)(scale[r] / sum); /* softmax = exp(z - m) / sum */
      for (int v = 0; v < vocab; v++) g[v] += c * cpu_expf(z[v] - m);
      g[targets[r]] -= scale[r];
    }
  }
}

/* With e = exp(z_y - m), S_rest = sum over v != y of exp(z_v - m) (summed
 * without the target, not as S - e, as HarmBench's logsumexp with z_y set to
 * -1e10, adv_training_utils.py:465-475: 1 - p keeps its precision when p is
 * near 1) and S = S_rest + e: p = e / S, log(1 - p) = log(S_rest / S), and
 * d(-log(1 - p))/dz_v = -q_v p / (1 - p) = -exp(z_v - m) / S * e / S_rest
 * for v != y (q = softmax(z)), +p for v = y. */
void cpu_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                      const float *scale, int rows, int vocab, float log_p_min) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * vocab > PAR_MIN)
  for (int r = 0; r < rows; r++) {
    const float *z = logits->data + (size_t)r * vocab;
    const int y = targets[r];
    float m;
    const double rest = exp_sum(z, vocab, y, &m), e = exp((double)z[y] - m), sum = rest + e;
    const bool kept = (double)z[y] - m - log(sum) >= log_p_min; /* log p >= threshold */
    losses->data[r] = kept ? (float)-log(rest / sum) : 0.0f;
    if (dlogits && kept && scale[r] != 0) {
      float *g = dlogits->data + (size_t)r * vocab;
      const double c = scale[r] * e / (sum * rest);
      for (int v = 0; v < vocab; v++)
        if (v != y) g[v] -= (float)c * cpu_expf(z[v] - m);
      g[y] += (float)(scale[r] * e / sum);
    }
  }
}

/* ---------------------------------------------------------------- training */

/* simd: a plain double sum is one serial chain of adds (its order is
 * fixed, so it cannot be vectorized), 4 cycles a float: 0.08 s a step on
 * SmolLM2's 135M gradients, a third of the optimizer. In double, the order
 * of the partial sums does not matter at float32 precision. */
int cpu_sum_squares(rg_backend *be, const rg_buf *b, double *out) {
  double ss = 0;
  const float *x = b->data;
  const size_t n = b->n;
#pragma omp parallel for simd num_threads(be->threads) schedule(static) reduction(+ : ss) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  *out = ss;
  return 0;
}

void cpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st) {
  const size_t whole = (size_t)param->rows * (size_t)param->cols, n = st->count ? st->count : whole;
  if (!param->owned || st->offset > whole || n > whole - st->offset || grad->n < n || m->n < n || v->n < n) {
    cpu_fail(be, "adamw: %s is not a writable f32 weight of %zu floats with gradient and moments",
             param->t->name ? param->t->name : "(tensor)", st->offset + n);
    return;
  }
  const double bc1 = 1 - pow(st->beta1, (double)st->step), bc2 = 1 - pow(st->beta2, (double)st->step);
  const float step = (float)(st->lr / bc1), decay = (float)(1 - st->lr * st->weight_decay);
  const float b1 = (float)st->beta1, b2 = (float)st->beta2, sbc2 = (float)sqrt(bc2), eps = (float)st->eps;
  /* 1 - beta in double, as torch's python float: 1 - (float)0.999 is
   * 9.9998713e-4, which made sqrt(v) 6.4e-6 low (test_r2d2_update) */
  const float one_b1 = (float)(1 - st->beta1), one_b2 = (float)(1 - st->beta2);
  const float scale = st->grad_scale;
  float *p = param->owned + st->offset, *md = m->data, *vd = v->data;
  const float *g = grad->data;
  param->split = false; /* products read the copy from now on, not the file's blocks */
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t k = 0; k < n; k++) {
    const float gk = g[k] * scale;
    md[k] = b1 * md[k] + one_b1 * gk;
    vd[k] = b2 * vd[k] + one_b2 * gk * gk;
    p[k] = p[k] * decay - step * md[k] / (sqrtf(vd[k]) / sbc2 + eps);
  }
}
