/* engine/session.c: a session's allocation and freeing (rg_session_new,
 * rg_session_free: forward.h), the training buffers of a training session,
 * and the session's bytes by kind (engine/session.h). Forward (forward.c)
 * and backward (backward.c) passes use what this file allocates; keeping the
 * allocation and its accounting here, in one place, is what lets neither pass
 * call the other's setup. */
#include "engine/session.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session_internal.h"
#include "util/error.h"

/* ---------------------------------------------------------------- training buffers */

static size_t cache_floats(const rg_session *s) {
  return (size_t)s->max_seqs * s->max_ctx * s->cache_kv_heads * s->cfg.head_dim;
}

static int train_alloc(rg_session *s) {
  const rg_config *c = &s->cfg;
  const size_t T = (size_t)s->max_tokens, R = (size_t)s->max_logits, d = (size_t)c->d_model;
  const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
  const size_t ff = (size_t)c->d_ff, V = (size_t)c->vocab_size, nh = (size_t)c->n_heads;
  train_state *t = &s->tr;
  rg_backend *be = s->be;
  t->saved = calloc((size_t)c->n_layers, sizeof *t->saved);
  t->logit_rows = malloc(R * sizeof *t->logit_rows);
  t->prefix_len = calloc((size_t)s->max_seqs, sizeof *t->prefix_len);
  if (!t->saved || !t->logit_rows || !t->prefix_len) return rg_error_set("session: out of memory");
  const bool keep_attention = s->recompute == RG_RECOMPUTE_MATMULS;
  for (int l = 0; l < c->n_layers; l++) {
    layer_acts *A = &t->saved[l];
    if (!(A->x_in = rg_buf_new(be, T * d)) ||
        (keep_attention && (!(A->q = rg_buf_new(be, T * qd)) || !(A->att = rg_buf_new(be, T * qd)) ||
                            !(A->lse = rg_buf_new(be, T * nh)))))
      return rg_error_prefix("training activations of block %d", l);
    if (s->recompute && l > 0) { /* the rest is one block's worth, shared: rg_session_backward recomputes it */
      layer_acts own = *A;
      *A = t->saved[0];
      A->x_in = own.x_in;
      if (keep_attention) A->q = own.q, A->att = own.att, A->lse = own.lse;
      continue;
    }
    if (!(A->xn1 = rg_buf_new(be, T * d)) || (!A->q && !(A->q = rg_buf_new(be, T * qd))) ||
        (!A->att && !(A->att = rg_buf_new(be, T * qd))) || (!A->lse && !(A->lse = rg_buf_new(be, T * nh))) ||
        !(A->x_mid = rg_buf_new(be, T * d)) ||
        !(A->xn2 = rg_buf_new(be, T * d)) || !(A->gate = rg_buf_new(be, T * ff)) || !(A->up = rg_buf_new(be, T * ff)))
      return rg_error_prefix("training activations of block %d", l);
  }
  /* The cache-shaped gradients are zeroed here, once: kv_store_backward
   * leaves them zero again after every layer (backend.h). */
  if (!(t->x_final = rg_buf_new(be, T * d)) || !(t->h = rg_buf_new(be, T * ff)) || !(t->dx = rg_buf_new(be, T * d)) ||
      !(t->dxn = rg_buf_new(be, T * d)) || !(t->dtmp = rg_buf_new(be, T * d)) || !(t->dq = rg_buf_new(be, T * qd)) ||
      !(t->dk = rg_buf_new(be, T * kvd)) || !(t->dv = rg_buf_new(be, T * kvd)) ||
      !(t->datt = rg_buf_new(be, T * qd)) || !(t->dh = rg_buf_new(be, T * ff)) ||
      !(t->dgate = rg_buf_new(be, T * ff)) || !(t->dup = rg_buf_new(be, T * ff)) ||
      !(t->dk_cache = rg_buf_new(be, cache_floats(s))) || !(t->dv_cache = rg_buf_new(be, cache_floats(s))) ||
      !(t->normed = rg_buf_new(be, R * d)) || !(t->dlast = rg_buf_new(be, R * d)) ||
      !(t->dnormed = rg_buf_new(be, R * d)) || !(t->dlogits = rg_buf_new(be, R * V)) ||
      !(t->losses = rg_buf_new(be, R)))
    return rg_error_prefix("training buffers");
  if (s->w->lora_rank > 0 && !(t->lora_du = rg_buf_new(be, T * (size_t)s->w->lora_rank)))
    return rg_error_prefix("training buffers");
  return 0;
}

static void train_free(rg_session *s) {
  train_state *t = &s->tr;
  rg_backend *be = s->be;
  if (t->saved)
    for (int l = 0; l < s->cfg.n_layers; l++) {
      layer_acts *A = &t->saved[l];
      rg_buf_free(be, A->x_in);
      if (s->recompute == RG_RECOMPUTE_MATMULS) rg_buf_free(be, A->q), rg_buf_free(be, A->att), rg_buf_free(be, A->lse);
      if (s->recompute && l > 0) continue; /* the rest is block 0's, shared */
      if (s->recompute == RG_RECOMPUTE_MATMULS) A->q = A->att = A->lse = NULL; /* freed above */
      rg_buf *bufs[] = {A->xn1, A->q, A->att, A->lse, A->x_mid, A->xn2, A->gate, A->up};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
    }
  rg_buf *bufs[] = {t->x_final, t->h,     t->dx,       t->dxn,      t->dtmp,   t->dq,    t->dk,
                    t->dv,      t->datt,  t->dh,       t->dgate,    t->dup,    t->dk_cache, t->dv_cache,
                    t->normed,  t->dlast, t->dnormed, t->dlogits, t->losses, t->lora_du};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
  free(t->saved);
  free(t->logit_rows);
  free(t->prefix_len);
  memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------- the session */

enum { DEFAULT_BATCH_TOKENS = 512 };

static int alloc_buffers(rg_session *s) {
  const rg_config *c = &s->cfg;
  const size_t T = (size_t)s->max_tokens, R = (size_t)s->max_logits, d = (size_t)c->d_model;
  const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  /* A training session's blocks read and write their own saved copies
   * (train_state.saved, block_buffers): the shared x, xn, q, att, gate and
   * up buffers are an inference session's only. */
  if (!s->train && (!(a->x = rg_buf_new(be, T * d)) || !(a->xn = rg_buf_new(be, T * d)) ||
                    !(a->q = rg_buf_new(be, T * qd)) || !(a->att = rg_buf_new(be, T * qd)) ||
                    !(a->gate = rg_buf_new(be, T * c->d_ff)) || !(a->up = rg_buf_new(be, T * c->d_ff))))
    return -1;
  if (!(a->k = rg_buf_new(be, T * kvd)) || !(a->v = rg_buf_new(be, T * kvd)) || !(a->tmp = rg_buf_new(be, T * d)) ||
      !(a->last = rg_buf_new(be, R * d)) ||
      !(a->logits = rg_buf_new(be, R * c->vocab_size)) || !(a->losses = rg_buf_new(be, R)) ||
      !(a->hooked = rg_buf_new(be, T * d)) || !(s->ablate_unit = rg_buf_new(be, d)) ||
      !(s->actadd_vec = rg_buf_new(be, d)) || !(s->batch = rg_batch_new(be, (int)T)) ||
      !(s->rows_batch = rg_batch_new(be, (int)T)))
    return -1;
  if (s->w->lora_rank > 0 && !(a->lora_u = rg_buf_new(be, T * (size_t)s->w->lora_rank))) return -1;
  s->k_cache = calloc((size_t)c->n_layers, sizeof *s->k_cache);
  s->v_cache = calloc((size_t)c->n_layers, sizeof *s->v_cache);
  if (!s->k_cache || !s->v_cache) return rg_error_set("session: out of memory");
  const size_t cache = (size_t)s->max_seqs * s->max_ctx * s->cache_kv_heads * c->head_dim;
  for (int l = 0; l < c->n_layers; l++)
    if (!(s->k_cache[l] = rg_buf_new(be, cache)) || !(s->v_cache[l] = rg_buf_new(be, cache)))
      return rg_error_prefix("KV cache for %d x %d tokens", s->max_seqs, s->max_ctx);
  const size_t nrows = T > R ? T : R;
  s->seq_len = calloc((size_t)s->max_seqs, sizeof *s->seq_len);
  s->pos = malloc(T * sizeof *s->pos);
  s->chunk_seq = malloc(T * sizeof *s->chunk_seq);
  s->chunk_ids = malloc(T * sizeof *s->chunk_ids);
  s->rows = malloc(nrows * sizeof *s->rows);
  s->hooked_rows = malloc(T * sizeof *s->hooked_rows);
  s->hooked_seq = malloc(T * sizeof *s->hooked_seq);
  s->hooked_pos = malloc(T * sizeof *s->hooked_pos);
  s->hook_rows = malloc(T * d * sizeof *s->hook_rows);
  s->rows_seq = malloc(T * sizeof *s->rows_seq);
  s->rows_pos = malloc(T * sizeof *s->rows_pos);
  if (!s->seq_len || !s->pos || !s->chunk_seq || !s->chunk_ids || !s->rows || !s->hooked_rows || !s->hooked_seq ||
      !s->hooked_pos || !s->hook_rows || !s->rows_seq || !s->rows_pos)
    return rg_error_set("session: out of memory");
  return 0;
}

rg_session *rg_session_new(const rg_weights *w, int max_seqs, int max_ctx, const rg_session_opts *opts) {
  rg_session_opts o = opts ? *opts : (rg_session_opts){0};
  if (max_seqs < 1 || max_ctx < 1) {
    rg_error_set("session: max_seqs %d and max_ctx %d must be positive", max_seqs, max_ctx);
    return NULL;
  }
  if ((long long)max_seqs * max_ctx > INT_MAX) {
    rg_error_set("session: %d sequences of %d tokens exceed %d cache slots", max_seqs, max_ctx, INT_MAX);
    return NULL;
  }
  rg_session *s = calloc(1, sizeof *s);
  if (!s) {
    rg_error_set("session: out of memory");
    return NULL;
  }
  s->w = w;
  s->m = w->m;
  s->cfg = w->m->cfg;
  s->be = w->be;
  s->max_seqs = max_seqs;
  s->max_ctx = max_ctx;
  long long cap = (long long)max_seqs * max_ctx;
  s->max_tokens = o.max_batch_tokens > 0 ? o.max_batch_tokens : DEFAULT_BATCH_TOKENS;
  if (s->max_tokens > cap) s->max_tokens = (int)cap;
  s->max_logits = o.max_logit_rows > 0 ? o.max_logit_rows : max_seqs;
  s->train = o.train;
  if ((unsigned)o.recompute > RG_RECOMPUTE_MATMULS) {
    free(s);
    rg_error_set("session: unknown recompute policy %d", (int)o.recompute);
    return NULL;
  }
  s->recompute = o.train ? o.recompute : RG_RECOMPUTE_NONE;
  if (o.sp && rg_comm_size(o.sp) > 1 && !o.train) {
    free(s);
    rg_error_set("session: sequence parallelism is for training sessions");
    return NULL;
  }
  s->cache_kv_heads = s->cfg.n_kv_heads; /* rg_sp_alloc may divide it */
  if ((o.sp && rg_comm_size(o.sp) > 1 && rg_sp_alloc(s, o.sp, o.sp_mode) < 0) || alloc_buffers(s) < 0 ||
      (s->train && train_alloc(s) < 0)) {
    rg_session_free(s);
    return NULL;
  }
  return s;
}

void rg_session_free(rg_session *s) {
  if (!s) return;
  rg_backend *be = s->be;
  train_free(s);
  rg_sp_free(s);
  rg_buf *bufs[] = {s->a.x,    s->a.xn,     s->a.q,      s->a.k,         s->a.v,         s->a.att,
                    s->a.tmp,  s->a.gate,   s->a.up,     s->a.last,      s->a.logits,    s->a.losses,
                    s->a.hooked, s->a.lora_u, s->ablate_unit, s->actadd_vec};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
  rg_batch_free(be, s->batch);
  rg_batch_free(be, s->rows_batch);
  for (int l = 0; l < s->cfg.n_layers; l++) {
    if (s->k_cache) rg_buf_free(be, s->k_cache[l]);
    if (s->v_cache) rg_buf_free(be, s->v_cache[l]);
  }
  free(s->k_cache);
  free(s->v_cache);
  free(s->seq_len);
  free(s->pos);
  free(s->chunk_seq);
  free(s->chunk_ids);
  free(s->rows);
  free(s->hooked_rows);
  free(s->hooked_seq);
  free(s->hooked_pos);
  free(s->rows_seq);
  free(s->rows_pos);
  free(s->hook_rows);
  free(s);
}

/* ---------------------------------------------------------------- bytes by kind */

static size_t buf_bytes(const rg_buf *b) { return b ? b->n * sizeof(float) : 0; }

static size_t sum(const rg_buf *const *bufs, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += buf_bytes(bufs[i]);
  return total;
}
#define SUM(...) sum((const rg_buf *const[]){__VA_ARGS__}, sizeof((const rg_buf *const[]){__VA_ARGS__}) / sizeof(rg_buf *))

/* The batch's metadata as the CPU backend keeps it: an id, a sequence and
 * a position per token. */
static size_t batch_bytes(const rg_batch *b) {
  return b ? (size_t)(b->cap > 0 ? b->cap : 1) * (sizeof *b->ids + sizeof *b->seq + sizeof *b->pos) : 0;
}

/* alloc_buffers' and train_alloc's host arrays, sized as they size them. */
static size_t host_bytes(const rg_session *s) {
  const size_t T = (size_t)s->max_tokens, R = (size_t)s->max_logits, L = (size_t)s->cfg.n_layers;
  const size_t nrows = T > R ? T : R;
  size_t h = sizeof *s + (size_t)s->max_seqs * sizeof *s->seq_len + L * (sizeof *s->k_cache + sizeof *s->v_cache);
  h += T * (sizeof *s->pos + sizeof *s->chunk_seq + sizeof *s->chunk_ids + sizeof *s->hooked_rows +
            sizeof *s->hooked_seq + sizeof *s->hooked_pos + sizeof *s->rows_seq + sizeof *s->rows_pos);
  h += nrows * sizeof *s->rows + T * (size_t)s->cfg.d_model * sizeof *s->hook_rows;
  if (s->train) h += L * sizeof *s->tr.saved + R * sizeof *s->tr.logit_rows;
  if (s->sp) {
    const size_t P = (size_t)rg_comm_size(s->sp->comm);
    h += sizeof *s->sp + 3 * P * sizeof *s->sp->counts + P * T * (sizeof *s->sp->seq + sizeof *s->sp->pos);
    if (s->sp->att_seq) h += T * (sizeof *s->sp->att_seq + sizeof *s->sp->att_pos);
  }
  return h;
}

void rg_session_memory(const rg_session *s, rg_session_bytes *out) {
  const act_bufs *a = &s->a;
  const train_state *t = &s->tr;
  *out = (rg_session_bytes){0};
  for (int l = 0; l < s->cfg.n_layers; l++) out->kv_cache += buf_bytes(s->k_cache[l]) + buf_bytes(s->v_cache[l]);
  out->work = SUM(a->x, a->xn, a->q, a->k, a->v, a->att, a->tmp, a->gate, a->up, a->hooked, a->lora_u,
                  s->ablate_unit, s->actadd_vec) +
              batch_bytes(s->batch) + batch_bytes(s->rows_batch);
  if (s->sp)
    out->work += SUM(s->sp->k_all, s->sp->v_all, s->sp->sendbuf, s->sp->recvbuf, s->sp->heads, s->sp->dheads) +
                 batch_bytes(s->sp->batch) + batch_bytes(s->sp->att_batch);
  out->logits = SUM(a->last, a->logits, a->losses);
  if (s->train) {
    const layer_acts *A = &t->saved[0];
    out->saved_layers = s->cfg.n_layers;
    out->saved_other = SUM(t->x_final, t->h);
    const size_t attention = SUM(A->q, A->att, A->lse), rest = SUM(A->xn1, A->x_mid, A->xn2, A->gate, A->up);
    /* recompute: every block keeps its input (and with MATMULS its
     * queries, attention output and LSE); the rest is one block's, shared */
    out->saved_layer = buf_bytes(A->x_in) + (s->recompute == RG_RECOMPUTE_FULL ? 0 : attention) +
                       (s->recompute ? 0 : rest);
    if (s->recompute) out->saved_other += rest + (s->recompute == RG_RECOMPUTE_FULL ? attention : 0);
    out->backward = SUM(t->dx, t->dxn, t->dtmp, t->dq, t->dk, t->dv, t->datt, t->dh, t->dgate, t->dup, t->dk_cache,
                        t->dv_cache, t->lora_du);
    out->logits += SUM(t->normed, t->dlast, t->dnormed, t->dlogits, t->losses);
  }
  out->backend = out->kv_cache + out->work + out->saved_layer * (size_t)out->saved_layers + out->saved_other +
                 out->backward + out->logits;
  out->host = host_bytes(s);
}
