/* backend_cpu_grad.c: the CPU backend's gradient and optimizer operations
 * (backend.h, "gradients" and "training"). Matrix products are cblas_sgemm with beta = 1, so they add
 * into the gradients; the rest are OpenMP loops. Work is split so that no
 * two threads ever add into the same float: matmul's dx by column slices
 * and dw by row slices, attention's dk/dv by (sequence, kv head), rmsnorm's
 * dw by columns. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/backend_cpu_internal.h"

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
  const int tile_rows = w->f32 ? 0 : (int)(c->tile_floats * (size_t)be->threads / (size_t)K);
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
        for (int r = 0; r < nr; r++) rg_dequantize_row(w->t->type, row_ptr(w, r0 + r), c->tile + (size_t)r * K, K);
        /* (the omp for ends with a barrier: the tile is complete) */
        if (k1 > k0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, k1 - k0, nr, 1.0f, dy->data + r0, N,
                      c->tile + k0, K, 1.0f, dx->data + k0, K);
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
    const float s = 1.0f / (1.0f + expf(-g[i]));
    dgate->data[i] += d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    dup->data[i] += d[i] * g[i] * s;
  }
}

/* ---------------------------------------------------------------- attention */

/* For one query (token t, head h) with scores s_j = q.k_j / sqrt(hd) over
 * its keys, P = softmax(s), out = sum_j P_j v_j:
 *   dv_j += P_j dout,  dP_j = dout . v_j,  dS_j = P_j (dP_j - dout . out),
 *   dq += dS_j k_j / sqrt(hd),  dk_j += dS_j q / sqrt(hd),
 * with dout . out = sum_j P_j dP_j. Nothing is saved by the forward.
 * Work items are (sequence, kv head) pairs, the owners of disjoint cache
 * rows of dk/dv; a query head belongs to one kv head's group. Each item
 * takes its sequence's queries in blocks of at most ATTN_QUERY_BLOCK rows
 * and does the five products of a block as sgemm calls over the keys the
 * block can see (S = Q K^T, dP = dO V^T, dV += P^T dO, dQ = dS K,
 * dK += dS^T Q), with the mask and the softmax in between: memory is two
 * block x keys matrices per thread, never S x S. */
enum { ATTN_QUERY_BLOCK = 128 };

typedef struct {
  float *q, *dout, *dq;   /* [block, hd] gathered query rows, their dout, their dq */
  float *p, *dp;          /* [block, n_keys] probabilities, then dS; dout . v_j */
  int *tok;               /* [block] batch index of each query row */
} attn_scratch;

static void attention_backward_block(const rg_attn_desc *a, const attn_scratch *w, int nq, int n_keys,
                                     const float *kc, const float *vc, float *dkc, float *dvc, const rg_buf *q,
                                     const rg_buf *dy, rg_buf *dq, int h) {
  const int hd = a->head_dim, nh = a->n_heads, kvd = a->n_kv_heads * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const rg_batch *b = a->batch;
  for (int i = 0; i < nq; i++) {
    const size_t row = ((size_t)w->tok[i] * nh + h) * hd;
    memcpy(w->q + (size_t)i * hd, q->data + row, (size_t)hd * sizeof(float));
    memcpy(w->dout + (size_t)i * hd, dy->data + row, (size_t)hd * sizeof(float));
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n_keys, hd, scale, w->q, hd, kc, kvd, 0.0f, w->p, n_keys);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n_keys, hd, 1.0f, w->dout, hd, vc, kvd, 0.0f, w->dp,
              n_keys);
  for (int i = 0; i < nq; i++) {
    const int pt = b->pos[w->tok[i]];
    const int lo = a->window > 0 && pt - a->window + 1 > 0 ? pt - a->window + 1 : 0;
    float *pr = w->p + (size_t)i * n_keys, *dpr = w->dp + (size_t)i * n_keys;
    float m = -INFINITY;
    for (int j = lo; j <= pt; j++)
      if (pr[j] > m) m = pr[j];
    double l = 0; /* sum of e_j = exp(s_j - m), as the forward computes them */
    for (int j = lo; j <= pt; j++) l += pr[j] = expf(pr[j] - m);
    const float inv_l = (float)(1.0 / l);
    double dot_out = 0;
    for (int j = lo; j <= pt; j++) dot_out += (double)(pr[j] *= inv_l) * dpr[j];
    for (int j = 0; j < lo; j++) pr[j] = dpr[j] = 0;
    for (int j = pt + 1; j < n_keys; j++) pr[j] = dpr[j] = 0;
    /* dpr becomes dS (scaled): P_j (dP_j - dout . out) / sqrt(hd) */
    for (int j = lo; j <= pt; j++) dpr[j] = pr[j] * (dpr[j] - (float)dot_out) * scale;
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_keys, hd, nq, 1.0f, w->p, n_keys, w->dout, hd, 1.0f, dvc,
              kvd);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_keys, hd, nq, 1.0f, w->dp, n_keys, w->q, hd, 1.0f, dkc, kvd);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, n_keys, 1.0f, w->dp, n_keys, kc, kvd, 0.0f, w->dq,
              hd);
  for (int i = 0; i < nq; i++) axpy(dq->data + ((size_t)w->tok[i] * nh + h) * hd, 1.0f, w->dq + (size_t)i * hd, hd);
}

void cpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *k_cache, const rg_buf *v_cache, const rg_attn_desc *a) {
  const int hd = a->head_dim, nh = a->n_heads, nkv = a->n_kv_heads, group = nh / nkv;
  const size_t kvd = (size_t)nkv * hd;
  const rg_batch *b = a->batch;
  int n_seqs = 0;
  for (int t = 0; t < b->n; t++)
    if (b->seq[t] + 1 > n_seqs) n_seqs = b->seq[t] + 1;
  const int n_work = n_seqs * nkv;
  const size_t block_floats = (size_t)ATTN_QUERY_BLOCK * (3 * (size_t)hd + 2 * (size_t)a->max_ctx);
  bool out_of_memory = false;
#pragma omp parallel num_threads(be->threads) if (n_work > 1)
  {
    attn_scratch w = {.q = malloc(block_floats * sizeof(float)), .tok = malloc(ATTN_QUERY_BLOCK * sizeof(int))};
    if (!w.q || !w.tok) {
#pragma omp atomic write
      out_of_memory = true;
    } else {
      w.dout = w.q + (size_t)ATTN_QUERY_BLOCK * hd;
      w.dq = w.dout + (size_t)ATTN_QUERY_BLOCK * hd;
      w.p = w.dq + (size_t)ATTN_QUERY_BLOCK * hd;
      w.dp = w.p + (size_t)ATTN_QUERY_BLOCK * a->max_ctx;
    }
#pragma omp for schedule(dynamic, 1)
    for (int wi = 0; wi < n_work; wi++) {
      if (!w.q || !w.tok) continue;
      const int sq = wi / nkv, kvh = wi % nkv;
      const size_t base = (size_t)sq * a->max_ctx * kvd + (size_t)kvh * hd;
      /* the sequence's queries in batch order, a block at a time; a block
       * sees keys 0 .. its largest position */
      for (int t0 = 0; t0 < b->n;) {
        int nq = 0, n_keys = 0;
        for (; t0 < b->n && nq < ATTN_QUERY_BLOCK; t0++)
          if (b->seq[t0] == sq) {
            w.tok[nq++] = t0;
            if (b->pos[t0] + 1 > n_keys) n_keys = b->pos[t0] + 1;
          }
        for (int h = kvh * group; nq > 0 && h < (kvh + 1) * group; h++)
          attention_backward_block(a, &w, nq, n_keys, k_cache->data + base, v_cache->data + base,
                                   dk_cache->data + base, dv_cache->data + base, q, dy, dq, h);
      }
    }
    free(w.q);
    free(w.tok);
  }
  if (out_of_memory) cpu_fail(be, "attention backward: out of memory for %zu floats of scratch per thread", block_floats);
}

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
 * expf, as torch's float32 softmax takes it (a double exp per logit cost a
 * tenth of a training step at SmolLM2's 49k vocabulary); the sum is double. */
static double exp_sum(const float *z, int vocab, int skip, float *m) {
  *m = z[0];
  for (int v = 1; v < vocab; v++)
    if (z[v] > *m) *m = z[v];
  double sum = 0;
  for (int v = 0; v < vocab; v++)
    if (v != skip) sum += expf(z[v] - *m);
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
      for (int v = 0; v < vocab; v++) g[v] += c * expf(z[v] - m);
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
        if (v != y) g[v] -= (float)c * expf(z[v] - m);
      g[y] += (float)(scale[r] * e / sum);
    }
  }
}

/* ---------------------------------------------------------------- training */

int cpu_sum_squares(rg_backend *be, const rg_buf *b, double *out) {
  double ss = 0;
  const float *x = b->data;
  const size_t n = b->n;
#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(+ : ss) if (n > PAR_MIN)
  for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  *out = ss;
  return 0;
}

void cpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st) {
  const size_t n = (size_t)param->rows * (size_t)param->cols;
  if (!param->owned || grad->n < n || m->n < n || v->n < n) {
    cpu_fail(be, "adamw: %s is not a writable f32 weight of %zu floats with gradient and moments",
             param->t->name ? param->t->name : "(tensor)", n);
    return;
  }
  const double bc1 = 1 - pow(st->beta1, (double)st->step), bc2 = 1 - pow(st->beta2, (double)st->step);
  const float step = (float)(st->lr / bc1), decay = (float)(1 - st->lr * st->weight_decay);
  const float b1 = (float)st->beta1, b2 = (float)st->beta2, sbc2 = (float)sqrt(bc2), eps = (float)st->eps;
  /* 1 - beta in double, as torch's python float: 1 - (float)0.999 is
   * 9.9998713e-4, which made sqrt(v) 6.4e-6 low (test_r2d2_update) */
  const float one_b1 = (float)(1 - st->beta1), one_b2 = (float)(1 - st->beta2);
  const float scale = st->grad_scale;
  float *p = param->owned, *md = m->data, *vd = v->data;
  const float *g = grad->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
  for (size_t k = 0; k < n; k++) {
    const float gk = g[k] * scale;
    md[k] = b1 * md[k] + one_b1 * gk;
    vd[k] = b2 * vd[k] + one_b2 * gk * gk;
    p[k] = p[k] * decay - step * md[k] / (sqrtf(vd[k]) / sbc2 + eps);
  }
}
