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
 * batch's keys and values into its cache and attends with its own queries.
 * Backward: each rank's attention gradient covers every cache row its
 * queries read; the rows' gradients are summed over ranks and scattered to
 * the ranks that own the tokens (a reduce-scatter, the transpose of the
 * gather). Any head count works, and with GQA the gathered rows are small:
 * for SmolLM2 (kv_dim 192, d_model 576) 384 floats per token per layer,
 * against about 6500 of a training session's saved activations per local
 * token.
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

#include "model/session_internal.h"
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
  /* a token's widest exchange: q, k and v forward, or dq, dk and dv back;
   * the output and its gradient into the backward */
  const size_t row = qd + 2 * kvd > 2 * qd ? qd + 2 * kvd : 2 * qd;
  if (sp->ulysses && (!(sp->sendbuf = rg_buf_new(s->be, T * row)) || !(sp->recvbuf = rg_buf_new(s->be, T * row)) ||
                      !(sp->heads = rg_buf_new(s->be, T * qd)) || !(sp->dheads = rg_buf_new(s->be, T * qd))))
    return rg_error_prefix("sequence-parallel buffers");
  return 0;
}

void rg_sp_free(rg_session *s) {
  sp_state *sp = s->sp;
  if (!sp) return;
  rg_buf *bufs[] = {sp->k_all, sp->v_all, sp->sendbuf, sp->recvbuf, sp->heads, sp->dheads};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(s->be, bufs[i]);
  rg_batch_free(s->be, sp->batch);
  free(sp->counts);
  free(sp->seq);
  free(sp->pos);
  free(sp);
  s->sp = NULL;
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

static int gather_forward(rg_session *s, int l, rg_buf *att, rg_buf *lse, const rg_buf *q, const rg_buf *k,
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
  const rg_attn_desc mine = desc(s, s->batch, 1);
  rg_op_attention(s->be, att, lse, q, s->k_cache[l], s->v_cache[l], &mine);
  return 0;
}

static int gather_backward(rg_session *s, int l, rg_buf *dq, rg_buf *dk, rg_buf *dv, const rg_buf *datt,
                           const rg_buf *q, const rg_buf *att, const rg_buf *lse) {
  sp_state *sp = s->sp;
  train_state *t = &s->tr;
  const int P = rg_comm_size(sp->comm);
  const size_t kvd = (size_t)s->cfg.n_kv_heads * s->cfg.head_dim;
  const rg_attn_desc mine = desc(s, s->batch, 1), all = desc(s, sp->batch, 1);
  rg_op_attention_backward(s->be, dq, t->dk_cache, t->dv_cache, datt, q, att, lse, s->k_cache[l], s->v_cache[l],
                           &mine);
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
