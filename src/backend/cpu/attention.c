/* backend/cpu/attention.c: the CPU backend's attention, forward and
 * backward, tiled in the manner of FlashAttention-2 (Dao 2023, arXiv
 * 2307.08691, algorithms 1 and 2).
 *
 * The queries of one sequence are taken in batch order, ATTN_QUERY_TOKENS
 * tokens at a time; the query heads that share a KV head are stacked into
 * one matrix of rows (GQA: head g of the group, token i -> row g * nq + i),
 * so every product below is one sgemm over all of them. Keys are taken in
 * tiles of ATTN_KEY_TILE cache rows, from the first key any of the block's
 * tokens can see to the last.
 *
 * Forward, per key tile: S = Q K^T / sqrt(hd), the mask, then an online
 * softmax (each row's running max m and sum l; the output rows rescaled by
 * exp(m_old - m_new) when the max grows) and O += P V. At the end O /= l
 * and, when asked for, lse = m + log l, the log-sum-exp of each query's
 * visible scores.
 *
 * Backward, per key tile, with the forward's lse and output:
 *   P = exp(S - lse) (masked),  dP = dO V^T,  dS = P (dP - D) / sqrt(hd),
 *   dV += P^T dO,  dK += dS^T Q,  dQ += dS K,
 * where D = rowsum(dO * O) = sum_j P_j dP_j is computed once per row.
 *
 * Memory is a few [rows, hd] and [rows, ATTN_KEY_TILE] matrices per
 * thread, whatever the sequence length: nothing grows with S x S, or with S.
 * Work items: the forward's are (query block, KV head), any thread may take
 * any; the backward's are (sequence, KV head), the owners of disjoint cache
 * rows of dK and dV, so no two threads add into the same float.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"

/* 32 query tokens (96 rows for SmolLM2's groups of 3, 224 for Qwen2.5's 7)
 * keep the forward's work items many enough to balance 2 threads on a
 * 128-token prompt; 128 keys keep the score tiles in L2 (96 x 128 floats,
 * 48 KiB) and the sgemm inner dimensions long. */
enum { ATTN_QUERY_TOKENS = 32, ATTN_KEY_TILE = 128 };

/* The batch's tokens in query blocks: block b holds tokens order[start[b]
 * .. start[b + 1]) (batch indices, one sequence, in batch order), and the
 * blocks of one sequence are consecutive, those of sequence s from block
 * first[s] to first[s + 1]. */
typedef struct {
  int *order, *start, *first;
  int n_blocks, n_seqs;
} query_blocks;

static void query_blocks_free(query_blocks *qb) {
  free(qb->order);
  free(qb->start);
  free(qb->first);
}

static int query_blocks_make(query_blocks *qb, const rg_batch *b) {
  *qb = (query_blocks){0};
  for (int t = 0; t < b->n; t++)
    if (b->seq[t] + 1 > qb->n_seqs) qb->n_seqs = b->seq[t] + 1;
  int *count = calloc((size_t)qb->n_seqs + 1, sizeof *count);
  qb->order = malloc(((size_t)b->n + 1) * sizeof *qb->order);
  qb->first = malloc(((size_t)qb->n_seqs + 1) * sizeof *qb->first);
  qb->start = malloc(((size_t)b->n + 1) * sizeof *qb->start);
  if (!count || !qb->order || !qb->first || !qb->start) {
    free(count);
    query_blocks_free(qb);
    return -1;
  }
  /* a stable counting sort by sequence keeps batch order within each */
  for (int t = 0; t < b->n; t++) count[b->seq[t] + 1]++;
  for (int s = 0; s < qb->n_seqs; s++) count[s + 1] += count[s];
  for (int t = 0; t < b->n; t++) qb->order[count[b->seq[t]]++] = t;
  for (int s = 0; s < qb->n_seqs; s++) { /* count[s] is now the end of sequence s */
    qb->first[s] = qb->n_blocks;
    for (int at = s > 0 ? count[s - 1] : 0; at < count[s]; at += ATTN_QUERY_TOKENS) qb->start[qb->n_blocks++] = at;
  }
  qb->first[qb->n_seqs] = qb->n_blocks;
  qb->start[qb->n_blocks] = b->n;
  free(count);
  return 0;
}

/* One query block of one KV head: its tokens and the keys each one sees. */
typedef struct {
  const int *tok; /* [nq] batch indices */
  int nq, rows;   /* tokens; rows = nq * group */
  int lo[ATTN_QUERY_TOKENS], hi[ATTN_QUERY_TOKENS]; /* token i sees cache rows lo[i] .. hi[i] */
  int k0, k1;                                       /* the block's keys: k0 .. k1 - 1 */
} block_keys;

static void block_keys_make(block_keys *bk, const rg_attn_desc *a, const int *tok, int nq) {
  const rg_batch *b = a->batch;
  const int group = a->n_heads / a->n_kv_heads;
  bk->tok = tok;
  bk->nq = nq;
  bk->rows = nq * group;
  bk->k0 = b->pos[tok[0]];
  bk->k1 = 0;
  for (int i = 0; i < nq; i++) {
    const int p = b->pos[tok[i]];
    bk->hi[i] = p;
    bk->lo[i] = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    if (bk->lo[i] < bk->k0) bk->k0 = bk->lo[i];
    if (p + 1 > bk->k1) bk->k1 = p + 1;
  }
}

/* Copies head group KVH's rows of X ([n_tokens, n_heads * hd]) for the
 * block's tokens into DST ([rows, hd], row g * nq + i), or adds DST back
 * into X (ADD). */
static void gather_rows(const rg_attn_desc *a, const block_keys *bk, int kvh, float *dst, float *x, bool add) {
  const int hd = a->head_dim, nh = a->n_heads, group = nh / a->n_kv_heads;
  for (int g = 0; g < group; g++)
    for (int i = 0; i < bk->nq; i++) {
      float *row = x + ((size_t)bk->tok[i] * nh + kvh * group + g) * hd, *r = dst + ((size_t)g * bk->nq + i) * hd;
      if (add)
        axpy(row, 1.0f, r, hd);
      else
        memcpy(r, row, (size_t)hd * sizeof(float));
    }
}

/* ---------------------------------------------------------------- forward */

typedef struct {
  float *q, *o, *s; /* [rows, hd], [rows, hd], [rows, ATTN_KEY_TILE] */
  float *m, *l;     /* [rows] running max and sum */
} fwd_scratch;

static void forward_block(const rg_attn_desc *a, const block_keys *bk, int kvh, const fwd_scratch *w,
                          const float *kc, const float *vc, const rg_buf *q, rg_buf *out, rg_buf *lse) {
  const int hd = a->head_dim, nh = a->n_heads, group = nh / a->n_kv_heads, kvd = a->n_kv_heads * hd;
  const int rows = bk->rows, nq = bk->nq;
  const float scale = 1.0f / sqrtf((float)hd);
  gather_rows(a, bk, kvh, w->q, q->data, false);
  memset(w->o, 0, (size_t)rows * hd * sizeof(float));
  for (int r = 0; r < rows; r++) w->m[r] = -INFINITY, w->l[r] = 0;
  for (int j0 = bk->k0; j0 < bk->k1; j0 += ATTN_KEY_TILE) {
    const int nk = bk->k1 - j0 < ATTN_KEY_TILE ? bk->k1 - j0 : ATTN_KEY_TILE;
    const float *kt = kc + (size_t)j0 * kvd, *vt = vc + (size_t)j0 * kvd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, scale, w->q, hd, kt, kvd, 0.0f, w->s, nk);
    for (int r = 0; r < rows; r++) {
      const int i = r % nq;
      float *sr = w->s + (size_t)r * nk;
      /* this row's visible keys in the tile: jl .. jh - 1 (tile indices) */
      const int jl = bk->lo[i] > j0 ? bk->lo[i] - j0 : 0, jh = bk->hi[i] + 1 - j0 < nk ? bk->hi[i] + 1 - j0 : nk;
      if (jl >= jh) {
        memset(sr, 0, (size_t)nk * sizeof(float));
        continue;
      }
      float mt = w->m[r];
#pragma omp simd reduction(max : mt)
      for (int j = jl; j < jh; j++) mt = sr[j] > mt ? sr[j] : mt;
      if (mt > w->m[r]) { /* exp(-inf) = 0 on the first visible tile */
        const float c = expf(w->m[r] - mt);
        w->l[r] *= c;
        float *orow = w->o + (size_t)r * hd;
        for (int d = 0; d < hd; d++) orow[d] *= c;
        w->m[r] = mt;
      }
      float sum = 0;
      for (int j = 0; j < jl; j++) sr[j] = 0;
#pragma omp simd reduction(+ : sum)
      for (int j = jl; j < jh; j++) sum += sr[j] = cpu_expf(sr[j] - mt);
      for (int j = jh; j < nk; j++) sr[j] = 0;
      w->l[r] += sum;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f, w->s, nk, vt, kvd, 1.0f, w->o, hd);
  }
  for (int r = 0; r < rows; r++) {
    float *orow = w->o + (size_t)r * hd;
    const float inv = 1.0f / w->l[r];
    for (int d = 0; d < hd; d++) orow[d] *= inv;
    if (lse) lse->data[(size_t)bk->tok[r % nq] * nh + kvh * group + r / nq] = w->m[r] + logf(w->l[r]);
  }
  for (int g = 0; g < group; g++)
    for (int i = 0; i < nq; i++)
      memcpy(out->data + ((size_t)bk->tok[i] * nh + kvh * group + g) * hd, w->o + ((size_t)g * nq + i) * hd,
             (size_t)hd * sizeof(float));
}

void cpu_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                   const rg_buf *v_cache, const rg_attn_desc *a) {
  const int hd = a->head_dim, nkv = a->n_kv_heads, group = a->n_heads / nkv;
  const size_t kvd = (size_t)nkv * hd, rows = (size_t)ATTN_QUERY_TOKENS * group;
  const size_t scratch = rows * (2 * (size_t)hd + ATTN_KEY_TILE + 2);
  query_blocks qb;
  if (query_blocks_make(&qb, a->batch) < 0) {
    cpu_fail(be, "attention: out of memory for the query blocks of %d tokens", a->batch->n);
    return;
  }
  const int n_work = qb.n_blocks * nkv;
  bool out_of_memory = false;
#pragma omp parallel num_threads(be->threads) if (n_work > 1)
  {
    fwd_scratch w = {.q = malloc(scratch * sizeof(float))};
    if (!w.q) {
#pragma omp atomic write
      out_of_memory = true;
    } else {
      w.o = w.q + rows * hd;
      w.s = w.o + rows * hd;
      w.m = w.s + rows * ATTN_KEY_TILE;
      w.l = w.m + rows;
    }
    /* later blocks of a sequence see more keys: dynamic, one at a time */
#pragma omp for schedule(dynamic, 1)
    for (int wi = 0; wi < n_work; wi++) {
      if (!w.q) continue;
      const int blk = wi / nkv, kvh = wi % nkv;
      const int *tok = qb.order + qb.start[blk];
      const size_t base = (size_t)a->batch->seq[tok[0]] * a->max_ctx * kvd + (size_t)kvh * hd;
      block_keys bk;
      block_keys_make(&bk, a, tok, qb.start[blk + 1] - qb.start[blk]);
      forward_block(a, &bk, kvh, &w, k_cache->data + base, v_cache->data + base, q, out, lse);
    }
    free(w.q);
  }
  query_blocks_free(&qb);
  if (out_of_memory) cpu_fail(be, "attention: out of memory for %zu floats of scratch per thread", scratch);
}

/* ---------------------------------------------------------------- backward */

typedef struct {
  float *q, *dout, *dq; /* [rows, hd] */
  float *p, *ds;        /* [rows, ATTN_KEY_TILE] probabilities; dP, then dS */
  float *lse, *dsum;    /* [rows] the forward's log-sum-exp; D = dO . O */
} bwd_scratch;

static void backward_block(const rg_attn_desc *a, const block_keys *bk, int kvh, const bwd_scratch *w,
                           const float *kc, const float *vc, float *dkc, float *dvc, const rg_buf *q,
                           const rg_buf *out, const rg_buf *lse, const rg_buf *dy, rg_buf *dq) {
  const int hd = a->head_dim, nh = a->n_heads, group = nh / a->n_kv_heads, kvd = a->n_kv_heads * hd;
  const int rows = bk->rows, nq = bk->nq;
  const float scale = 1.0f / sqrtf((float)hd);
  gather_rows(a, bk, kvh, w->q, q->data, false);
  gather_rows(a, bk, kvh, w->dout, dy->data, false);
  gather_rows(a, bk, kvh, w->dq, out->data, false); /* O, only for D; dq's room until then */
  for (int r = 0; r < rows; r++) {
    w->dsum[r] = dot8(w->dout + (size_t)r * hd, w->dq + (size_t)r * hd, hd);
    w->lse[r] = lse->data[(size_t)bk->tok[r % nq] * nh + kvh * group + r / nq];
  }
  memset(w->dq, 0, (size_t)rows * hd * sizeof(float));
  for (int j0 = bk->k0; j0 < bk->k1; j0 += ATTN_KEY_TILE) {
    const int nk = bk->k1 - j0 < ATTN_KEY_TILE ? bk->k1 - j0 : ATTN_KEY_TILE;
    const float *kt = kc + (size_t)j0 * kvd, *vt = vc + (size_t)j0 * kvd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, scale, w->q, hd, kt, kvd, 0.0f, w->p, nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, 1.0f, w->dout, hd, vt, kvd, 0.0f, w->ds, nk);
    for (int r = 0; r < rows; r++) {
      const int i = r % nq;
      const int jl = bk->lo[i] > j0 ? bk->lo[i] - j0 : 0, jh = bk->hi[i] + 1 - j0 < nk ? bk->hi[i] + 1 - j0 : nk;
      float *pr = w->p + (size_t)r * nk, *dsr = w->ds + (size_t)r * nk;
      const float lse_r = w->lse[r], d_r = w->dsum[r];
#pragma omp simd
      for (int j = 0; j < nk; j++) {
        const bool visible = j >= jl && j < jh;
        pr[j] = visible ? cpu_expf(pr[j] - lse_r) : 0.0f;
        dsr[j] = pr[j] * (dsr[j] - d_r) * scale;
      }
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, w->p, nk, w->dout, hd, 1.0f,
                dvc + (size_t)j0 * kvd, kvd);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, w->ds, nk, w->q, hd, 1.0f,
                dkc + (size_t)j0 * kvd, kvd);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f, w->ds, nk, kt, kvd, 1.0f, w->dq, hd);
  }
  gather_rows(a, bk, kvh, w->dq, dq->data, true);
}

void cpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                            const rg_buf *v_cache, const rg_attn_desc *a) {
  const int hd = a->head_dim, nkv = a->n_kv_heads, group = a->n_heads / nkv;
  const size_t kvd = (size_t)nkv * hd, rows = (size_t)ATTN_QUERY_TOKENS * group;
  const size_t scratch = rows * (3 * (size_t)hd + 2 * ATTN_KEY_TILE + 2);
  query_blocks qb;
  if (query_blocks_make(&qb, a->batch) < 0) {
    cpu_fail(be, "attention backward: out of memory for the query blocks of %d tokens", a->batch->n);
    return;
  }
  const int n_work = qb.n_seqs * nkv;
  bool out_of_memory = false;
#pragma omp parallel num_threads(be->threads) if (n_work > 1)
  {
    bwd_scratch w = {.q = malloc(scratch * sizeof(float))};
    if (!w.q) {
#pragma omp atomic write
      out_of_memory = true;
    } else {
      w.dout = w.q + rows * hd;
      w.dq = w.dout + rows * hd;
      w.p = w.dq + rows * hd;
      w.ds = w.p + rows * ATTN_KEY_TILE;
      w.lse = w.ds + rows * ATTN_KEY_TILE;
      w.dsum = w.lse + rows;
    }
#pragma omp for schedule(dynamic, 1)
    for (int wi = 0; wi < n_work; wi++) {
      const int sq = wi / nkv, kvh = wi % nkv;
      if (!w.q || qb.first[sq] == qb.first[sq + 1]) continue;
      const size_t base = (size_t)sq * a->max_ctx * kvd + (size_t)kvh * hd;
      for (int blk = qb.first[sq]; blk < qb.first[sq + 1]; blk++) {
        block_keys bk;
        block_keys_make(&bk, a, qb.order + qb.start[blk], qb.start[blk + 1] - qb.start[blk]);
        backward_block(a, &bk, kvh, &w, k_cache->data + base, v_cache->data + base, dk_cache->data + base,
                       dv_cache->data + base, q, out, lse, dy, dq);
      }
    }
    free(w.q);
  }
  query_blocks_free(&qb);
  if (out_of_memory) cpu_fail(be, "attention backward: out of memory for %zu floats of scratch per thread", scratch);
}
