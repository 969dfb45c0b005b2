/* backward.c: the reverse of forward.c's pass, block by block, with the
 * backend's gradient operations (backend.h). Per block, in reverse order of
 * forward.c's (d* is the gradient of the loss with respect to *):
 *   dmlp = dx_out [ablate];  dh = dmlp . W_down;  dgate, dup = swiglu'(dh)
 *   dxn2 = dgate . W_gate + dup . W_up;  dx_mid = dx_out + rmsnorm'(dxn2)
 *   dattn = dx_mid [ablate];  datt = dattn . W_o;  dq, dk, dv = attention'(datt)
 *   rope' on dq and dk;  dxn1 = dq . W_q + dk . W_k + dv . W_v
 *   dx_in = dx_mid + rmsnorm'(dxn1) [ablate]
 * with every weight gradient added on the way. silu(gate) * up is
 * recomputed from the saved gate and up rather than kept per block.
 */
#include "engine/backward.h"

#include <stdlib.h>
#include <string.h>

#include "engine/session_internal.h"
#include "util/error.h"

typedef struct {
  rg_buf *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv;
  rg_buf *ffn_norm, *w_gate, *w_up, *w_down;
  rg_buf *lora_a[LORA_MODULES], *lora_b[LORA_MODULES];
} layer_g;

struct rg_grads {
  rg_session *s;
  layer_g *lg;
  rg_buf *tok_embd, *out_norm, *lm_head; /* lm_head == tok_embd when tied */
  int n;                                 /* entries: the weights' parameters, in their order */
  rg_buf **bufs;
  bool *borrowed; /* NULL, or per entry: bufs[i] is another entry's (rg_grads_new_per_block) */
  int (*hook)(void *ctx, int block);
  void *hook_ctx;
};

/* ---------------------------------------------------------------- rg_grads */

/* Points *slot at the gradient buffer of prepared weight W (NULL when the
 * model has no such weight): entry i of the weights' parameter list has
 * buffer i. */
static void find_grad(rg_grads *g, const rg_bweight *w, rg_buf **slot) {
  const rg_weights *ws = g->s->w;
  for (int i = 0; w && i < ws->n_params; i++)
    if (ws->params[i] == w) *slot = g->bufs[i];
}

static rg_grads *grads_new(rg_session *s, bool per_block);

rg_grads *rg_grads_new(rg_session *s) { return grads_new(s, false); }
rg_grads *rg_grads_new_per_block(rg_session *s) { return grads_new(s, true); }

/* Per block: the entry of parameter k of block 0 that entry i (parameter
 * k of its block) shares, or -1 (block 0 itself, outside the blocks, or
 * another size). */
static int shared_entry(const rg_weights *w, int i, const int *block) {
  if (block[i] <= 0) return -1;
  int k = 0;
  for (int j = 0; j < i; j++) k += block[j] == block[i];
  for (int j = 0; j < w->n_params; j++)
    if (block[j] == 0 && k-- == 0)
      return rg_tensor_nelems(w->tensors[j]) == rg_tensor_nelems(w->tensors[i]) ? j : -1;
  return -1;
}

static rg_grads *grads_new(rg_session *s, bool per_block) {
  if (!s->train) {
    rg_error_set("gradients need a training session (rg_session_opts.train)");
    return NULL;
  }
  const rg_weights *w = s->w;
  const int L = s->cfg.n_layers, n = w->n_params;
  rg_grads *g = calloc(1, sizeof *g);
  if (!g || !(g->lg = calloc((size_t)L, sizeof *g->lg)) || !(g->bufs = calloc((size_t)n, sizeof *g->bufs))) {
    if (g) free(g->lg);
    free(g);
    rg_error_set("gradients: out of memory");
    return NULL;
  }
  g->s = s;
  int *block = per_block ? malloc((size_t)(n ? n : 1) * sizeof *block) : NULL;
  if (per_block && (!block || !(g->borrowed = calloc((size_t)(n ? n : 1), sizeof *g->borrowed)))) {
    free(block);
    rg_grads_free(g);
    rg_error_set("gradients: out of memory");
    return NULL;
  }
  for (int i = 0; per_block && i < n; i++) block[i] = rg_weights_param_block(w, i);
  for (; g->n < n; g->n++) {
    const int shared = per_block ? shared_entry(w, g->n, block) : -1;
    if (shared >= 0) {
      g->bufs[g->n] = g->bufs[shared];
      g->borrowed[g->n] = true;
    } else if (!(g->bufs[g->n] = rg_buf_new(s->be, (size_t)rg_tensor_nelems(w->tensors[g->n])))) {
      free(block);
      rg_error_prefix("gradients");
      rg_grads_free(g);
      return NULL;
    }
  }
  free(block);
  for (int l = 0; l < L; l++) {
    const layer_w *W = &w->lw[l];
    layer_g *G = &g->lg[l];
    find_grad(g, W->attn_norm, &G->attn_norm);
    find_grad(g, W->wq, &G->wq);
    find_grad(g, W->wk, &G->wk);
    find_grad(g, W->wv, &G->wv);
    find_grad(g, W->wo, &G->wo);
    find_grad(g, W->bq, &G->bq);
    find_grad(g, W->bk, &G->bk);
    find_grad(g, W->bv, &G->bv);
    find_grad(g, W->ffn_norm, &G->ffn_norm);
    find_grad(g, W->w_gate, &G->w_gate);
    find_grad(g, W->w_up, &G->w_up);
    find_grad(g, W->w_down, &G->w_down);
    for (int m = 0; m < LORA_MODULES; m++) {
      find_grad(g, W->lora[m].a, &G->lora_a[m]);
      find_grad(g, W->lora[m].b, &G->lora_b[m]);
    }
  }
  find_grad(g, w->tok_embd, &g->tok_embd);
  find_grad(g, w->out_norm, &g->out_norm);
  find_grad(g, w->lm_head, &g->lm_head);
  return g;
}

static bool owns(const rg_grads *g, int i) { return !g->borrowed || !g->borrowed[i]; }

void rg_grads_free(rg_grads *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++)
    if (owns(g, i)) rg_buf_free(g->s->be, g->bufs[i]);
  free(g->lg);
  free(g->bufs);
  free(g->borrowed);
  free(g);
}

void rg_grads_zero(rg_grads *g) {
  for (int i = 0; i < g->n; i++)
    if (owns(g, i)) rg_buf_zero(g->s->be, g->bufs[i], 0, g->bufs[i]->n);
}

void rg_grads_set_block_hook(rg_grads *g, int (*hook)(void *ctx, int block), void *ctx) {
  g->hook = hook;
  g->hook_ctx = ctx;
}

size_t rg_grads_bytes(const rg_grads *g) {
  size_t total = 0;
  for (int i = 0; i < g->n; i++)
    if (owns(g, i)) total += g->bufs[i]->n * sizeof(float);
  return total;
}

int rg_grads_count(const rg_grads *g) { return g->n; }
const rg_tensor *rg_grads_tensor(const rg_grads *g, int i) { return g->s->w->tensors[i]; }
rg_buf *rg_grads_buf(const rg_grads *g, int i) { return g->bufs[i]; }
int rg_grads_download(const rg_grads *g, int i, float *out) {
  return rg_buf_download(g->s->be, g->bufs[i], 0, out, g->bufs[i]->n);
}

int rg_grads_allreduce(rg_grads *g, rg_comm *c) {
  if (rg_backend_status(g->s->be) < 0) return rg_error_prefix("gradients");
  for (int i = 0; i < g->n; i++)
    if (rg_comm_allreduce_sum(c, g->bufs[i]->data, g->bufs[i]->n) < 0)
      return rg_error_prefix("summing the gradient of %s over %d ranks", g->s->w->tensors[i]->name, rg_comm_size(c));
  return 0;
}

/* ---------------------------------------------------------------- loss */

int rg_session_loss_rows(const rg_session *s) { return s->train ? s->tr.n_logits : 0; }

/* Checks the targets against the last eval's logit rows and readies the
 * loss gradient: the first loss after an eval or a backward starts it from
 * zero, later ones add to it. Returns the row count, or -1 with the error set. */
static int begin_loss(rg_session *s, const int32_t *targets) {
  if (!s->train) return rg_error_set("loss: not a training session");
  train_state *t = &s->tr;
  const int R = t->n_logits, V = s->cfg.vocab_size;
  /* under sequence parallelism a rank may hold no rows of the batch; its
   * backward still runs (the other ranks' attention needs it) */
  if (t->n == 0 || (R == 0 && !s->sp)) return rg_error_set("loss: the last eval returned no logit rows");
  for (int r = 0; r < R; r++)
    if (targets[r] < 0 || targets[r] >= V) return rg_error_set("loss: target %d out of range [0, %d)", (int)targets[r], V);
  if (!t->have_dlogits) rg_buf_zero(s->be, t->dlogits, 0, (size_t)R * V);
  return R;
}

/* Downloads the R per-row losses an operation wrote and marks the loss
 * gradient as set. */
static int end_loss(rg_session *s, int R, float *losses) {
  if (rg_buf_download(s->be, s->tr.losses, 0, losses, (size_t)R) < 0) return rg_error_prefix("loss");
  s->tr.have_dlogits = true;
  return 0;
}

int rg_session_loss_ce(rg_session *s, const int32_t *targets, const float *scale, float *losses) {
  const int R = begin_loss(s, targets);
  if (R < 0) return -1;
  rg_op_cross_entropy(s->be, s->tr.losses, s->tr.dlogits, s->a.logits, targets, scale, R, s->cfg.vocab_size);
  return end_loss(s, R, losses);
}

int rg_session_loss_away(rg_session *s, const int32_t *targets, const float *scale, float log_p_min, float *losses) {
  const int R = begin_loss(s, targets);
  if (R < 0) return -1;
  rg_op_unlikelihood(s->be, s->tr.losses, s->tr.dlogits, s->a.logits, targets, scale, R, s->cfg.vocab_size, log_p_min);
  return end_loss(s, R, losses);
}

/* ---------------------------------------------------------------- backward */

/* dst = src (n floats) through the backend: zero, then add. */
static void copy_buf(rg_backend *be, rg_buf *dst, const rg_buf *src, size_t n) {
  rg_buf_zero(be, dst, 0, n);
  rg_op_add(be, dst, dst, src, n);
}

/* The gradient of an ablated block output: a copy of dx, ablated, or dx
 * itself when no ablation is on. */
static const rg_buf *output_grad(rg_session *s, const rg_buf *dx, int n) {
  if (!s->ablate_on) return dx;
  const size_t nd = (size_t)n * s->cfg.d_model;
  copy_buf(s->be, s->tr.dtmp, dx, nd);
  rg_op_ablate(s->be, s->tr.dtmp, n, s->cfg.d_model, s->ablate_unit);
  return s->tr.dtmp;
}

/* The adapter of module M of the current block (if any): DX += its share
 * of the input gradient, and its A / B gradients, given the module's
 * output gradient DY and input X. */
static void lora_backward(rg_session *s, int l, const layer_g *G, int m, rg_buf *dx, const rg_buf *dy,
                          const rg_buf *x) {
  rg_lora_backward(s->w, &s->w->lw[l].lora[m], G->lora_a[m], G->lora_b[m], dx, dy, x, s->tr.n, s->a.lora_u,
                   s->tr.lora_du);
}

static int backward_layer(rg_session *s, int l, layer_g *G) {
  const rg_config *c = &s->cfg;
  const layer_w *w = &s->w->lw[l];
  const layer_acts *A = &s->tr.saved[l];
  train_state *t = &s->tr;
  rg_backend *be = s->be;
  const int n = t->n, d = c->d_model;
  const size_t nd = (size_t)n * d, nff = (size_t)n * c->d_ff;
  const size_t nq = (size_t)n * c->n_heads * c->head_dim, nkv = (size_t)n * c->n_kv_heads * c->head_dim;
  const rg_buf *inv_freq = s->w->inv_freq;
  const rg_attn_desc ad = {.batch = s->batch, .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads,
                           .head_dim = c->head_dim, .window = c->sliding_window, .max_ctx = s->max_ctx};

  /* MLP; t->dx holds the gradient of the block output */
  const rg_buf *dmlp = output_grad(s, t->dx, n);
  rg_op_swiglu(be, t->h, A->gate, A->up, nff);
  rg_buf_zero(be, t->dh, 0, nff);
  rg_op_matmul_backward(be, t->dh, G->w_down, NULL, dmlp, t->h, n, w->w_down);
  lora_backward(s, l, G, LORA_DOWN, t->dh, dmlp, t->h);
  rg_buf_zero(be, t->dgate, 0, nff);
  rg_buf_zero(be, t->dup, 0, nff);
  rg_op_swiglu_backward(be, t->dgate, t->dup, t->dh, A->gate, A->up, nff);
  rg_buf_zero(be, t->dxn, 0, nd);
  rg_op_matmul_backward(be, t->dxn, G->w_gate, NULL, t->dgate, A->xn2, n, w->w_gate);
  rg_op_matmul_backward(be, t->dxn, G->w_up, NULL, t->dup, A->xn2, n, w->w_up);
  lora_backward(s, l, G, LORA_GATE, t->dxn, t->dgate, A->xn2);
  lora_backward(s, l, G, LORA_UP, t->dxn, t->dup, A->xn2);
  rg_op_rmsnorm_backward(be, t->dx, G->ffn_norm, t->dxn, A->x_mid, w->ffn_norm, n, d, c->rms_eps);

  /* attention; t->dx now holds the gradient of resid_mid */
  const rg_buf *dattn = output_grad(s, t->dx, n);
  rg_buf_zero(be, t->datt, 0, nq);
  rg_op_matmul_backward(be, t->datt, G->wo, NULL, dattn, A->att, n, w->wo);
  lora_backward(s, l, G, LORA_O, t->datt, dattn, A->att);
  rg_buf_zero(be, t->dq, 0, nq);
  if (s->sp) {
    if (rg_sp_attention_backward(s, l, t->dq, t->dk, t->dv, t->datt, A->q, A->att, A->lse) < 0) return -1;
  } else {
    rg_op_attention_backward(be, t->dq, t->dk_cache, t->dv_cache, t->datt, A->q, A->att, A->lse, s->k_cache[l],
                             s->v_cache[l], &ad);
    rg_buf_zero(be, t->dk, 0, nkv);
    rg_buf_zero(be, t->dv, 0, nkv);
    rg_op_kv_store_backward(be, t->dk, t->dv, t->dk_cache, t->dv_cache, &ad);
  }
  rg_op_rope_backward(be, t->dq, s->batch, c->n_heads, c->head_dim, inv_freq, c->rope_adjacent_pairs);
  rg_op_rope_backward(be, t->dk, s->batch, c->n_kv_heads, c->head_dim, inv_freq, c->rope_adjacent_pairs);
  rg_buf_zero(be, t->dxn, 0, nd);
  rg_op_matmul_backward(be, t->dxn, G->wq, G->bq, t->dq, A->xn1, n, w->wq);
  rg_op_matmul_backward(be, t->dxn, G->wk, G->bk, t->dk, A->xn1, n, w->wk);
  rg_op_matmul_backward(be, t->dxn, G->wv, G->bv, t->dv, A->xn1, n, w->wv);
  lora_backward(s, l, G, LORA_Q, t->dxn, t->dq, A->xn1);
  lora_backward(s, l, G, LORA_K, t->dxn, t->dk, A->xn1);
  lora_backward(s, l, G, LORA_V, t->dxn, t->dv, A->xn1);
  rg_op_rmsnorm_backward(be, t->dx, G->attn_norm, t->dxn, A->x_in, w->attn_norm, n, d, c->rms_eps);

  /* the interventions at resid_pre: ablation is its own transpose, the
   * added vector is a constant */
  if (s->ablate_on) rg_op_ablate(be, t->dx, n, d, s->ablate_unit);
  return 0;
}

int rg_session_backward(rg_session *s, rg_grads *g, float *d_embed) {
  if (!s->train || (g && g->s != s)) return rg_error_set("backward: not a training session, or not its gradients");
  train_state *t = &s->tr;
  if (!t->have_dlogits)
    return rg_error_set("backward: no loss set since the last eval (rg_session_loss_ce, rg_session_loss_away)");
  if (!t->whole && g)
    return rg_error_set("backward: the last eval continued cached sequences; parameter gradients need whole "
                        "sequences in one eval");
  const rg_config *c = &s->cfg;
  rg_backend *be = s->be;
  const int n = t->n, R = t->n_logits, d = c->d_model;
  /* The session's batch metadata is that of its last pass, which is the
   * one recorded (a session computes one pass at a time). */

  /* the head: logits = lm_head(rmsnorm(x_final[rows])) */
  rg_buf_gather_rows(be, s->a.last, t->x_final, t->logit_rows, R, d);
  rg_op_rmsnorm(be, t->normed, s->a.last, s->w->out_norm, R, d, c->rms_eps);
  rg_buf_zero(be, t->dnormed, 0, (size_t)R * d);
  rg_op_matmul_backward(be, t->dnormed, g ? g->lm_head : NULL, NULL, t->dlogits, t->normed, R, s->w->lm_head);
  rg_buf_zero(be, t->dlast, 0, (size_t)R * d);
  rg_op_rmsnorm_backward(be, t->dlast, g ? g->out_norm : NULL, t->dnormed, s->a.last, s->w->out_norm, R, d,
                         c->rms_eps);
  rg_buf_zero(be, t->dx, 0, (size_t)n * d);
  rg_op_gather_rows_backward(be, t->dx, t->dlast, t->logit_rows, R, d);

  static layer_g no_grads; /* all NULL: input gradient only */
  for (int l = c->n_layers - 1; l >= 0; l--) {
    if (s->recompute && rg_session_rerun_block(s, l) < 0) return rg_error_prefix("backward");
    if (backward_layer(s, l, g ? &g->lg[l] : &no_grads) < 0) return rg_error_prefix("backward");
    if (g && g->hook && g->hook(g->hook_ctx, l) < 0) return rg_error_prefix("backward");
  }
  /* A batch on top of cached tokens (input gradient only) left gradients
   * in the cache rows of those tokens, which kv_store_backward does not
   * read: zero them, so the cache-shaped buffers are zero again. */
  const size_t kvd = (size_t)s->cache_kv_heads * c->head_dim;
  for (int q = 0; !t->whole && q < s->max_seqs; q++)
    if (t->prefix_len[q] > 0) {
      const size_t at = (size_t)q * s->max_ctx * kvd, len = (size_t)t->prefix_len[q] * kvd;
      rg_buf_zero(be, t->dk_cache, at, len);
      rg_buf_zero(be, t->dv_cache, at, len);
    }

  if (g && g->tok_embd) rg_op_embed_backward(be, g->tok_embd, t->dx, s->batch, d); /* frozen under LoRA */
  if (g && g->hook && g->hook(g->hook_ctx, -1) < 0) return rg_error_prefix("backward");
  t->have_dlogits = false; /* one backward per loss */
  if (d_embed ? rg_buf_download(be, t->dx, 0, d_embed, (size_t)n * d) : rg_backend_status(be)) return rg_error_prefix("backward");
  return 0;
}
