/* sp_attention.c: attention when a batch's tokens are split over P ranks
 * (sequence parallelism; forward.h rg_sp_mode, session_internal.h
 * sp_state). Ulysses: Jacobs et al. 2023, arXiv 2309.14509
 * (deepspeedai/DeepSpeed deepspeed/sequence/layer.py); all-gather KV: the
 * context parallelism of the Llama 3 report, arXiv 2407.21783.
 *
 * Ulysses (DeepSpeed-Ulysses): rank r's queries, keys and values (after
 * RoPE, at their positions in the whole batch) are cut into P head blocks;
 * one all-to-all sends block j of every local token to rank j, which then
 * holds every token of the batch for its n_heads/P query heads and
 * n_kv_heads/P KV heads (block j of the query heads reads block j of the
 * KV heads, since n_heads/n_kv_heads query heads share a KV head). It runs
 * the unchanged attention on them; a second all-to-all returns each token's
 * output rows to the token's rank. Backward is the same in reverse: the
 * output gradient goes out in head blocks, attention's backward runs on
 * the head shards, and dq, dk, dv come back in one all-to-all. Per rank the
 * KV cache and the attention work are 1/P of a whole batch's.
 *
 * All-gather KV (Llama 3's context parallelism): every rank all-gathers the
 * batch's keys and values into its cache and attends. Backward: each
 * rank's attention gradient covers every cache row its queries read; the
 * rows' gradients are summed over ranks and scattered to the ranks that own
 * the tokens (a reduce-scatter, the transpose of the gather). Any head
 * count works, and with GQA the gathered rows are small: for SmolLM2
 * (kv_dim 192, d_model 576) 384 floats per token per layer, against about
 * 6500 of a training session's saved activations per local token.
 * A causal query's work grows with its position, so on one long sequence
 * the last rank's queries would cost 2P - 1 times the first's. As Llama
 * 3's zigzag sharding balances that, ranks r and P - 1 - r trade the
 * second halves of their queries when that pays (trade_pays): cutting the
 * batch into 2P chunks, rank r attends for chunks 2r and 2P - 1 - 2r, and
 * every rank for the same total of keys. The trade moves the queries there
 * and the outputs back (and, for the backward, the output and its gradient
 * there and dq back); the tokens themselves, and everything but attention,
 * stay put.
 *
 * Recomputation (rg_session_opts.recompute): the cache already holds the
 * batch's keys and values, so all-gather KV gathers nothing again; Ulysses
 * exchanges the recomputed queries and the attention output again (two
 * all-to-alls of the forward's three).
 *
 * The attention backward reads the forward's output and log-sum-exps
 * (backend.h): all-gather keeps both in the rank's own layout; Ulysses
 * keeps the log-sum-exps in the head layout where the forward wrote them,
 * and sends the output to the head shards with its gradient.
 */
#include <stdlib.h>

#include "engine/session_internal.h"
#include "util/error.h"

/* Ulysses needs every rank to hold whole query-head groups of whole KV heads. */
static bool ulysses_fits(const rg_config *c, int P) { return c->n_heads % P == 0 && c->n_kv_heads % P == 0; }

int rg_sp_alloc(rg_session *s, rg_comm *comm, rg_sp_mode mode) {
  const rg_config *c = &s->cfg;
  const int P = rg_comm_size(comm);
  const bool fits = ulysses_fits(c, P);
  if (mode == RG_SP_ULYSSES && !fits)
    return rg_error_set("sequence parallelism: Ulysses splits heads over the %d ranks, and %d query heads / %d KV "
                        "heads are not multiples of %d (all-gather attention has no such limit)",
                        P, c->n_heads, c->n_kv_heads, P);
  sp_state *sp = s->sp = calloc(1, sizeof *sp);
  if (!sp) return rg_error_set("session: out of memory");
  sp->comm = comm;
  sp->ulysses = mode == RG_SP_ULYSSES || (mode == RG_SP_AUTO && fits);
  if (sp->ulysses) s->cache_kv_heads = c->n_kv_heads / P;
  const size_t T = (size_t)s->max_tokens, all = (size_t)P * T;
  const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
  sp->counts = malloc(3 * (size_t)P * sizeof *sp->counts);
  sp->seq = malloc(all * sizeof *sp->seq);
  sp->pos = malloc(all * sizeof *sp->pos);
  if (!sp->counts || !sp->seq || !sp->pos) return rg_error_set("session: out of memory");
  sp->send = sp->counts + P;
  sp->recv = sp->send + P;
  /* Ulysses: a rank holds T/P of the heads of up to P T tokens */
  const size_t kv_rows = sp->ulysses ? T : all;
  if (!(sp->batch = rg_batch_new(s->be, (int)all)) || !(sp->k_all = rg_buf_new(s->be, kv_rows * kvd)) ||
      !(sp->v_all = rg_buf_new(s->be, kv_rows * kvd)))
    return rg_error_prefix("sequence-parallel buffers");
  /* floats a rank sends at most in one exchange. Ulysses: per token q, k
   * and v forward, or dq, dk and dv back, or the output and its gradient
   * into the backward; all-gather: those two for at most half the tokens */
  const size_t row = !sp->ulysses ? qd : qd + 2 * kvd > 2 * qd ? qd + 2 * kvd : 2 * qd;
  if (!(sp->sendbuf = rg_buf_new(s->be, T * row)) || !(sp->recvbuf = rg_buf_new(s->be, T * row)) ||
      !(sp->heads = rg_buf_new(s->be, T * qd)) || !(sp->dheads = rg_buf_new(s->be, T * qd)))
    return rg_error_prefix("sequence-parallel buffers");
  if (!sp->ulysses) {
    sp->att_seq = malloc(T * sizeof *sp->att_seq);
    sp->att_pos = malloc(T * sizeof *sp->att_pos);
    if (!sp->att_seq || !sp->att_pos) return rg_error_set("session: out of memory");
    if (!(sp->att_batch = rg_batch_new(s->be, (int)T))) return rg_error_prefix("sequence-parallel buffers");
  }
  return 0;
}

void rg_sp_free(rg_session *s) {
  sp_state *sp = s->sp;
  if (!sp) return;
  rg_buf *bufs[] = {sp->k_all, sp->v_all, sp->sendbuf, sp->recvbuf, sp->heads, sp->dheads};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(s->be, bufs[i]);
  rg_batch_free(s->be, sp->batch);
  rg_batch_free(s->be, sp->att_batch);
  free(sp->att_seq);
  free(sp->att_pos);
  free(sp->counts);
  free(sp->seq);
  free(sp->pos);
  free(sp);
  s->sp = NULL;
}

/* Keys query I of the whole batch sees (its attention work). */
static long keys_seen(const rg_session *s, int i) {
  const int p = s->sp->pos[i], w = s->cfg.sliding_window;
  return w > 0 && p + 1 > w ? w : p + 1;
}

/* Whether trading query halves (all-gather) cuts the busiest rank's work
 * in a block by more than 2%, counting multiply-adds: a token's matmuls
 * (d (q + 2 kv + o) + 3 d d_ff) and 2 q_dim per key a query sees (Q K^T
 * and P V). It does on a long sequence cut across the ranks (SmolLM2, 2
 * ranks, 5184 tokens: by 18%), not on batches of short sequences (the
 * three-sequence batch of test_sp on 4 ranks: by 0.2%), where the trade
 * would only move rows (four exchanges of q_dim floats per traded token)
 * and reorder sums. Every rank decides the same from the whole batch's
 * positions. */
/* Rows rank R trades with its partner P - 1 - R: half of the smaller part
 * (none for the middle rank of an odd P). */
static int pair_swap(const sp_state *sp, int r) {
  const int P = rg_comm_size(sp->comm), partner = P - 1 - r, n = sp->counts[r], np = sp->counts[partner];
  return partner == r ? 0 : n / 2 < np / 2 ? n / 2 : np / 2;
}

static bool trade_pays(const rg_session *s) {
  const sp_state *sp = s->sp;
  const rg_config *c = &s->cfg;
  const int P = rg_comm_size(sp->comm);
  const double qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
  const double per_token = c->d_model * (2 * qd + 2 * kvd) + 3.0 * c->d_model * c->d_ff, per_key = 2 * qd;
  double before = 0, after = 0;
  for (int r = 0, first = 0; r < P; first += sp->counts[r++]) {
    const int partner = P - 1 - r, n = sp->counts[r], np = sp->counts[partner];
    int first_p = 0;
    for (int k = 0; k < partner; k++) first_p += sp->counts[k];
    const int swap = pair_swap(sp, r);
    long own = 0, traded = 0;
    for (int i = 0; i < n; i++) own += keys_seen(s, first + i);
    for (int i = 0; i < n - swap; i++) traded += keys_seen(s, first + i);
    for (int i = 0; i < swap; i++) traded += keys_seen(s, first_p + np - swap + i);
    const double work = n * per_token, own_w = work + own * per_key, traded_w = work + traded * per_key;
    if (own_w > before) before = own_w;
    if (traded_w > after) after = traded_w;
  }
  return after < 0.98 * before;
}

int rg_sp_positions(rg_session *s, const int *seq, int n) {
  sp_state *sp = s->sp;
  const int P = rg_comm_size(sp->comm), me = rg_comm_rank(sp->comm);
  if (rg_comm_allgather_int(sp->comm, sp->counts, n) < 0) return rg_error_prefix("eval");
  if (n < 0) return -1; /* this rank's own error stays set */
  sp->total = sp->first = 0;
  for (int r = 0; r < P; r++) {
    if (sp->counts[r] < 0) return rg_error_set("eval: rank %d refused its part of the batch", r);
    if (r < me) sp->first += sp->counts[r];
    sp->total += sp->counts[r];
  }
  if (rg_comm_allgatherv_int(sp->comm, sp->seq, sp->counts, seq) < 0) return rg_error_prefix("eval");
  /* every rank validated its own ids; all agree on the positions */
  for (int i = 0; i < sp->total; i++) sp->pos[i] = s->seq_len[sp->seq[i]]++;
  for (int i = 0; i < sp->total; i++)
    if (sp->pos[i] >= s->max_ctx) {
      rg_sp_unassign(s);
      return rg_error_set("eval: sequence %d would exceed max_ctx %d", sp->seq[i], s->max_ctx);
    }
  for (int i = 0; i < n; i++) s->pos[i] = sp->pos[sp->first + i];
  rg_batch_set(s->be, sp->batch, NULL, sp->seq, sp->pos, sp->total);
  if (!sp->ulysses) { /* the queries this rank attends for: its first n - swap, then the partner's last swap */
    const int partner = P - 1 - me, np = sp->counts[partner];
    int first_p = 0;
    for (int r = 0; r < partner; r++) first_p += sp->counts[r];
    sp->partner = partner;
    sp->trading = trade_pays(s);
    sp->swap = sp->trading ? pair_swap(sp, me) : 0;
    for (int i = 0; i < n - sp->swap; i++) sp->att_seq[i] = sp->seq[sp->first + i], sp->att_pos[i] = sp->pos[sp->first + i];
    for (int i = 0; i < sp->swap; i++) {
      const int g = first_p + np - sp->swap + i;
      sp->att_seq[n - sp->swap + i] = sp->seq[g];
      sp->att_pos[n - sp->swap + i] = sp->pos[g];
    }
    rg_batch_set(s->be, sp->att_batch, NULL, sp->att_seq, sp->att_pos, n);
  }
  return 0;
}

void rg_sp_unassign(rg_session *s) {
  for (int i = 0; i < s->sp->total; i++) s->seq_len[s->sp->seq[i]]--;
}

/* An attention problem of the pass: batch B's queries with heads/P. */
static rg_attn_desc desc(const rg_session *s, const rg_batch *b, int P) {
  const rg_config *c = &s->cfg;
  return (rg_attn_desc){.batch = b, .n_heads = c->n_heads / P, .n_kv_heads = c->n_kv_heads / P,
                        .head_dim = c->head_dim, .window = c->sliding_window, .max_ctx = s->max_ctx};
}

/* ---------------------------------------------------------------- all-gather KV */

/* Trades the last sp->swap rows of each x[i] ([n, q_dim], this rank's n
 * rows) with the partner rank's last sp->swap rows, in place: one
 * all-to-all in which each rank sends to its partner only (every rank
 * calls it; the middle rank of an odd P trades nothing). The trade is its
 * own inverse. Nothing happens in a pass that does not trade (every rank
 * decided so alike). */
static int trade_rows(rg_session *s, int nx, rg_buf *const *x) {
  sp_state *sp = s->sp;
  if (!sp->trading) return 0;
  const int P = rg_comm_size(sp->comm), me = rg_comm_rank(sp->comm), n = sp->counts[me];
  const size_t w = (size_t)s->cfg.n_heads * s->cfg.head_dim, len = (size_t)sp->swap * w;
  for (int i = 0; i < nx; i++) rg_buf_copy(s->be, sp->sendbuf, i * len, x[i], (size_t)(n - sp->swap) * w, len);
  for (int r = 0; r < P; r++) sp->send[r] = sp->recv[r] = r == sp->partner ? (int)(nx * len) : 0;
  if (rg_comm_alltoallv(sp->comm, sp->recvbuf->data, sp->recv, sp->sendbuf->data, sp->send) < 0) return -1;
  for (int i = 0; i < nx; i++) rg_buf_copy(s->be, x[i], (size_t)(n - sp->swap) * w, sp->recvbuf, i * len, len);
  return 0;
}

static int gather_forward(rg_session *s, int l, rg_buf *att, rg_buf *lse, rg_buf *q, const rg_buf *k,
                          const rg_buf *v, bool again) {
  sp_state *sp = s->sp;
  const int P = rg_comm_size(sp->comm);
  const size_t kvd = (size_t)s->cfg.n_kv_heads * s->cfg.head_dim;
  if (!again) {
    for (int r = 0; r < P; r++) sp->send[r] = (int)(sp->counts[r] * kvd);
    if (rg_comm_allgatherv(sp->comm, sp->k_all->data, sp->send, k->data) < 0 ||
        rg_comm_allgatherv(sp->comm, sp->v_all->data, sp->send, v->data) < 0)
      return rg_error_prefix("block %d: gathering keys and values", l);
    const rg_attn_desc all = desc(s, sp->batch, 1);
    rg_op_kv_store(s->be, s->k_cache[l], s->v_cache[l], sp->k_all, sp->v_all, &all);
  }
  /* q and lse are left in the traded layout, which the backward reads */
  const rg_attn_desc mine = desc(s, sp->att_batch, 1);
  if (trade_rows(s, 1, (rg_buf *[]){q}) < 0) return rg_error_prefix("block %d: queries to the partner rank", l);
  rg_op_attention(s->be, att, lse, q, s->k_cache[l], s->v_cache[l], &mine);
  if (trade_rows(s, 1, (rg_buf *[]){att}) < 0) return rg_error_prefix("block %d: outputs from the partner rank", l);
  return 0;
}

static int gather_backward(rg_session *s, int l, rg_buf *dq, rg_buf *dk, rg_buf *dv, const rg_buf *datt,
                           const rg_buf *q, const rg_buf *att, const rg_buf *lse) {
  sp_state *sp = s->sp;
  train_state *t = &s->tr;
  const int P = rg_comm_size(sp->comm);
  const size_t kvd = (size_t)s->cfg.n_kv_heads * s->cfg.head_dim;
  const rg_attn_desc mine = desc(s, sp->att_batch, 1), all = desc(s, sp->batch, 1);
  /* the output gradient and the output in the traded layout: copies of
   * this rank's, whose last rows are traded (as they are, without a trade) */
  const rg_buf *dy = datt, *out = att;
  if (sp->trading) {
    const size_t nq = (size_t)sp->counts[rg_comm_rank(sp->comm)] * s->cfg.n_heads * s->cfg.head_dim;
    rg_buf_copy(s->be, sp->heads, 0, datt, 0, nq);
    rg_buf_copy(s->be, sp->dheads, 0, att, 0, nq);
    if (trade_rows(s, 2, (rg_buf *[]){sp->heads, sp->dheads}) < 0)
      return rg_error_prefix("block %d: output gradients to the partner rank", l);
    dy = sp->heads, out = sp->dheads;
  }
  rg_op_attention_backward(s->be, dq, t->dk_cache, t->dv_cache, dy, q, out, lse, s->k_cache[l], s->v_cache[l],
                           &mine);
  if (trade_rows(s, 1, (rg_buf *[]){dq}) < 0) return rg_error_prefix("block %d: query gradients from the partner", l);
  /* this rank's share of every row's gradient (k_all / v_all are free:
   * the cache holds the keys and values), then each row's sum to its owner */
  rg_buf_zero(s->be, sp->k_all, 0, sp->total * kvd);
  rg_buf_zero(s->be, sp->v_all, 0, sp->total * kvd);
  rg_op_kv_store_backward(s->be, sp->k_all, sp->v_all, t->dk_cache, t->dv_cache, &all);
  for (int r = 0; r < P; r++) sp->send[r] = (int)(sp->counts[r] * kvd);
  if (rg_comm_reduce_scatterv(sp->comm, dk->data, sp->k_all->data, sp->send) < 0 ||
      rg_comm_reduce_scatterv(sp->comm, dv->data, sp->v_all->data, sp->send) < 0)
    return rg_error_prefix("block %d: summing key and value gradients", l);
  return 0;
}

/* ---------------------------------------------------------------- Ulysses */

/* One all-to-all that sends, to every rank j, head block j of this rank's
 * rows of each matrix x[i] ([n, nh[i] * hd], row-major), packed as [x[0]
 * block][x[1] block]..., and unpacks what arrives into y[i] ([total,
 * nh[i] / P * hd]: every token of the batch, in order, for this rank's
 * heads). */
static int to_heads(rg_session *s, int nx, const rg_buf *const *x, rg_buf *const *y, const int *nh) {
  sp_state *sp = s->sp;
  rg_backend *be = s->be;
  const int P = rg_comm_size(sp->comm), me = rg_comm_rank(sp->comm), n = sp->counts[me];
  const size_t hd = (size_t)s->cfg.head_dim;
  size_t row = 0; /* floats one token sends to one rank */
  for (int i = 0; i < nx; i++) row += nh[i] / P * hd;
  size_t at = 0;
  for (int j = 0; j < P; j++) {
    for (int i = 0; i < nx; i++) {
      const size_t w = nh[i] / P * hd;
      rg_buf_copy_rows(be, sp->sendbuf, at, w, x[i], j * w, nh[i] * hd, n, w);
      at += (size_t)n * w;
    }
    sp->send[j] = (int)(n * row);
    sp->recv[j] = (int)(sp->counts[j] * row);
  }
  if (rg_comm_alltoallv(sp->comm, sp->recvbuf->data, sp->recv, sp->sendbuf->data, sp->send) < 0) return -1;
  at = 0;
  for (int j = 0, first = 0; j < P; first += sp->counts[j++])
    for (int i = 0; i < nx; i++) {
      const size_t w = nh[i] / P * hd, len = (size_t)sp->counts[j] * w;
      rg_buf_copy(be, y[i], (size_t)first * w, sp->recvbuf, at, len);
      at += len;
    }
  return 0;
}

/* The reverse of to_heads: every rank's rows of x[i] ([total, nh[i] / P *
 * hd], this rank's heads) go back to the token's rank, where they land in
 * column block (sender's rank) of y[i] ([n, nh[i] * hd]). */
static int from_heads(rg_session *s, int nx, const rg_buf *const *x, rg_buf *const *y, const int *nh) {
  sp_state *sp = s->sp;
  rg_backend *be = s->be;
  const int P = rg_comm_size(sp->comm), me = rg_comm_rank(sp->comm), n = sp->counts[me];
  const size_t hd = (size_t)s->cfg.head_dim;
  size_t row = 0;
  for (int i = 0; i < nx; i++) row += nh[i] / P * hd;
  size_t at = 0;
  for (int j = 0, first = 0; j < P; first += sp->counts[j++]) {
    for (int i = 0; i < nx; i++) {
      const size_t w = nh[i] / P * hd, len = (size_t)sp->counts[j] * w;
      rg_buf_copy(be, sp->sendbuf, at, x[i], (size_t)first * w, len);
      at += len;
    }
    sp->send[j] = (int)(sp->counts[j] * row);
    sp->recv[j] = (int)(n * row);
  }
  if (rg_comm_alltoallv(sp->comm, sp->recvbuf->data, sp->recv, sp->sendbuf->data, sp->send) < 0) return -1;
  at = 0;
  for (int j = 0; j < P; j++)
    for (int i = 0; i < nx; i++) {
      const size_t w = nh[i] / P * hd;
      rg_buf_copy_rows(be, y[i], j * w, nh[i] * hd, sp->recvbuf, at, w, n, w);
      at += (size_t)n * w;
    }
  return 0;
}

/* Forward: q (this rank's tokens, all heads) is replaced by the batch's
 * queries of this rank's heads, and lse is written in that layout ([total,
 * n_heads / P], no larger than this rank's [n, n_heads]): what the backward
 * reads as the saved q and lse. */
static int ulysses_forward(rg_session *s, int l, rg_buf *att, rg_buf *lse, rg_buf *q, const rg_buf *k,
                           const rg_buf *v, bool again) {
  sp_state *sp = s->sp;
  const rg_config *c = &s->cfg;
  const int P = rg_comm_size(sp->comm);
  const int nh[3] = {c->n_heads, c->n_kv_heads, c->n_kv_heads};
  /* the queries travel from q and land in q: to_heads packs before it unpacks */
  if (again ? to_heads(s, 1, (const rg_buf *[]){q}, (rg_buf *[]){q}, nh) < 0
            : to_heads(s, 3, (const rg_buf *[]){q, k, v}, (rg_buf *[]){q, sp->k_all, sp->v_all}, nh) < 0)
    return rg_error_prefix("block %d: queries, keys and values to head shards", l);
  const rg_attn_desc heads = desc(s, sp->batch, P);
  if (!again) rg_op_kv_store(s->be, s->k_cache[l], s->v_cache[l], sp->k_all, sp->v_all, &heads);
  rg_op_attention(s->be, sp->heads, lse, q, s->k_cache[l], s->v_cache[l], &heads);
  if (from_heads(s, 1, (const rg_buf *[]){sp->heads}, (rg_buf *[]){att}, nh) < 0)
    return rg_error_prefix("block %d: attention output to sequence shards", l);
  return 0;
}

static int ulysses_backward(rg_session *s, int l, rg_buf *dq, rg_buf *dk, rg_buf *dv, const rg_buf *datt,
                            const rg_buf *q, const rg_buf *att, const rg_buf *lse) {
  sp_state *sp = s->sp;
  train_state *t = &s->tr;
  const rg_config *c = &s->cfg;
  const int P = rg_comm_size(sp->comm);
  const int nh[3] = {c->n_heads, c->n_kv_heads, c->n_kv_heads};
  const size_t qw = (size_t)c->n_heads / P * c->head_dim, kw = (size_t)c->n_kv_heads / P * c->head_dim;
  /* the output gradient in head shards lands in dq's room (zero on entry,
   * overwritten by the returning gradients below), the output itself, which
   * the backward reads with it, in sp->heads */
  const int nh_out[2] = {c->n_heads, c->n_heads};
  if (to_heads(s, 2, (const rg_buf *[]){datt, att}, (rg_buf *[]){dq, sp->heads}, nh_out) < 0)
    return rg_error_prefix("block %d: output and its gradient to head shards", l);
  const rg_attn_desc heads = desc(s, sp->batch, P);
  rg_buf_zero(s->be, sp->dheads, 0, sp->total * qw);
  rg_op_attention_backward(s->be, sp->dheads, t->dk_cache, t->dv_cache, dq, q, sp->heads, lse, s->k_cache[l],
                           s->v_cache[l], &heads);
  rg_buf_zero(s->be, sp->k_all, 0, sp->total * kw);
  rg_buf_zero(s->be, sp->v_all, 0, sp->total * kw);
  rg_op_kv_store_backward(s->be, sp->k_all, sp->v_all, t->dk_cache, t->dv_cache, &heads);
  if (from_heads(s, 3, (const rg_buf *[]){sp->dheads, sp->k_all, sp->v_all}, (rg_buf *[]){dq, dk, dv}, nh) < 0)
    return rg_error_prefix("block %d: query, key and value gradients to sequence shards", l);
  return 0;
}

/* ---------------------------------------------------------------- entry points */

int rg_sp_attention(rg_session *s, int l, rg_buf *att, rg_buf *lse, rg_buf *q, const rg_buf *k, const rg_buf *v,
                    bool again) {
  return s->sp->ulysses ? ulysses_forward(s, l, att, lse, q, k, v, again)
                        : gather_forward(s, l, att, lse, q, k, v, again);
}

int rg_sp_attention_backward(rg_session *s, int l, rg_buf *dq, rg_buf *dk, rg_buf *dv, const rg_buf *datt,
                             const rg_buf *q, const rg_buf *att, const rg_buf *lse) {
  return s->sp->ulysses ? ulysses_backward(s, l, dq, dk, dv, datt, q, att, lse)
                        : gather_backward(s, l, dq, dk, dv, datt, q, att, lse);
}
