/* weights.c: preparing a model's tensors for a backend once (weights.h). */
#include "engine/weights.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "tensor/dtype.h"
#include "engine/weights_internal.h"
#include "util/error.h"

/* ---------------------------------------------------------------- checks */

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

static int check_shape(const rg_tensor *t, const char *what, int layer, int64_t cols, int64_t rows) {
  if (!t) return rg_error_set("layer %d: missing %s weight", layer, what);
  if (t->ne[0] != cols || rg_tensor_nrows(t) != rows)
    return rg_error_set("%s: shape [%lld, %lld], expected [%lld, %lld] for %s", t->name ? t->name : what,
                        (long long)t->ne[0], (long long)rg_tensor_nrows(t), (long long)cols, (long long)rows, what);
  return 0;
}

/* ---------------------------------------------------------------- preparing */

/* Bytes of the matrices as float32, for RG_WEIGHTS_AUTO. */
static size_t matrix_f32_bytes(const rg_model *m) {
  size_t total = 0;
  for (int l = 0; l < m->cfg.n_layers; l++) {
    const rg_layer_weights *L = &m->layers[l];
    const rg_tensor *ts[] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
      if (ts[i]) total += (size_t)rg_tensor_nelems(ts[i]) * sizeof(float);
  }
  total += (size_t)rg_tensor_nelems(m->tok_embd) * sizeof(float);
  if (m->lm_head != m->tok_embd) total += (size_t)rg_tensor_nelems(m->lm_head) * sizeof(float);
  return total;
}

/* Measured on SmolLM2-135M (2 threads, 16 x 128 prefill) an f32 copy is
 * ~15% faster than tiles (90 vs 79 GFLOP/s): take it when it fits easily. */
static rg_weight_form choose_form(const rg_model *m, rg_weight_mode mode) {
  if (mode == RG_WEIGHTS_F32) return RG_FORM_F32;
  if (mode == RG_WEIGHTS_TILED) return RG_FORM_FILE;
  if (mode == RG_WEIGHTS_TILED_Q8) return RG_FORM_FILE_Q8;
  const double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  return (double)matrix_f32_bytes(m) < 0.25 * ram ? RG_FORM_F32 : RG_FORM_FILE;
}

/* Prepares T after checking its shape and lists it as a model tensor; NULL
 * (error set) on failure. */
static rg_bweight *prep(rg_weights *w, rg_weight_form form, const rg_tensor *t, const char *what, int layer,
                        int64_t cols, int64_t rows) {
  if (check_shape(t, what, layer, cols, rows) < 0) return NULL;
  rg_bweight *bw = rg_backend_weight(w->be, t, form);
  if (bw) {
    w->model_tensors[w->n_model] = t;
    w->model_params[w->n_model++] = bw;
  }
  return bw;
}

static int prepare(rg_weights *w, rg_weight_form form) {
  const rg_config *c = &w->m->cfg;
  const int64_t d = c->d_model, qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
  const int max_params = 12 * c->n_layers + 3;
  w->lw = calloc((size_t)c->n_layers, sizeof *w->lw);
  w->model_tensors = calloc((size_t)max_params, sizeof *w->model_tensors);
  w->model_params = calloc((size_t)max_params, sizeof *w->model_params);
  if (!w->lw || !w->model_tensors || !w->model_params) return rg_error_set("weights: out of memory");
  for (int l = 0; l < c->n_layers; l++) {
    const rg_layer_weights *L = &w->m->layers[l];
    layer_w *lw = &w->lw[l];
    if (!(lw->attn_norm = prep(w, form, L->attn_norm, "attn_norm", l, d, 1))) return -1;
    if (!(lw->wq = prep(w, form, L->wq, "q_proj", l, d, qd))) return -1;
    if (!(lw->wk = prep(w, form, L->wk, "k_proj", l, d, kvd))) return -1;
    if (!(lw->wv = prep(w, form, L->wv, "v_proj", l, d, kvd))) return -1;
    if (!(lw->wo = prep(w, form, L->wo, "o_proj", l, qd, d))) return -1;
    if (c->attn_qkv_bias || L->bq) {
      if (!(lw->bq = prep(w, form, L->bq, "q_proj bias", l, qd, 1))) return -1;
      if (!(lw->bk = prep(w, form, L->bk, "k_proj bias", l, kvd, 1))) return -1;
      if (!(lw->bv = prep(w, form, L->bv, "v_proj bias", l, kvd, 1))) return -1;
    }
    if (!(lw->ffn_norm = prep(w, form, L->ffn_norm, "ffn_norm", l, d, 1))) return -1;
    if (!(lw->w_gate = prep(w, form, L->w_gate, "gate_proj", l, d, c->d_ff))) return -1;
    if (!(lw->w_up = prep(w, form, L->w_up, "up_proj", l, d, c->d_ff))) return -1;
    if (!(lw->w_down = prep(w, form, L->w_down, "down_proj", l, c->d_ff, d))) return -1;
  }
  if (!(w->tok_embd = prep(w, form, w->m->tok_embd, "token embedding", -1, d, c->vocab_size))) return -1;
  if (!(w->out_norm = prep(w, form, w->m->out_norm, "output norm", -1, d, 1))) return -1;
  if (w->m->lm_head == w->m->tok_embd)
    w->lm_head = w->tok_embd;
  else if (!(w->lm_head = prep(w, form, w->m->lm_head, "lm_head", -1, d, c->vocab_size)))
    return -1;
  /* without adapters the model's tensors are the parameters */
  w->n_params = w->n_model;
  w->tensors = w->model_tensors;
  w->params = w->model_params;
  return 0;
}

/* RoPE frequencies as transformers computes them (float32), with linear or
 * Llama-3.1 scaling, or GGUF rope_freqs divisors. */
static int rope_frequencies(rg_weights *w) {
  const rg_config *c = &w->m->cfg;
  const int half = c->head_dim / 2;
  float inv_freq[RG_MAX_HEAD_DIM / 2], divisors[RG_MAX_HEAD_DIM / 2];
  const rg_tensor *rf = w->m->rope_freqs;
  if (rf) {
    if (rg_tensor_nelems(rf) != half)
      return rg_error_set("rope_freqs: %lld values, expected %d", (long long)rg_tensor_nelems(rf), half);
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
    inv_freq[i] = inv;
  }
  if (!(w->inv_freq = rg_buf_new(w->be, (size_t)half))) return -1;
  rg_buf_upload(w->be, w->inv_freq, 0, inv_freq, (size_t)half);
  return 0;
}

rg_weights *rg_weights_new(const rg_model *m, rg_backend *be, rg_weight_mode mode) {
  if (validate_config(m) < 0) return NULL;
  rg_weights *w = calloc(1, sizeof *w);
  if (!w) {
    rg_error_set("weights: out of memory");
    return NULL;
  }
  w->m = m;
  w->be = be;
  if (prepare(w, choose_form(m, mode)) < 0 || rope_frequencies(w) < 0) {
    rg_weights_free(w);
    return NULL;
  }
  return w;
}

rg_weights *rg_weights_open(const rg_model *m, const rg_backend_opts *bo, rg_weight_mode mode) {
  rg_backend *be = rg_backend_new(bo);
  rg_weights *w = be ? rg_weights_new(m, be, mode) : NULL;
  if (!w) {
    rg_backend_free(be);
    return NULL;
  }
  w->owns_backend = true;
  return w;
}

void rg_weights_free(rg_weights *w) {
  if (!w) return;
  rg_lora_free(w);
  for (int i = 0; i < w->n_model; i++) rg_bweight_free(w->be, w->model_params[i]);
  rg_buf_free(w->be, w->inv_freq);
  if (w->owns_backend) rg_backend_free(w->be);
  free(w->lw);
  free(w->model_tensors);
  free(w->model_params);
  free(w);
}

const rg_model *rg_weights_model(const rg_weights *w) { return w->m; }
rg_backend *rg_weights_backend(const rg_weights *w) { return w->be; }

size_t rg_weights_bytes(const rg_weights *w) {
  size_t total = 0;
  for (int i = 0; i < w->n_model; i++) total += rg_bweight_bytes(w->be, w->model_params[i]);
  if (w->lora_rank > 0) /* the adapters */
    for (int i = 0; i < w->n_params; i++) total += rg_bweight_bytes(w->be, w->params[i]);
  return total;
}

int rg_weights_make_trainable(rg_weights *w) {
  for (int i = 0; i < w->n_params; i++)
    if (rg_bweight_make_f32(w->be, w->params[i]) < 0) return rg_error_prefix("trainable weights");
  w->trainable = true;
  return 0;
}

bool rg_weights_trainable(const rg_weights *w) { return w->trainable; }
int rg_weights_count(const rg_weights *w) { return w->n_params; }
const rg_tensor *rg_weights_tensor(const rg_weights *w, int i) { return w->tensors[i]; }
rg_bweight *rg_weights_param(rg_weights *w, int i) { return w->params[i]; }
int rg_weights_param_block(const rg_weights *w, int i) {
  const rg_bweight *p = w->params[i];
  for (int l = 0; l < w->m->cfg.n_layers; l++) {
    const layer_w *L = &w->lw[l];
    const rg_bweight *const own[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv,
                                     L->ffn_norm, L->w_gate, L->w_up, L->w_down};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
      if (own[k] == p) return l;
    for (int m = 0; m < LORA_MODULES; m++)
      if (L->lora[m].a == p || L->lora[m].b == p) return l;
  }
  return -1;
}
int rg_weights_download(const rg_weights *w, int i, float *out) { return rg_bweight_download(w->be, w->params[i], out); }
int rg_weights_upload(rg_weights *w, int i, const float *in) {
  if (!w->trainable) return rg_error_set("weights: %s is not trainable", w->tensors[i]->name);
  return rg_bweight_upload(w->be, w->params[i], in);
}

int rg_weights_export_count(const rg_weights *w) { return w->n_model; }
const rg_tensor *rg_weights_export_tensor(const rg_weights *w, int i) { return w->model_tensors[i]; }
int rg_weights_export_download(const rg_weights *w, int i, float *out) {
  if (rg_bweight_download(w->be, w->model_params[i], out) < 0) return -1;
  return rg_lora_merge(w, w->model_params[i], out);
}
