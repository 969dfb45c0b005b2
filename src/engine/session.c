/* session_memory.c: a session's bytes by kind (session_memory.h). */
#include "engine/session.h"

#include <stdint.h>

#include "engine/session_internal.h"

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

/* forward.c alloc_buffers' and backward.c rg_session_train_alloc's host
 * arrays, sized as they size them. */
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
