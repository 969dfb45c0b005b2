/* forward.c: the Llama-family decoder on top of the backend operations.
 *
 * Per block (TransformerLens site names in brackets):
 *   x = x [ablate] [+ c r]                    -> resid_pre
 *   a = o_proj(attn(rope(q), rope(k), v))     -> attn_out   [ablate]
 *   x = x + a                                 -> resid_mid
 *   f = down(silu(gate(n(x))) * up(n(x)))     -> mlp_out    [ablate]
 *   x = x + f                                 -> resid_post
 * Everything on activations goes through backend ops on backend buffers;
 * the host side only validates the batch, computes positions and RoPE
 * frequencies, and hands captured rows to hooks.
 */
#include "model/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/session_internal.h"
#include "util/error.h"

enum { DEFAULT_BATCH_TOKENS = 512 };

/* ---------------------------------------------------------------- setup */

static int check_shape(const rg_tensor *t, const char *what, int layer, int64_t cols, int64_t rows) {
  if (!t) return rg_error_set("layer %d: missing %s weight", layer, what);
  if (t->ne[0] != cols || rg_tensor_nrows(t) != rows)
    return rg_error_set("%s: shape [%lld, %lld], expected [%lld, %lld] for %s", t->name ? t->name : what,
                        (long long)t->ne[0], (long long)rg_tensor_nrows(t), (long long)cols, (long long)rows, what);
  return 0;
}

/* Prepares T after checking its shape; NULL (error set) on failure. */
static rg_bweight *prep(rg_session *s, const rg_tensor *t, const char *what, int layer, int64_t cols, int64_t rows) {
  if (check_shape(t, what, layer, cols, rows) < 0) return NULL;
  return rg_backend_weight(s->be, t);
}

static size_t matrix_f32_bytes(const rg_model *m) {
  size_t total = 0;
  for (int l = 0; l < m->cfg.n_layers; l++) {
    const rg_layer_weights *L = &m->layers[l];
    const rg_tensor *ts[] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
      if (ts[i]) total += (size_t)rg_tensor_nelems(ts[i]) * sizeof(float);
  }
  if (m->tok_embd) total += (size_t)rg_tensor_nelems(m->tok_embd) * sizeof(float);
  if (m->lm_head && m->lm_head != m->tok_embd) total += (size_t)rg_tensor_nelems(m->lm_head) * sizeof(float);
  return total;
}

/* RoPE frequencies as transformers computes them (float32), with linear or
 * Llama-3.1 scaling, or GGUF rope_freqs divisors. */
static int rope_frequencies(rg_session *s) {
  const rg_config *c = &s->cfg;
  const int half = c->head_dim / 2;
  s->inv_freq = malloc((size_t)half * sizeof(float));
  if (!s->inv_freq) return rg_error_set("session: out of memory");
  float divisors[RG_MAX_HEAD_DIM / 2];
  const rg_tensor *rf = s->m->rope_freqs;
  if (rf) {
    if (rg_tensor_nelems(rf) != half) return rg_error_set("rope_freqs: %lld values, expected %d", (long long)rg_tensor_nelems(rf), half);
    if (rg_dequantize_row(rf->type, rf->data, divisors, half) < 0) return rg_error_prefix("rope_freqs");
  }
  for (int i = 0; i < half; i++) {
    float inv = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
    if (rf) {
      inv /= divisors[i];
    } else if (c->rope_scaling == RG_ROPE_SCALING_LINEAR && c->rope_factor > 0) {
      inv /= c->rope_factor;
    } else if (c->rope_scaling == RG_ROPE_SCALING_LLAMA3) {
      /* transformers _compute_llama3_parameters */
      const double factor = c->rope_factor, lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
      const double old_ctx = c->rope_orig_max_ctx;
      const double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
      const double wavelen = 2 * M_PI / inv;
      if (wavelen > low_wavelen) {
        inv = (float)(inv / factor);
      } else if (wavelen >= high_wavelen) {
        double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        inv = (float)((1 - smooth) * inv / factor + smooth * inv);
      }
    }
    s->inv_freq[i] = inv;
  }
  return 0;
}

static int validate_config(const rg_model *m) {
  const rg_config *c = &m->cfg;
  const char *p = m->path ? m->path : "model";
  if (c->n_layers <= 0 || c->d_model <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->d_ff <= 0 ||
      c->vocab_size <= 0)
    return rg_error_set("%s: config has a non-positive size", p);
  if (c->n_heads % c->n_kv_heads != 0)
    return rg_error_set("%s: %d heads is not a multiple of %d kv heads", p, c->n_heads, c->n_kv_heads);
  if (c->head_dim <= 0 || c->head_dim % 2 || c->head_dim > RG_MAX_HEAD_DIM)
    return rg_error_set("%s: head_dim %d is not an even number <= %d", p, c->head_dim, RG_MAX_HEAD_DIM);
  if (!(c->rms_eps > 0) || !(c->rope_theta > 0)) return rg_error_set("%s: bad rms_eps or rope_theta", p);
  if (!m->layers || !m->tok_embd || !m->out_norm || !m->lm_head) return rg_error_set("%s: model has missing weights", p);
  return 0;
}

static int prepare_weights(rg_session *s) {
  const rg_config *c = &s->cfg;
  const int64_t d = c->d_model, qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
  s->lw = calloc((size_t)c->n_layers, sizeof *s->lw);
  if (!s->lw) return rg_error_set("session: out of memory");
  for (int l = 0; l < c->n_layers; l++) {
    const rg_layer_weights *L = &s->m->layers[l];
    layer_w *w = &s->lw[l];
    if (!(w->attn_norm = prep(s, L->attn_norm, "attn_norm", l, d, 1))) return -1;
    if (!(w->wq = prep(s, L->wq, "q_proj", l, d, qd))) return -1;
    if (!(w->wk = prep(s, L->wk, "k_proj", l, d, kvd))) return -1;
    if (!(w->wv = prep(s, L->wv, "v_proj", l, d, kvd))) return -1;
    if (!(w->wo = prep(s, L->wo, "o_proj", l, qd, d))) return -1;
    if (c->attn_qkv_bias || L->bq) {
      if (!(w->bq = prep(s, L->bq, "q_proj bias", l, qd, 1))) return -1;
      if (!(w->bk = prep(s, L->bk, "k_proj bias", l, kvd, 1))) return -1;
      if (!(w->bv = prep(s, L->bv, "v_proj bias", l, kvd, 1))) return -1;
    }
    if (!(w->ffn_norm = prep(s, L->ffn_norm, "ffn_norm", l, d, 1))) return -1;
    if (!(w->w_gate = prep(s, L->w_gate, "gate_proj", l, d, c->d_ff))) return -1;
    if (!(w->w_up = prep(s, L->w_up, "up_proj", l, d, c->d_ff))) return -1;
    if (!(w->w_down = prep(s, L->w_down, "down_proj", l, c->d_ff, d))) return -1;
  }
  if (!(s->tok_embd = prep(s, s->m->tok_embd, "token embedding", -1, d, c->vocab_size))) return -1;
  if (!(s->out_norm = prep(s, s->m->out_norm, "output norm", -1, d, 1))) return -1;
  if (s->m->lm_head == s->m->tok_embd)
    s->lm_head = s->tok_embd;
  else if (!(s->lm_head = prep(s, s->m->lm_head, "lm_head", -1, d, c->vocab_size)))
    return -1;
  return 0;
}

static int alloc_buffers(rg_session *s) {
  const rg_config *c = &s->cfg;
  const size_t T = (size_t)s->max_tokens, R = (size_t)s->max_logits, d = (size_t)c->d_model;
  const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  if (!(a->x = rg_buf_new(be, T * d)) || !(a->xn = rg_buf_new(be, T * d)) || !(a->q = rg_buf_new(be, T * qd)) ||
      !(a->k = rg_buf_new(be, T * kvd)) || !(a->v = rg_buf_new(be, T * kvd)) || !(a->att = rg_buf_new(be, T * qd)) ||
      !(a->tmp = rg_buf_new(be, T * d)) || !(a->gate = rg_buf_new(be, T * c->d_ff)) ||
      !(a->up = rg_buf_new(be, T * c->d_ff)) || !(a->last = rg_buf_new(be, R * d)) ||
      !(a->logits = rg_buf_new(be, R * c->vocab_size)) || !(s->ablate_unit = rg_buf_new(be, d)) ||
      !(s->actadd_vec = rg_buf_new(be, d)))
    return -1;
  s->k_cache = calloc((size_t)c->n_layers, sizeof *s->k_cache);
  s->v_cache = calloc((size_t)c->n_layers, sizeof *s->v_cache);
  if (!s->k_cache || !s->v_cache) return rg_error_set("session: out of memory");
  const size_t cache = (size_t)s->max_seqs * s->max_ctx * kvd;
  for (int l = 0; l < c->n_layers; l++)
    if (!(s->k_cache[l] = rg_buf_new(be, cache)) || !(s->v_cache[l] = rg_buf_new(be, cache)))
      return rg_error_prefix("KV cache for %d x %d tokens", s->max_seqs, s->max_ctx);
  const size_t nrows = T > R ? T : R;
  s->seq_len = calloc((size_t)s->max_seqs, sizeof *s->seq_len);
  s->pos = malloc(T * sizeof *s->pos);
  s->chunk_seq = malloc(T * sizeof *s->chunk_seq);
  s->chunk_ids = malloc(T * sizeof *s->chunk_ids);
  s->rows = malloc(nrows * sizeof *s->rows);
  s->hook_rows = malloc(T * d * sizeof *s->hook_rows);
  if (!s->seq_len || !s->pos || !s->chunk_seq || !s->chunk_ids || !s->rows || !s->hook_rows)
    return rg_error_set("session: out of memory");
  return 0;
}

rg_session *rg_session_new(const rg_model *m, int max_seqs, int max_ctx, const rg_session_opts *opts) {
  rg_session_opts o = opts ? *opts : (rg_session_opts){0};
  if (validate_config(m) < 0) return NULL;
  if (max_seqs < 1 || max_ctx < 1) {
    rg_error_set("session: max_seqs %d and max_ctx %d must be positive", max_seqs, max_ctx);
    return NULL;
  }
  rg_session *s = calloc(1, sizeof *s);
  if (!s) {
    rg_error_set("session: out of memory");
    return NULL;
  }
  s->m = m;
  s->cfg = m->cfg;
  s->max_seqs = max_seqs;
  s->max_ctx = max_ctx;
  long long cap = (long long)max_seqs * max_ctx;
  s->max_tokens = o.max_batch_tokens > 0 ? o.max_batch_tokens : DEFAULT_BATCH_TOKENS;
  if (s->max_tokens > cap) s->max_tokens = (int)cap;
  s->max_logits = o.max_logit_rows > 0 ? o.max_logit_rows : max_seqs;
  rg_backend_opts bo = {.threads = o.threads, .weight_mode = o.weight_mode, .f32_weight_bytes = matrix_f32_bytes(m)};
  s->train = o.train;
  if (!(s->be = rg_backend_cpu_new(&bo)) || prepare_weights(s) < 0 || rope_frequencies(s) < 0 ||
      alloc_buffers(s) < 0 || (s->train && rg_session_train_alloc(s) < 0)) {
    rg_session_free(s);
    return NULL;
  }
  return s;
}

void rg_session_free(rg_session *s) {
  if (!s) return;
  rg_backend *be = s->be;
  if (be) {
    rg_session_train_free(s);
    if (s->lw)
      for (int l = 0; l < s->cfg.n_layers; l++) {
        layer_w *w = &s->lw[l];
        rg_bweight *ws[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->bq, w->bk, w->bv, w->ffn_norm, w->w_gate,
                            w->w_up, w->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) rg_bweight_free(be, ws[i]);
      }
    if (s->lm_head != s->tok_embd) rg_bweight_free(be, s->lm_head);
    rg_bweight_free(be, s->tok_embd);
    rg_bweight_free(be, s->out_norm);
    rg_buf *bufs[] = {s->a.x, s->a.xn, s->a.q, s->a.k, s->a.v, s->a.att, s->a.tmp, s->a.gate, s->a.up,
                      s->a.last, s->a.logits, s->ablate_unit, s->actadd_vec};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
    for (int l = 0; l < s->cfg.n_layers; l++) {
      if (s->k_cache) rg_buf_free(be, s->k_cache[l]);
      if (s->v_cache) rg_buf_free(be, s->v_cache[l]);
    }
    rg_backend_free(be);
  }
  free(s->lw);
  free(s->k_cache);
  free(s->v_cache);
  free(s->inv_freq);
  free(s->seq_len);
  free(s->pos);
  free(s->chunk_seq);
  free(s->chunk_ids);
  free(s->rows);
  free(s->hook_rows);
  free(s);
}

const rg_model *rg_session_model(const rg_session *s) { return s->m; }
int rg_session_vocab(const rg_session *s) { return s->cfg.vocab_size; }
int rg_session_max_seqs(const rg_session *s) { return s->max_seqs; }
int rg_session_max_ctx(const rg_session *s) { return s->max_ctx; }
int rg_session_max_batch_tokens(const rg_session *s) { return s->max_tokens; }
int rg_session_max_logit_rows(const rg_session *s) { return s->max_logits; }
int rg_session_seq_len(const rg_session *s, int seq) {
  return seq >= 0 && seq < s->max_seqs ? s->seq_len[seq] : 0;
}

size_t rg_session_weight_bytes(const rg_session *s) {
  size_t total = 0;
  for (int l = 0; l < s->cfg.n_layers; l++) {
    const layer_w *w = &s->lw[l];
    const rg_bweight *ws[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->bq, w->bk, w->bv, w->ffn_norm, w->w_gate,
                              w->w_up, w->w_down};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
      if (ws[i]) total += rg_bweight_bytes(s->be, ws[i]);
  }
  total += rg_bweight_bytes(s->be, s->tok_embd) + rg_bweight_bytes(s->be, s->out_norm);
  if (s->lm_head != s->tok_embd) total += rg_bweight_bytes(s->be, s->lm_head);
  return total;
}

void rg_session_reset(rg_session *s) { memset(s->seq_len, 0, (size_t)s->max_seqs * sizeof *s->seq_len); }

void rg_session_drop(rg_session *s, int seq) {
  if (seq >= 0 && seq < s->max_seqs) s->seq_len[seq] = 0;
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

static void hook(rg_session *s, rg_hook_site site, int layer, const rg_buf *x, int n, const int *seq) {
  if (!s->cap_on || !(s->cap.layer_sites[layer] & RG_HOOK_BIT(site))) return;
  const int d = s->cfg.d_model;
  rg_buf_download(s->be, x, 0, s->hook_rows, (size_t)n * d);
  s->cap.fn(s->cap.user, site, layer, s->hook_rows, n, d, seq, s->pos);
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

static void run_layer(rg_session *s, int l, int n, const int *seq) {
  const rg_config *c = &s->cfg;
  const layer_w *w = &s->lw[l];
  act_bufs *a = &s->a;
  rg_backend *be = s->be;
  const int d = c->d_model;
  const rg_attn_desc ad = {.n_tokens = n, .seq = seq, .pos = s->pos, .n_heads = c->n_heads,
                           .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                           .window = c->sliding_window, .max_ctx = s->max_ctx};
  rg_buf *x_out;
  const layer_acts A = block_buffers(s, l, &x_out);
  /* silu(gate) * up: in place in inference, kept apart for the backward */
  rg_buf *h = s->train ? s->tr.h : A.gate;

  if (s->ablate_on) rg_op_ablate(be, A.x_in, n, d, s->ablate_unit);
  if (s->actadd_on && l == s->actadd_layer) rg_op_add_scaled(be, A.x_in, n, d, s->actadd_vec, s->actadd_coeff);
  hook(s, RG_HOOK_RESID_PRE, l, A.x_in, n, seq);

  rg_op_rmsnorm(be, A.xn1, A.x_in, w->attn_norm, n, d, c->rms_eps);
  rg_op_matmul(be, A.q, A.xn1, n, w->wq, w->bq);
  rg_op_matmul(be, a->k, A.xn1, n, w->wk, w->bk);
  rg_op_matmul(be, a->v, A.xn1, n, w->wv, w->bv);
  rg_op_rope(be, A.q, n, c->n_heads, c->head_dim, s->pos, s->inv_freq, c->rope_adjacent_pairs);
  rg_op_rope(be, a->k, n, c->n_kv_heads, c->head_dim, s->pos, s->inv_freq, c->rope_adjacent_pairs);
  rg_op_kv_store(be, s->k_cache[l], s->v_cache[l], a->k, a->v, &ad);
  rg_op_attention(be, A.att, A.q, s->k_cache[l], s->v_cache[l], &ad);
  rg_op_matmul(be, a->tmp, A.att, n, w->wo, NULL);
  if (s->ablate_on) rg_op_ablate(be, a->tmp, n, d, s->ablate_unit);
  hook(s, RG_HOOK_ATTN_OUT, l, a->tmp, n, seq);
  rg_op_add(be, A.x_mid, A.x_in, a->tmp, (size_t)n * d);
  hook(s, RG_HOOK_RESID_MID, l, A.x_mid, n, seq);

  rg_op_rmsnorm(be, A.xn2, A.x_mid, w->ffn_norm, n, d, c->rms_eps);
  rg_op_matmul(be, A.gate, A.xn2, n, w->w_gate, NULL);
  rg_op_matmul(be, A.up, A.xn2, n, w->w_up, NULL);
  rg_op_swiglu(be, h, A.gate, A.up, (size_t)n * c->d_ff);
  rg_op_matmul(be, a->tmp, h, n, w->w_down, NULL);
  if (s->ablate_on) rg_op_ablate(be, a->tmp, n, d, s->ablate_unit);
  hook(s, RG_HOOK_MLP_OUT, l, a->tmp, n, seq);
  rg_op_add(be, x_out, A.x_mid, a->tmp, (size_t)n * d);
  hook(s, RG_HOOK_RESID_POST, l, x_out, n, seq);
}

/* A training session keeps what its backward needs to know of the batch. */
static void record_batch(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows,
                         int n_logits, bool whole) {
  train_state *t = &s->tr;
  memcpy(t->ids, ids, (size_t)n * sizeof *ids);
  memcpy(t->seq, seq, (size_t)n * sizeof *seq);
  memcpy(t->logit_rows, logit_rows, (size_t)n_logits * sizeof *logit_rows);
  t->n = n;
  t->n_logits = n_logits;
  t->whole = whole;
  t->have_dlogits = false;
}

int rg_session_eval(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows, int n_logits,
                    float *logits) {
  const rg_config *c = &s->cfg;
  if (n < 1 || n > s->max_tokens) return rg_error_set("eval: %d tokens, expected 1..%d", n, s->max_tokens);
  if (n_logits < 0 || n_logits > s->max_logits || (n_logits > 0 && !logits))
    return rg_error_set("eval: %d logit rows, expected 0..%d", n_logits, s->max_logits);
  /* Validate everything before touching the cache, and assign positions:
   * each sequence continues from its cached length. */
  for (int i = 0; i < n; i++) {
    if (seq[i] < 0 || seq[i] >= s->max_seqs)
      return rg_error_set("eval: sequence id %d out of range [0, %d)", seq[i], s->max_seqs);
    if (ids[i] < 0 || ids[i] >= c->vocab_size)
      return rg_error_set("eval: token id %d out of range [0, %d)", (int)ids[i], c->vocab_size);
  }
  bool whole = true; /* every sequence starts in this batch (for backward) */
  for (int i = 0; i < n; i++) whole = whole && s->seq_len[seq[i]] == 0;
  for (int i = 0; i < n; i++) s->pos[i] = s->seq_len[seq[i]]++;
  for (int i = 0; i < n; i++)
    if (s->pos[i] >= s->max_ctx) {
      for (int j = 0; j < n; j++) s->seq_len[seq[j]]--;
      return rg_error_set("eval: sequence %d would exceed max_ctx %d", seq[i], s->max_ctx);
    }
  for (int i = 0; i < n_logits; i++)
    if (logit_rows[i] < 0 || logit_rows[i] >= n) {
      for (int j = 0; j < n; j++) s->seq_len[seq[j]]--;
      return rg_error_set("eval: logit row %d out of range [0, %d)", logit_rows[i], n);
    }

  rg_backend *be = s->be;
  rg_op_embed(be, s->train ? s->tr.saved[0].x_in : s->a.x, s->tok_embd, ids, n);
  for (int l = 0; l < c->n_layers; l++) run_layer(s, l, n, seq);
  if (s->train) record_batch(s, ids, seq, n, logit_rows, n_logits, whole);
  if (n_logits > 0) {
    rg_buf_gather_rows(be, s->a.last, final_output(s), logit_rows, n_logits, c->d_model);
    rg_op_rmsnorm(be, s->a.last, s->a.last, s->out_norm, n_logits, c->d_model, c->rms_eps);
    rg_op_matmul(be, s->a.logits, s->a.last, n_logits, s->lm_head, NULL);
    rg_buf_download(be, s->a.logits, 0, logits, (size_t)n_logits * c->vocab_size);
  }
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
  rg_op_matmul(s->be, s->a.logits, s->a.last, n, s->tok_embd, NULL);
  rg_buf_download(s->be, s->a.logits, 0, out, (size_t)n * s->cfg.vocab_size);
  return 0;
}
