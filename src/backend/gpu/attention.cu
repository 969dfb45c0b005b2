/* backend/gpu/attention.cu: the GPU backend's attention, forward and
 * backward, tiled as FlashAttention-2 (Dao 2023, arXiv 2307.08691,
 * algorithms 1 and 2), the same mathematics as backend/cpu/attention.c.
 *
 * A block of threads takes up to BQ tokens of one sequence (the batch's
 * walk, gpu_batch: each sequence's tokens in batch order) and one KV head,
 * with the G = n_heads / n_kv_heads query heads that share it stacked into
 * R = G * BQ rows (row h * nq + i: head h of the group, token i). It walks
 * the cache rows from the first any of its tokens can see to the last, KT
 * keys at a time, through shared memory:
 *   forward:  S = Q K^T / sqrt(hd), masked; an online softmax (running max
 *             m and sum l per row, the output rescaled when m grows);
 *             O += P V; at the end O /= l and lse = m + log l;
 *   backward: P = exp(S - lse), dP = dO V^T, dS = P (dP - D) / sqrt(hd)
 *             with D = rowsum(dO * O); dQ += dS K (blocks as the
 *             forward's), and in a second kernel, whose blocks own KT cache
 *             rows of one sequence and KV head, dV += P^T dO and dK += dS^T Q
 *             over all the sequence's tokens.
 * Every output float has one owner (no atomics): results are deterministic.
 * Memory is the blocks' tiles, whatever the length: nothing of S x S. */
#include <math.h>

#include "backend/gpu/gpu_internal.h"

/* The most output elements (R x hd) one block's threads keep in registers,
 * per thread; the dynamic shared memory of a block, under the 48 KiB a
 * kernel gets without opting in, less room for its static arrays. */
enum { ACC_PER_THREAD = 32, SHARED_BYTES = 47 * 1024 };

typedef struct {
  int bq, kt;          /* tokens per block, keys per tile */
  int G, hd, H, kvd;   /* heads per KV head, head size, query heads, KV row width */
  int window, max_ctx; /* rg_attn_desc's */
  float scale;         /* 1 / sqrt(hd) */
} attn_shape;

/* Shared floats of a block: rows of Q (and dO) [R x hd], tiles of K and V
 * [KT x hd], scores (and dS) [R x KT], 4 per row. */
static size_t shared_floats(const attn_shape *s, bool backward) {
  const size_t R = (size_t)s->G * s->bq;
  return (backward ? 2 : 1) * R * s->hd + 2 * (size_t)s->kt * s->hd + (backward ? 2 : 1) * R * s->kt + 4 * R;
}

/* Picks BQ and KT for the shapes: as many tokens as the registers hold (at
 * most 16), then the longest key tile (at most 32) that fits the shared
 * memory. 0, or -1 with the failure recorded. */
static int plan_shape(rg_backend *be, const rg_attn_desc *a, attn_shape *s) {
  s->G = a->n_heads / a->n_kv_heads;
  s->hd = a->head_dim;
  s->H = a->n_heads;
  s->kvd = a->n_kv_heads * a->head_dim;
  s->window = a->window;
  s->max_ctx = a->max_ctx;
  s->scale = 1.0f / sqrtf((float)a->head_dim);
  const int per_token = s->G * s->hd;
  s->bq = ACC_PER_THREAD * GPU_THREADS / 2 / per_token; /* half the registers: room for BQ's padding */
  if (s->bq > 16) s->bq = 16;
  if (s->bq < 1) s->bq = 1;
  for (s->kt = 32; s->kt >= 1; s->kt /= 2)
    if (shared_floats(s, true) * sizeof(float) <= SHARED_BYTES && (size_t)s->kt * s->hd <= ACC_PER_THREAD * GPU_THREADS)
      break;
  if (per_token > ACC_PER_THREAD * GPU_THREADS || s->kt < 1) {
    gpu_fail(be, "attention: %d heads per KV head of %d floats exceed one block", s->G, s->hd);
    return -1;
  }
  return 0;
}

/* Chunk CHUNK of the block's sequence (blockIdx.y): tok[i] (batch indices)
 * and tpos[i], in shared memory, nq of them, and the cache rows they see:
 * [*kmin, *kmax]. Returns the sequence id (every thread), or -1 when the
 * chunk is empty (for the whole block alike). */
__device__ static int block_tokens(const attn_shape &s, const int *order, const int *seqs, const int *pos, int chunk,
                                   int *tok, int *tpos, int *nq_out, int *kmin, int *kmax) {
  const int *info = seqs + 4 * blockIdx.y;
  const int c0 = chunk * s.bq, count = info[2];
  if (c0 >= count) return -1;
  const int nq = count - c0 < s.bq ? count - c0 : s.bq;
  int lo = 1 << 30, hi = -1;
  for (int i = 0; i < nq; i++) { /* every thread reads them; thread 0 shares them */
    const int t = order[info[1] + c0 + i], p = pos[t];
    if (threadIdx.x == 0) tok[i] = t, tpos[i] = p;
    const int first = s.window > 0 && p - s.window + 1 > 0 ? p - s.window + 1 : 0;
    lo = first < lo ? first : lo;
    hi = p > hi ? p : hi;
  }
  *nq_out = nq;
  *kmin = lo;
  *kmax = hi;
  __syncthreads();
  return info[0];
}

__device__ static inline bool visible(const attn_shape &s, int key, int p) {
  return key <= p && (s.window == 0 || key > p - s.window);
}

/* Rows r = h * nq + i of SRC ([tokens, H * hd]) for query heads g * G + h
 * into DST [R x hd]. */
__device__ static void load_rows(const attn_shape &s, float *dst, const float *src, const int *tok, int nq, int g) {
  const int R = s.G * nq;
  for (int e = threadIdx.x; e < R * s.hd; e += blockDim.x) {
    const int r = e / s.hd, d = e % s.hd, h = r / nq, i = r % nq;
    dst[e] = src[(size_t)tok[i] * s.H * s.hd + (size_t)(g * s.G + h) * s.hd + d];
  }
}

/* Cache rows k0 .. k0 + nk of sequence SEQ, KV head g, into K and V [KT x hd]. */
__device__ static void load_keys(const attn_shape &s, float *ks, float *vs, const float *k_cache,
                                 const float *v_cache, int seq, int g, int k0, int nk) {
  for (int e = threadIdx.x; e < nk * s.hd; e += blockDim.x) {
    const int j = e / s.hd, d = e % s.hd;
    const size_t at = ((size_t)seq * s.max_ctx + k0 + j) * s.kvd + (size_t)g * s.hd + d;
    ks[e] = k_cache[at];
    vs[e] = v_cache[at];
  }
}

__device__ static inline float dot(const float *a, const float *b, int n) {
  float sum = 0;
  for (int d = 0; d < n; d++) sum += a[d] * b[d];
  return sum;
}

/* ---------------------------------------------------------------- forward */

__global__ static void attention_kernel(float *out, float *lse, const float *q, const float *k_cache,
                                        const float *v_cache, const int *order, const int *seqs, const int *pos,
                                        attn_shape s) {
  RG_DYNAMIC_SHARED(float, smem);
  __shared__ int tok[16], tpos[16];
  int nq, kmin, kmax;
  const int g = blockIdx.z, seq = block_tokens(s, order, seqs, pos, blockIdx.x, tok, tpos, &nq, &kmin, &kmax);
  if (seq < 0) return;
  const int R = s.G * nq;
  float *qs = smem, *ks = qs + (size_t)s.G * s.bq * s.hd, *vs = ks + (size_t)s.kt * s.hd;
  float *sc = vs + (size_t)s.kt * s.hd, *m = sc + (size_t)s.G * s.bq * s.kt, *l = m + s.G * s.bq, *alpha = l + s.G * s.bq;
  load_rows(s, qs, q, tok, nq, g);
  for (int r = threadIdx.x; r < R; r += blockDim.x) m[r] = -INFINITY, l[r] = 0;
  float acc[ACC_PER_THREAD];
  for (int k = 0; k < ACC_PER_THREAD; k++) acc[k] = 0;
  __syncthreads();
  for (int k0 = kmin; k0 <= kmax; k0 += s.kt) {
    const int nk = kmax + 1 - k0 < s.kt ? kmax + 1 - k0 : s.kt;
    load_keys(s, ks, vs, k_cache, v_cache, seq, g, k0, nk);
    __syncthreads();
    for (int e = threadIdx.x; e < R * s.kt; e += blockDim.x) {
      const int r = e / s.kt, j = e % s.kt;
      sc[e] = j < nk && visible(s, k0 + j, tpos[r % nq]) ? dot(qs + (size_t)r * s.hd, ks + (size_t)j * s.hd, s.hd) * s.scale
                                                        : -INFINITY;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < R; r += blockDim.x) { /* the online softmax, one thread per row */
      float *row = sc + (size_t)r * s.kt, mt = m[r];
      for (int j = 0; j < nk; j++) mt = fmaxf(mt, row[j]);
      float sum = 0;
      for (int j = 0; j < s.kt; j++) {
        row[j] = mt == -INFINITY || j >= nk ? 0.0f : expf(row[j] - mt);
        sum += row[j];
      }
      alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mt);
      l[r] = l[r] * alpha[r] + sum;
      m[r] = mt;
    }
    __syncthreads();
    for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < R * s.hd; k++, e += blockDim.x) {
      const int r = e / s.hd, d = e % s.hd;
      float sum = 0;
      for (int j = 0; j < nk; j++) sum += sc[(size_t)r * s.kt + j] * vs[(size_t)j * s.hd + d];
      acc[k] = acc[k] * alpha[r] + sum;
    }
    __syncthreads();
  }
  for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < R * s.hd; k++, e += blockDim.x) {
    const int r = e / s.hd, d = e % s.hd, h = r / nq, i = r % nq;
    out[(size_t)tok[i] * s.H * s.hd + (size_t)(g * s.G + h) * s.hd + d] = acc[k] / l[r];
  }
  if (lse)
    for (int r = threadIdx.x; r < R; r += blockDim.x)
      lse[(size_t)tok[r % nq] * s.H + g * s.G + r / nq] = m[r] + logf(l[r]);
}

static int max_chunks(const gpu_batch *gb, int bq) {
  /* the longest sequence's token count is at most n: an upper bound that
   * needs no pass over the sequences (empty chunks return at once) */
  return (gb->base.n + bq - 1) / bq;
}

void gpu_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                   const rg_buf *v_cache, const rg_attn_desc *a) {
  const gpu_batch *gb = gpu_batch_of(a->batch);
  attn_shape s;
  if (gb->base.n == 0 || plan_shape(be, a, &s) < 0) return;
  const dim3 grid((unsigned)max_chunks(gb, s.bq), (unsigned)gb->n_seqs, (unsigned)a->n_kv_heads);
  RG_LAUNCH(attention_kernel, grid, dim3(GPU_THREADS), shared_floats(&s, false) * sizeof(float), gpu(be)->stream,
            out->data, lse ? lse->data : NULL, q->data, k_cache->data, v_cache->data, gb->order, gb->seqs,
            gb->base.pos, s);
  gpu_check(be, "attention");
}

/* ---------------------------------------------------------------- backward */

/* D[t, h] = sum_d dO[t, h, d] O[t, h, d], one block per token. */
__global__ static void rowdot_kernel(float *D, const float *dy, const float *o, int H, int hd) {
  const size_t t = blockIdx.x;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    const float *a = dy + (t * H + h) * hd, *b = o + (t * H + h) * hd;
    double sum = 0;
    for (int d = 0; d < hd; d++) sum += (double)a[d] * b[d];
    D[t * H + h] = (float)sum;
  }
}

/* P and dS of R rows (Q, dO in shared memory, lse and D per row) against
 * the key tile: p[r][j] = exp(S - lse) where visible, ds = p (dP - D) / sqrt(hd). */
__device__ static void probs_and_grads(const attn_shape &s, float *p, float *ds, const float *qs, const float *dos,
                                       const float *ks, const float *vs, const float *row_lse, const float *row_d,
                                       const int *tpos, int nq, int k0, int nk) {
  const int R = s.G * nq;
  for (int e = threadIdx.x; e < R * s.kt; e += blockDim.x) {
    const int r = e / s.kt, j = e % s.kt;
    float pr = 0, dsr = 0;
    if (j < nk && visible(s, k0 + j, tpos[r % nq])) {
      pr = expf(dot(qs + (size_t)r * s.hd, ks + (size_t)j * s.hd, s.hd) * s.scale - row_lse[r]);
      dsr = pr * (dot(dos + (size_t)r * s.hd, vs + (size_t)j * s.hd, s.hd) - row_d[r]) * s.scale;
    }
    p[e] = pr;
    ds[e] = dsr;
  }
}

/* Per-row lse and D of the block's rows. */
__device__ static void load_row_stats(const attn_shape &s, float *row_lse, float *row_d, const float *lse,
                                      const float *D, const int *tok, int nq, int g) {
  for (int r = threadIdx.x; r < s.G * nq; r += blockDim.x) {
    const size_t at = (size_t)tok[r % nq] * s.H + g * s.G + r / nq;
    row_lse[r] = lse[at];
    row_d[r] = D[at];
  }
}

__global__ static void attention_dq_kernel(float *dq, const float *dy, const float *q, const float *lse, const float *D,
                                           const float *k_cache, const float *v_cache, const int *order,
                                           const int *seqs, const int *pos, attn_shape s) {
  RG_DYNAMIC_SHARED(float, smem);
  __shared__ int tok[16], tpos[16];
  int nq, kmin, kmax;
  const int g = blockIdx.z, seq = block_tokens(s, order, seqs, pos, blockIdx.x, tok, tpos, &nq, &kmin, &kmax);
  if (seq < 0) return;
  const size_t RB = (size_t)s.G * s.bq;
  float *qs = smem, *dos = qs + RB * s.hd, *ks = dos + RB * s.hd, *vs = ks + (size_t)s.kt * s.hd;
  float *p = vs + (size_t)s.kt * s.hd, *ds = p + RB * s.kt, *row_lse = ds + RB * s.kt, *row_d = row_lse + RB;
  const int R = s.G * nq;
  load_rows(s, qs, q, tok, nq, g);
  load_rows(s, dos, dy, tok, nq, g);
  load_row_stats(s, row_lse, row_d, lse, D, tok, nq, g);
  float acc[ACC_PER_THREAD];
  for (int k = 0; k < ACC_PER_THREAD; k++) acc[k] = 0;
  __syncthreads();
  for (int k0 = kmin; k0 <= kmax; k0 += s.kt) {
    const int nk = kmax + 1 - k0 < s.kt ? kmax + 1 - k0 : s.kt;
    load_keys(s, ks, vs, k_cache, v_cache, seq, g, k0, nk);
    __syncthreads();
    probs_and_grads(s, p, ds, qs, dos, ks, vs, row_lse, row_d, tpos, nq, k0, nk);
    __syncthreads();
    for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < R * s.hd; k++, e += blockDim.x) {
      const int r = e / s.hd, d = e % s.hd;
      for (int j = 0; j < nk; j++) acc[k] += ds[(size_t)r * s.kt + j] * ks[(size_t)j * s.hd + d];
    }
    __syncthreads();
  }
  for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < R * s.hd; k++, e += blockDim.x) {
    const int r = e / s.hd, d = e % s.hd, h = r / nq, i = r % nq;
    dq[(size_t)tok[i] * s.H * s.hd + (size_t)(g * s.G + h) * s.hd + d] += acc[k];
  }
}

/* Blocks: (key tile, sequence, KV head); each walks every chunk of its
 * sequence's tokens. */
__global__ static void attention_dkv_kernel(float *dk_cache, float *dv_cache, const float *dy, const float *q,
                                            const float *lse, const float *D, const float *k_cache,
                                            const float *v_cache, const int *order, const int *seqs, const int *pos,
                                            attn_shape s) {
  RG_DYNAMIC_SHARED(float, smem);
  __shared__ int tok[16], tpos[16];
  const int g = blockIdx.z, k0 = blockIdx.x * s.kt, *info = seqs + 4 * blockIdx.y;
  const int seq = info[0], count = info[2], last = info[3];
  if (k0 > last) return;
  const int nk = last + 1 - k0 < s.kt ? last + 1 - k0 : s.kt;
  const size_t RB = (size_t)s.G * s.bq;
  float *qs = smem, *dos = qs + RB * s.hd, *ks = dos + RB * s.hd, *vs = ks + (size_t)s.kt * s.hd;
  float *p = vs + (size_t)s.kt * s.hd, *ds = p + RB * s.kt, *row_lse = ds + RB * s.kt, *row_d = row_lse + RB;
  load_keys(s, ks, vs, k_cache, v_cache, seq, g, k0, nk);
  float dk[ACC_PER_THREAD], dv[ACC_PER_THREAD];
  for (int k = 0; k < ACC_PER_THREAD; k++) dk[k] = dv[k] = 0;
  for (int chunk = 0; chunk * s.bq < count; chunk++) {
    int nq = 0, kmin = 0, kmax = -1;
    __syncthreads(); /* the previous chunk's rows are no longer read */
    block_tokens(s, order, seqs, pos, chunk, tok, tpos, &nq, &kmin, &kmax);
    if (kmax < k0 || kmin > k0 + nk - 1) continue; /* no token of the chunk sees these keys (uniform) */
    load_rows(s, qs, q, tok, nq, g);
    load_rows(s, dos, dy, tok, nq, g);
    load_row_stats(s, row_lse, row_d, lse, D, tok, nq, g);
    __syncthreads();
    probs_and_grads(s, p, ds, qs, dos, ks, vs, row_lse, row_d, tpos, nq, k0, nk);
    __syncthreads();
    const int R = s.G * nq;
    for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < nk * s.hd; k++, e += blockDim.x) {
      const int j = e / s.hd, d = e % s.hd;
      float sv = 0, sk = 0;
      for (int r = 0; r < R; r++) {
        sv += p[(size_t)r * s.kt + j] * dos[(size_t)r * s.hd + d];
        sk += ds[(size_t)r * s.kt + j] * qs[(size_t)r * s.hd + d];
      }
      dv[k] += sv;
      dk[k] += sk;
    }
  }
  for (int k = 0, e = threadIdx.x; k < ACC_PER_THREAD && e < nk * s.hd; k++, e += blockDim.x) {
    const int j = e / s.hd, d = e % s.hd;
    const size_t at = ((size_t)seq * s.max_ctx + k0 + j) * s.kvd + (size_t)g * s.hd + d;
    dk_cache[at] += dk[k];
    dv_cache[at] += dv[k];
  }
}

void gpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                            const rg_buf *v_cache, const rg_attn_desc *a) {
  const gpu_batch *gb = gpu_batch_of(a->batch);
  const int n = gb->base.n;
  attn_shape s;
  if (n == 0 || plan_shape(be, a, &s) < 0) return;
  float *D = (float *)gpu_scratch(be, (size_t)n * a->n_heads * sizeof *D);
  if (!D) return;
  cudaStream_t st = gpu(be)->stream;
  const size_t shared = shared_floats(&s, true) * sizeof(float);
  RG_LAUNCH(rowdot_kernel, dim3((unsigned)n), dim3(64), 0, st, D, dy->data, out->data, a->n_heads, a->head_dim);
  const dim3 qgrid((unsigned)max_chunks(gb, s.bq), (unsigned)gb->n_seqs, (unsigned)a->n_kv_heads);
  RG_LAUNCH(attention_dq_kernel, qgrid, dim3(GPU_THREADS), shared, st, dq->data, dy->data, q->data, lse->data, D,
            k_cache->data, v_cache->data, gb->order, gb->seqs, gb->base.pos, s);
  const dim3 kgrid((unsigned)((gb->max_pos + s.kt) / s.kt), (unsigned)gb->n_seqs, (unsigned)a->n_kv_heads);
  RG_LAUNCH(attention_dkv_kernel, kgrid, dim3(GPU_THREADS), shared, st, dk_cache->data, dv_cache->data, dy->data,
            q->data, lse->data, D, k_cache->data, v_cache->data, gb->order, gb->seqs, gb->base.pos, s);
  gpu_check(be, "attention backward");
}
