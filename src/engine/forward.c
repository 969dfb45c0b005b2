/* forward.c: the Llama-family decoder on top of the backend operations.
 *
 * Per block (TransformerLens site names in brackets):
 *   x = x [ablate] [+ c r]                    -> resid_pre
 *   a = o_proj(attn(rope(q), rope(k), v))     -> attn_out   [ablate]
 *   x = x + a                                 -> resid_mid
 *   f = down(silu(gate(n(x))) * up(n(x)))     -> mlp_out    [ablate]
 *   x = x + f                                 -> resid_post
 * Everything on activations goes through backend ops on backend buffers;
 * the host side only validates the batch, computes positions, and hands
 * captured rows to hooks. The weights and RoPE frequencies come from the
 * shared rg_weights (weights.h).
 */
#include "engine/forward.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session_internal.h"
#include "util/error.h"

const rg_model *rg_session_model(const rg_session *s) { return s->m; }
const rg_weights *rg_session_weights(const rg_session *s) { return s->w; }
int rg_session_vocab(const rg_session *s) { return s->cfg.vocab_size; }
int rg_session_max_seqs(const rg_session *s) { return s->max_seqs; }
int rg_session_max_ctx(const rg_session *s) { return s->max_ctx; }
int rg_session_max_batch_tokens(const rg_session *s) { return s->max_tokens; }
int rg_session_max_logit_rows(const rg_session *s) { return s->max_logits; }
int rg_session_seq_len(const rg_session *s, int seq) {
  return seq >= 0 && seq < s->max_seqs ? s->seq_len[seq] : 0;
}

void rg_session_reset(rg_session *s) { memset(s->seq_len, 0, (size_t)s->max_seqs * sizeof *s->seq_len); }

void rg_session_drop(rg_session *s, int seq) {
  if (seq >= 0 && seq < s->max_seqs) s->seq_len[seq] = 0;
}

void rg_session_truncate(rg_session *s, int seq, int len) {
  if (seq >= 0 && seq < s->max_seqs && len >= 0 && len < s->seq_len[seq]) s->seq_len[seq] = len;
}

int rg_session_fork(rg_session *s, int src, int dst) {
  if (src < 0 || src >= s->max_seqs || dst < 0 || dst >= s->max_seqs || src == dst)
    return rg_error_set("session fork: sequences %d -> %d of %d", src, dst, s->max_seqs);
  const size_t kvd = (size_t)s->cache_kv_heads * s->cfg.head_dim, n = (size_t)s->seq_len[src] * kvd;
  const size_t from = (size_t)src * s->max_ctx * kvd, to = (size_t)dst * s->max_ctx * kvd;
  for (int l = 0; l < s->cfg.n_layers; l++) {
    rg_buf_copy(s->be, s->k_cache[l], to, s->k_cache[l], from, n);
    rg_buf_copy(s->be, s->v_cache[l], to, s->v_cache[l], from, n);
  }
  s->seq_len[dst] = s->seq_len[src];
  return rg_backend_status(s->be) < 0 ? rg_error_prefix("session fork") : 0;
}

/* ---------------------------------------------------------------- interventions */

int rg_session_set_intervention(rg_session *s, const rg_intervention *iv) {
  const int d = s->cfg.d_model;
  s->ablate_on = s->actadd_on = false;
  if (!iv) return 0;
  if (iv->actadd_vec && (iv->actadd_layer < 0 || iv->actadd_layer >= s->cfg.n_layers))
    return rg_error_set("actadd layer %d: out of range [0, %d)", iv->actadd_layer, s->cfg.n_layers);
  if (iv->ablate_dir) {
    /* r_hat = r / (|r| + 1e-8), as refusal_direction's hook_utils.py. */
    double nn = 0;
    for (int i = 0; i < d; i++) nn += (double)iv->ablate_dir[i] * iv->ablate_dir[i];
    float *unit = malloc((size_t)d * sizeof *unit);
    if (!unit) return rg_error_set("session: out of memory");
    const double inv = 1.0 / (sqrt(nn) + 1e-8);
    for (int i = 0; i < d; i++) unit[i] = (float)(iv->ablate_dir[i] * inv);
    rg_buf_upload(s->be, s->ablate_unit, 0, unit, (size_t)d);
    free(unit);
    s->ablate_on = true;
  }
  if (iv->actadd_vec) {
    rg_buf_upload(s->be, s->actadd_vec, 0, iv->actadd_vec, (size_t)d);
    s->actadd_layer = iv->actadd_layer;
    s->actadd_coeff = iv->actadd_coeff;
    s->actadd_on = true;
  }
  return 0;
}

void rg_session_set_capture(rg_session *s, const rg_capture *cap) {
  s->cap_on = cap && cap->fn && cap->layer_sites;
  if (s->cap_on) s->cap = *cap;
}

/* The rows of this pass that hooks see (rg_capture.from_pos). */
static void select_hooked_rows(rg_session *s, const int *seq, int n) {
  s->n_hooked = 0;
  if (!s->cap_on) return;
  for (int i = 0; i < n; i++)
    if (!s->cap.from_pos || s->pos[i] >= s->cap.from_pos[seq[i]]) {
      s->hooked_rows[s->n_hooked] = i;
      s->hooked_seq[s->n_hooked] = seq[i];
      s->hooked_pos[s->n_hooked++] = s->pos[i];
    }
}

/* Hands the hooked rows of X to the capture callback: gathered on the
 * backend first, so only they are downloaded. Returns 0 or -1. */
static int hook(rg_session *s, rg_hook_site site, int layer, const rg_buf *x) {
  if (!s->cap_on || s->n_hooked == 0 || !(s->cap.layer_sites[layer] & RG_HOOK_BIT(site))) return 0;
  const int d = s->cfg.d_model, k = s->n_hooked;
  rg_buf_gather_rows(s->be, s->a.hooked, x, s->hooked_rows, k, d);
  if (rg_buf_download(s->be, s->a.hooked, 0, s->hook_rows, (size_t)k * d) < 0) return -1;
  s->cap.fn(s->cap.user, site, layer, s->hook_rows, k, d, s->hooked_seq, s->hooked_pos);
  return 0;
}

/* ---------------------------------------------------------------- the pass */

/* The last block's output (the final norm's input). */
static rg_buf *final_output(rg_session *s) { return s->train ? s->tr.x_final : s->a.x; }

/* Block l's buffers (session_internal.h, layer_acts); *x_out is where it
 * writes its output. */
static layer_acts block_buffers(rg_session *s, int l, rg_buf **x_out) {
  if (s->train) {
    *x_out = l + 1 < s->cfg.n_layers ? s->tr.saved[l + 1].x_in : s->tr.x_final;
    return s->tr.saved[l];
  }
  act_bufs *a = &s->a;
  *x_out = a->x;
  return (layer_acts){.x_in = a->x, .xn1 = a->xn, .q = a->q, .att = a->att, .x_mid = a->x, .xn2 = a->xn,
                      .gate = a->gate, .up = a->up};
}

/* How run_layer runs a block. */
typedef enum {
  BLOCK_PASS,    /* the pass itself */
  BLOCK_AGAIN,   /* a recomputation for the backward */
  BLOCK_QUERIES, /* the rest of a block whose keys and values the cache has (last_block_on_rows) */
} block_mode;

static rg_attn_desc attn_desc(const rg_session *s) {
  const rg_config *c = &s->cfg;
  return (rg_attn_desc){.batch = s->batch, .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads,
                        .head_dim = c->head_dim, .window = c->sliding_window, .max_ctx = s->max_ctx};
}

/* Block L's keys and values of the n tokens from its normed input XN1 (with
 * their adapters and RoPE) into a->k and a->v. */
static void keys_values(rg_session *s, int l, int n, const rg_buf *xn1) {
  const rg_config *c = &s->cfg;
  const layer_w *w = &s->w->lw[l];
  act_bufs *a = &s->a;
  rg_op_matmul(s->be, a->k, xn1, n, w->wk, w->bk);
  rg_op_matmul(s->be, a->v, xn1, n, w->wv, w->bv);
  rg_lora_forward(s->w, &w->lora[LORA_K], a->k, xn1, n, a->lora_u);
  rg_lora_forward(s->w, &w->lora[LORA_V], a->v, xn1, n, a->lora_u);
  rg_op_rope(s->be, a->k, s->batch, c->n_kv_heads, c->head_dim, s->w->inv_freq, c->rope_adjacent_pairs);
}

/* Block L's attention from its normed input A->xn1 into A->att: q, and k
 * and v into the KV cache unless MODE says the cache has them already, then
 * attention itself, here or over the ranks (sp_attention.c). */
static int attention(rg_session *s, int l, int n, const layer_acts *A, block_mode mode) {
  const rg_config *c = &s->cfg;
  const layer_w *w = &s->w->lw[l];
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  rg_op_matmul(be, A->q, A->xn1, n, w->wq, w->bq);
  rg_lora_forward(s->w, &w->lora[LORA_Q], A->q, A->xn1, n, a->lora_u);
  rg_op_rope(be, A->q, s->batch, c->n_heads, c->head_dim, s->w->inv_freq, c->rope_adjacent_pairs);
  if (mode != BLOCK_QUERIES) keys_values(s, l, n, A->xn1);
  if (s->sp) return rg_sp_attention(s, l, A->att, A->lse, A->q, a->k, a->v, mode == BLOCK_AGAIN);
  const rg_attn_desc ad = attn_desc(s);
  if (mode != BLOCK_QUERIES) rg_op_kv_store(be, s->k_cache[l], s->v_cache[l], a->k, a->v, &ad);
  rg_op_attention(be, A->att, A->lse, A->q, s->k_cache[l], s->v_cache[l], &ad);
  return 0;
}

/* The interventions on block L's input X (n rows) and its resid_pre hook. */
static int block_input(rg_session *s, int l, int n, rg_buf *x) {
  const int d = s->cfg.d_model;
  if (s->ablate_on) rg_op_ablate(s->be, x, n, d, s->ablate_unit);
  if (s->actadd_on && l == s->actadd_layer) rg_op_add_scaled(s->be, x, n, d, s->actadd_vec, s->actadd_coeff);
  return hook(s, RG_HOOK_RESID_PRE, l, x);
}

/* Block L over the n tokens of the pass. BLOCK_AGAIN: a recomputation for
 * the backward (rg_session_opts.recompute): the block input already carries
 * the interventions, hooks have seen this pass, and it stops at the MLP
 * projections (what the backward reads); under RG_RECOMPUTE_MATMULS it
 * also leaves the queries and attention's output as they were kept.
 * BLOCK_QUERIES: the input carries the interventions too, and the KV cache
 * has the block's keys and values. */
static int run_layer(rg_session *s, int l, int n, block_mode mode) {
  const bool again = mode == BLOCK_AGAIN, applied = mode != BLOCK_PASS;
  const rg_config *c = &s->cfg;
  const layer_w *w = &s->w->lw[l];
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  const int d = c->d_model;
  rg_buf *x_out;
  const layer_acts A = block_buffers(s, l, &x_out);
  /* silu(gate) * up: in place in inference, kept apart for the backward */
  rg_buf *h = s->train ? s->tr.h : A.gate;

  if (!applied && block_input(s, l, n, A.x_in) < 0) return -1;

  rg_op_rmsnorm(be, A.xn1, A.x_in, w->attn_norm, n, d, c->rms_eps);
  if (!again || s->recompute != RG_RECOMPUTE_MATMULS) {
    if (attention(s, l, n, &A, mode) < 0) return -1;
  }
  rg_op_matmul(be, a->tmp, A.att, n, w->wo, NULL);
  rg_lora_forward(s->w, &w->lora[LORA_O], a->tmp, A.att, n, a->lora_u);
  if (s->ablate_on) rg_op_ablate(be, a->tmp, n, d, s->ablate_unit);
  if (!again && hook(s, RG_HOOK_ATTN_OUT, l, a->tmp) < 0) return -1;
  rg_op_add(be, A.x_mid, A.x_in, a->tmp, (size_t)n * d);
  if (!again && hook(s, RG_HOOK_RESID_MID, l, A.x_mid) < 0) return -1;

  rg_op_rmsnorm(be, A.xn2, A.x_mid, w->ffn_norm, n, d, c->rms_eps);
  rg_op_matmul(be, A.gate, A.xn2, n, w->w_gate, NULL);
  rg_op_matmul(be, A.up, A.xn2, n, w->w_up, NULL);
  rg_lora_forward(s->w, &w->lora[LORA_GATE], A.gate, A.xn2, n, a->lora_u);
  rg_lora_forward(s->w, &w->lora[LORA_UP], A.up, A.xn2, n, a->lora_u);
  if (again) return 0;
  rg_op_swiglu(be, h, A.gate, A.up, (size_t)n * c->d_ff);
  rg_op_matmul(be, a->tmp, h, n, w->w_down, NULL);
  rg_lora_forward(s->w, &w->lora[LORA_DOWN], a->tmp, h, n, a->lora_u);
  if (s->ablate_on) rg_op_ablate(be, a->tmp, n, d, s->ablate_unit);
  if (hook(s, RG_HOOK_MLP_OUT, l, a->tmp) < 0) return -1;
  rg_op_add(be, x_out, A.x_mid, a->tmp, (size_t)n * d);
  return hook(s, RG_HOOK_RESID_POST, l, x_out);
}

int rg_session_rerun_block(rg_session *s, int l) { return run_layer(s, l, s->tr.n, BLOCK_AGAIN); }

/* Whether the last block may run on the logit rows alone, as llama.cpp
 * does (its output-row selection): an inference pass asking for fewer logit
 * rows than it has tokens, with no hook on the last block and no sequence
 * parallelism. Only the keys and values (for the cache) need every token.
 * A prefill of 16 x 128 tokens for the last position's logits skips 94% of
 * the last block's products: 3% of SmolLM2's 30 blocks. */
static bool last_block_on_rows(const rg_session *s, int n, int n_logits) {
  const int last = s->cfg.n_layers - 1;
  return !s->train && !s->sp && n_logits < n && !(s->cap_on && s->cap.layer_sites[last]);
}

/* The last block (L) for the n_rows rows ROWS of the pass's n tokens: its
 * input interventions, keys and values for all n, then the rest for the
 * rows, gathered to the front of s->a.x with their own token metadata
 * (s->rows_batch) in place of the pass's. The block's output rows are
 * s->a.x's first n_rows. */
static int last_block_on_rows_run(rg_session *s, int l, int n, const int *seq, const int *rows, int n_rows) {
  const rg_config *c = &s->cfg;
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  if (block_input(s, l, n, a->x) < 0) return -1;
  /* keys and values of every token, for the cache */
  rg_op_rmsnorm(be, a->xn, a->x, s->w->lw[l].attn_norm, n, c->d_model, c->rms_eps);
  keys_values(s, l, n, a->xn);
  const rg_attn_desc ad = attn_desc(s);
  rg_op_kv_store(be, s->k_cache[l], s->v_cache[l], a->k, a->v, &ad);
  if (n_rows == 0) return 0;
  for (int i = 0; i < n_rows; i++) {
    s->rows_seq[i] = seq[rows[i]];
    s->rows_pos[i] = s->pos[rows[i]];
  }
  rg_buf_gather_rows(be, a->last, a->x, rows, n_rows, c->d_model);
  rg_buf_copy(be, a->x, 0, a->last, 0, (size_t)n_rows * c->d_model);
  rg_batch *pass = s->batch;
  rg_batch_set(be, s->rows_batch, NULL, s->rows_seq, s->rows_pos, n_rows);
  s->batch = s->rows_batch;
  const int rc = run_layer(s, l, n_rows, BLOCK_QUERIES);
  s->batch = pass;
  return rc;
}

/* A training session keeps what its backward needs to know of the batch:
 * its logit rows, and how many cached tokens each sequence had before it
 * (the first position of its tokens in the batch). */
static void record_batch(rg_session *s, const int *seq, int n, const int *logit_rows, int n_logits, bool whole) {
  train_state *t = &s->tr;
  memcpy(t->logit_rows, logit_rows, (size_t)n_logits * sizeof *logit_rows);
  t->n = n;
  t->n_logits = n_logits;
  t->whole = whole;
  memset(t->prefix_len, 0, (size_t)s->max_seqs * sizeof *t->prefix_len);
  for (int i = n - 1; i >= 0; i--) t->prefix_len[seq[i]] = s->pos[i]; /* ends at each sequence's first token */
}

/* Checks a batch of this rank: 0, or -1 with the error set. */
static int validate_batch(const rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows,
                          int n_logits) {
  const rg_config *c = &s->cfg;
  if (s->w->lora_rank > 0 && !s->a.lora_u)
    return rg_error_set("eval: the weights got LoRA adapters after this session was made; make a new session");
  if (n < 1 || n > s->max_tokens) return rg_error_set("eval: %d tokens, expected 1..%d", n, s->max_tokens);
  if (n_logits < 0 || n_logits > s->max_logits)
    return rg_error_set("eval: %d logit rows, expected 0..%d", n_logits, s->max_logits);
  for (int i = 0; i < n; i++) {
    if (seq[i] < 0 || seq[i] >= s->max_seqs)
      return rg_error_set("eval: sequence id %d out of range [0, %d)", seq[i], s->max_seqs);
    if (ids[i] < 0 || ids[i] >= c->vocab_size)
      return rg_error_set("eval: token id %d out of range [0, %d)", (int)ids[i], c->vocab_size);
  }
  for (int i = 0; i < n_logits; i++)
    if (logit_rows[i] < 0 || logit_rows[i] >= n)
      return rg_error_set("eval: logit row %d out of range [0, %d)", logit_rows[i], n);
  return 0;
}

/* Gives the batch's tokens their positions (each sequence continues from
 * its cached length; with sequence parallelism, after the tokens of the
 * ranks before this one) or refuses it; VALID is this rank's own verdict.
 * Returns 0, or -1 with the error set and nothing assigned. */
static int assign_positions(rg_session *s, const int *seq, int n, bool valid) {
  if (s->sp) return rg_sp_positions(s, seq, valid ? n : -1);
  if (!valid) return -1;
  for (int i = 0; i < n; i++) s->pos[i] = s->seq_len[seq[i]]++;
  for (int i = 0; i < n; i++)
    if (s->pos[i] >= s->max_ctx) {
      for (int j = 0; j < n; j++) s->seq_len[seq[j]]--;
      return rg_error_set("eval: sequence %d would exceed max_ctx %d", seq[i], s->max_ctx);
    }
  return 0;
}

/* Takes back the positions of a pass that failed. */
static void unassign_positions(rg_session *s, const int *seq, int n) {
  if (s->sp) rg_sp_unassign(s);
  else
    for (int j = 0; j < n; j++) s->seq_len[seq[j]]--;
}

/* Validates a batch, assigns positions, runs it through blocks FIRST..
 * (block FIRST's input is X_IN when FIRST > 0, else the embeddings) and
 * leaves the final-norm logits of logit_rows in s->a.logits. Nothing is
 * appended on error. */
static int forward_pass(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows, int n_logits,
                        int first, const float *x_in) {
  const rg_config *c = &s->cfg;
  const bool valid = validate_batch(s, ids, seq, n, logit_rows, n_logits) == 0;
  bool whole = true; /* every sequence starts in this batch (for backward) */
  for (int i = 0; valid && i < n; i++) whole = whole && s->seq_len[seq[i]] == 0;
  if (assign_positions(s, seq, n, valid) < 0) return -1;
  rg_backend *be = s->be;
  rg_batch_set(be, s->batch, ids, seq, s->pos, n);
  select_hooked_rows(s, seq, n);
  if (first == 0) rg_op_embed(be, s->train ? s->tr.saved[0].x_in : s->a.x, s->w->tok_embd, s->batch);
  else rg_buf_upload(be, s->a.x, 0, x_in, (size_t)n * c->d_model); /* inference: every block reads s->a.x */
  const int last = c->n_layers - 1;
  const bool on_rows = last_block_on_rows(s, n, n_logits);
  int rc = 0;
  for (int l = first; rc == 0 && l < last; l++) rc = run_layer(s, l, n, BLOCK_PASS);
  if (rc == 0)
    rc = on_rows ? last_block_on_rows_run(s, last, n, seq, logit_rows, n_logits) : run_layer(s, last, n, BLOCK_PASS);
  if (s->train) s->tr.have_dlogits = false; /* the batch changed: an earlier loss no longer applies */
  if (rc == 0 && s->train) record_batch(s, seq, n, logit_rows, n_logits, whole);
  if (rc == 0 && n_logits > 0) {
    /* on_rows: the last block left the logit rows at the front of s->a.x */
    if (on_rows) rg_op_rmsnorm(be, s->a.last, s->a.x, s->w->out_norm, n_logits, c->d_model, c->rms_eps);
    else {
      rg_buf_gather_rows(be, s->a.last, final_output(s), logit_rows, n_logits, c->d_model);
      rg_op_rmsnorm(be, s->a.last, s->a.last, s->w->out_norm, n_logits, c->d_model, c->rms_eps);
    }
    rg_op_matmul(be, s->a.logits, s->a.last, n_logits, s->w->lm_head, NULL);
  }
  if (rc == 0) rc = rg_backend_status(be);
  if (rc < 0) { /* a failed pass leaves the cache as it was */
    unassign_positions(s, seq, n);
    return rg_error_prefix("eval");
  }
  return 0;
}

int rg_session_eval(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows, int n_logits,
                    float *logits) {
  if (forward_pass(s, ids, seq, n, logit_rows, n_logits, 0, NULL) < 0) return -1;
  if (n_logits > 0 && logits && rg_buf_download(s->be, s->a.logits, 0, logits, (size_t)n_logits * s->cfg.vocab_size) < 0)
    return rg_error_prefix("eval");
  return 0;
}

int rg_session_eval_from(rg_session *s, int layer, const float *x_in, const int32_t *ids, const int *seq, int n,
                         const int *logit_rows, int n_logits, float *logits) {
  if (s->train) return rg_error_set("eval: a training session runs every block");
  if (layer < 0 || layer >= s->cfg.n_layers)
    return rg_error_set("eval: start layer %d outside [0, %d)", layer, s->cfg.n_layers);
  if (forward_pass(s, ids, seq, n, logit_rows, n_logits, layer, x_in) < 0) return -1;
  if (n_logits > 0 && logits && rg_buf_download(s->be, s->a.logits, 0, logits, (size_t)n_logits * s->cfg.vocab_size) < 0)
    return rg_error_prefix("eval");
  return 0;
}

int rg_session_eval_ce(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows,
                       const int32_t *targets, int n_logits, float *losses) {
  const int V = s->cfg.vocab_size;
  if (n_logits < 1) return rg_error_set("eval: a loss needs at least one logit row");
  for (int r = 0; r < n_logits; r++)
    if (targets[r] < 0 || targets[r] >= V) return rg_error_set("eval: target %d out of range [0, %d)", (int)targets[r], V);
  if (forward_pass(s, ids, seq, n, logit_rows, n_logits, 0, NULL) < 0) return -1;
  rg_op_cross_entropy(s->be, s->a.losses, NULL, s->a.logits, targets, NULL, n_logits, V);
  if (rg_buf_download(s->be, s->a.losses, 0, losses, (size_t)n_logits) < 0) return rg_error_prefix("eval");
  return 0;
}

int rg_session_prefill(rg_session *s, const int32_t *const *prompts, const int *lens, int n, float *logits) {
  if (n < 1 || n > s->max_seqs || n > s->max_logits)
    return rg_error_set("prefill: %d prompts, expected 1..%d", n, s->max_seqs < s->max_logits ? s->max_seqs : s->max_logits);
  for (int i = 0; i < n; i++)
    if (lens[i] < 1 || lens[i] > s->max_ctx)
      return rg_error_set("prefill: prompt %d has %d tokens, expected 1..%d", i, lens[i], s->max_ctx);
  for (int i = 0; i < n; i++) s->seq_len[i] = 0;
  /* Walk the concatenation of all prompts in chunks of max_tokens; a chunk
   * asks for the logits of the prompts that end inside it, which are
   * consecutive, so they land at logits[first_ending_prompt]. */
  int p = 0, off = 0;
  const size_t V = (size_t)s->cfg.vocab_size;
  while (p < n) {
    int nt = 0, nl = 0, first = -1;
    while (p < n && nt < s->max_tokens) {
      int take = lens[p] - off < s->max_tokens - nt ? lens[p] - off : s->max_tokens - nt;
      for (int j = 0; j < take; j++) {
        s->chunk_ids[nt + j] = prompts[p][off + j];
        s->chunk_seq[nt + j] = p;
      }
      nt += take;
      off += take;
      if (off == lens[p]) {
        if (first < 0) first = p;
        s->rows[nl++] = nt - 1;
        p++;
        off = 0;
      }
    }
    if (rg_session_eval(s, s->chunk_ids, s->chunk_seq, nt, s->rows, nl, nl ? logits + (size_t)first * V : NULL) < 0)
      return rg_error_prefix("prefill");
  }
  return 0;
}

int rg_session_decode(rg_session *s, const int *seq, const int32_t *tokens, int n, float *logits) {
  if (n < 1 || n > s->max_logits || n > s->max_tokens)
    return rg_error_set("decode: %d sequences, expected 1..%d", n, s->max_logits);
  for (int i = 0; i < n; i++) s->rows[i] = i;
  return rg_session_eval(s, tokens, seq, n, s->rows, n, logits);
}

int rg_session_embedding_products(rg_session *s, const float *x, int n, float *out) {
  if (n < 1 || n > s->max_logits) return rg_error_set("embedding products: %d rows, expected 1..%d", n, s->max_logits);
  rg_buf_upload(s->be, s->a.last, 0, x, (size_t)n * s->cfg.d_model);
  rg_op_matmul(s->be, s->a.logits, s->a.last, n, s->w->tok_embd, NULL);
  return rg_buf_download(s->be, s->a.logits, 0, out, (size_t)n * s->cfg.vocab_size);
}
