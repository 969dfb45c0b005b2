/* lora.c: LoRA adapters on rg_weights (weights.h, "LoRA"): making them,
 * their share of the forward and backward passes, and merging them into
 * the exported weights.
 *
 * An adapted module computes y = x W^T (+ bias) + s (x A^T) B^T with
 * s = alpha / r, as peft's lora.Linear.forward with dropout 0 (peft
 * src/peft/tuners/lora/layer.py: result + lora_B(lora_A(x)) * scaling).
 * The pass goes through the rank-r product u = s x A^T ([n, r], small), so
 * the only extra activation is u, recomputed by the backward from the
 * module's input, which the training session keeps anyway.
 */
#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/weights_internal.h"
#include "util/error.h"
#include "util/rng.h"

/* Per module (LORA_Q ... LORA_DOWN): the short name and the path within a
 * block, whose last part is peft's target_modules name. */
static const struct {
  const char *name, *path;
} MODULES[LORA_MODULES] = {{"q", "self_attn.q_proj"}, {"k", "self_attn.k_proj"},  {"v", "self_attn.v_proj"},
                           {"o", "self_attn.o_proj"}, {"gate", "mlp.gate_proj"}, {"up", "mlp.up_proj"},
                           {"down", "mlp.down_proj"}};

static const rg_tensor *module_tensor(const rg_layer_weights *L, int m) {
  const rg_tensor *t[LORA_MODULES] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
  return t[m];
}

static const rg_bweight *module_weight(const layer_w *lw, int m) {
  const rg_bweight *bw[LORA_MODULES] = {lw->wq, lw->wk, lw->wv, lw->wo, lw->w_gate, lw->w_up, lw->w_down};
  return bw[m];
}

/* ---------------------------------------------------------------- targets */

/* The module whose short or peft name is S[0..len), or -1. */
static int module_named(const char *s, size_t len) {
  for (int m = 0; m < LORA_MODULES; m++) {
    const char *peft = strrchr(MODULES[m].path, '.') + 1;
    if ((strlen(MODULES[m].name) == len && strncmp(s, MODULES[m].name, len) == 0) ||
        (strlen(peft) == len && strncmp(s, peft, len) == 0))
      return m;
  }
  return -1;
}

int rg_lora_targets_parse(const char *list, unsigned *out) {
  unsigned bits = 0;
  for (const char *p = list;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len > 0 && isspace((unsigned char)*p)) p++, len--;
    while (len > 0 && isspace((unsigned char)p[len - 1])) len--;
    const int m = module_named(p, len);
    if (m < 0) {
      if (len == 0) return rg_error_set("lora targets '%s': an empty entry", list);
      return rg_error_set("lora targets: unknown module '%.*s' (q k v o gate up down, or q_proj ... down_proj)",
                          (int)len, p);
    }
    bits |= 1u << m;
    if (!end) break;
    p = end + 1;
  }
  *out = bits;
  return 0;
}

/* ---------------------------------------------------------------- making */

/* Frees N adapters (entries may be empty: a partly made list). */
static void free_adapters(rg_backend *be, rg_tensor *tensors, rg_bweight **params, int n) {
  for (int i = 0; tensors && params && i < n; i++) {
    rg_bweight_free(be, params[i]);
    free(tensors[i].name);
  }
  free(tensors);
  free(params);
}

/* Adapter matrix T of ROWS x COLS float32, named as peft names it, with
 * values INIT (scratch: the backend keeps its own copy, and T's data is
 * left NULL). NULL with the error set. */
static rg_bweight *new_adapter(rg_weights *w, rg_tensor *t, int layer, int m, char which, int64_t rows, int64_t cols,
                               float *init) {
  char name[96];
  snprintf(name, sizeof name, "model.layers.%d.%s.lora_%c.weight", layer, MODULES[m].path, which);
  *t = (rg_tensor){.name = strdup(name), .type = RG_F32, .n_dims = 2, .ne = {cols, rows, 1, 1}, .data = init,
                   .nbytes = (size_t)rows * (size_t)cols * sizeof(float)};
  if (!t->name) {
    rg_error_set("lora: out of memory");
    return NULL;
  }
  /* an aligned float32 tensor is viewed, not copied: make_f32 copies it */
  rg_bweight *bw = rg_backend_weight(w->be, t, RG_FORM_F32);
  if (bw && rg_bweight_make_f32(w->be, bw) < 0) {
    rg_bweight_free(w->be, bw);
    bw = NULL;
  }
  t->data = NULL;
  if (!bw) rg_error_prefix("lora: %s", name);
  return bw;
}

/* Uniform in [-bound, bound): 53 random bits of the stream. */
static float uniform(uint64_t *state, double bound) {
  const double u = (double)(rg_splitmix64(state) >> 11) * 0x1.0p-53;
  return (float)((2.0 * u - 1.0) * bound);
}

int rg_weights_add_lora(rg_weights *w, const rg_lora_opts *o, uint64_t seed) {
  const unsigned all = (1u << LORA_MODULES) - 1;
  if (w->lora_rank > 0) return rg_error_set("lora: the weights already have adapters");
  if (w->trainable)
    return rg_error_set("lora: the weights were made trainable (full fine-tuning); adapters need frozen base weights");
  if (o->rank < 1) return rg_error_set("lora: rank %d, expected >= 1", o->rank);
  if (!isfinite(o->alpha)) return rg_error_set("lora: alpha is not a finite number");
  if (o->targets == 0 || (o->targets & ~all)) return rg_error_set("lora: targets 0x%x name no module, or unknown ones", o->targets);
  const rg_config *c = &w->m->cfg;
  const int64_t r = o->rank;
  int per_layer = 0;
  int64_t largest = 0;
  for (int m = 0; m < LORA_MODULES; m++)
    if (o->targets & (1u << m)) {
      per_layer++;
      const rg_tensor *t = module_tensor(&w->m->layers[0], m);
      const int64_t side = t->ne[0] > rg_tensor_nrows(t) ? t->ne[0] : rg_tensor_nrows(t);
      if (side > largest) largest = side;
    }
  const int n = 2 * per_layer * c->n_layers;
  rg_tensor *tensors = calloc((size_t)n, sizeof *tensors);
  rg_bweight **params = calloc((size_t)n, sizeof *params);
  const rg_tensor **views = calloc((size_t)n, sizeof *views);
  float *init = malloc((size_t)(largest * r) * sizeof *init);
  int k = 0;
  if (!tensors || !params || !views || !init) {
    rg_error_set("lora: out of memory");
    goto fail;
  }
  uint64_t state = seed;
  for (int l = 0; l < c->n_layers; l++)
    for (int m = 0; m < LORA_MODULES; m++) {
      if (!(o->targets & (1u << m))) continue;
      const rg_tensor *base = module_tensor(&w->m->layers[l], m);
      const int64_t in = base->ne[0], out = rg_tensor_nrows(base);
      /* peft reset_lora_parameters: kaiming_uniform_(A, a = sqrt(5)),
       * whose bound sqrt(6 / ((1 + 5) in)) is 1 / sqrt(in); B zeros */
      for (int64_t i = 0; i < r * in; i++) init[i] = uniform(&state, 1.0 / sqrt((double)in));
      if (!(params[k] = new_adapter(w, &tensors[k], l, m, 'A', r, in, init))) goto fail;
      k++;
      memset(init, 0, (size_t)(out * r) * sizeof *init);
      if (!(params[k] = new_adapter(w, &tensors[k], l, m, 'B', out, r, init))) goto fail;
      k++;
      w->lw[l].lora[m] = (lora_pair){.a = params[k - 2], .b = params[k - 1]};
    }
  free(init);
  for (int i = 0; i < n; i++) views[i] = &tensors[i];
  w->lora_tensors = tensors;
  w->n_params = n;
  w->tensors = views;
  w->params = params;
  w->lora_rank = o->rank;
  w->lora_scale = o->alpha / (float)o->rank; /* peft: scaling = lora_alpha / r */
  w->trainable = true;
  return 0;

fail:
  for (int l = 0; l < c->n_layers; l++) memset(w->lw[l].lora, 0, sizeof w->lw[l].lora);
  free_adapters(w->be, tensors, params, n);
  free(views);
  free(init);
  return -1;
}

void rg_lora_free(rg_weights *w) {
  if (w->lora_rank == 0) return;
  free_adapters(w->be, w->lora_tensors, w->params, w->n_params);
  free(w->tensors);
  w->lora_rank = 0;
}

int rg_weights_lora_rank(const rg_weights *w) { return w->lora_rank; }

/* ---------------------------------------------------------------- the pass */

void rg_lora_forward(const rg_weights *w, const lora_pair *p, rg_buf *y, const rg_buf *x, int n, rg_buf *u) {
  if (!p->a) return;
  rg_op_matmul(w->be, u, x, n, p->a, NULL);
  rg_op_scale(w->be, u, (size_t)n * w->lora_rank, w->lora_scale);
  rg_op_matmul_add(w->be, y, u, n, p->b);
}

void rg_lora_backward(const rg_weights *w, const lora_pair *p, rg_buf *da, rg_buf *db, rg_buf *dx, const rg_buf *dy,
                      const rg_buf *x, int n, rg_buf *u, rg_buf *du) {
  if (!p->a) return;
  rg_backend *be = w->be;
  const size_t nr = (size_t)n * w->lora_rank;
  rg_op_matmul(be, u, x, n, p->a, NULL);
  rg_op_scale(be, u, nr, w->lora_scale);
  rg_buf_zero(be, du, 0, nr);
  rg_op_matmul_backward(be, du, db, NULL, dy, u, n, p->b); /* du = dy B, dB += dy^T u */
  rg_op_scale(be, du, nr, w->lora_scale);
  rg_op_matmul_backward(be, dx, da, NULL, du, x, n, p->a); /* dx += du A, dA += du^T x */
}

/* ---------------------------------------------------------------- export */

int rg_lora_merge(const rg_weights *w, const rg_bweight *bw, float *out) {
  for (int l = 0; w->lora_rank > 0 && l < w->m->cfg.n_layers; l++)
    for (int m = 0; m < LORA_MODULES; m++) {
      const lora_pair *p = &w->lw[l].lora[m];
      if (!p->a || module_weight(&w->lw[l], m) != bw) continue;
      const rg_tensor *base = module_tensor(&w->m->layers[l], m);
      const int in = (int)base->ne[0], rows = (int)rg_tensor_nrows(base), r = w->lora_rank;
      float *a = malloc((size_t)r * (size_t)in * sizeof *a), *b = malloc((size_t)rows * (size_t)r * sizeof *b);
      int rc = a && b ? 0 : rg_error_set("%s: out of memory merging its adapter", base->name);
      if (rc == 0 && (rg_bweight_download(w->be, p->a, a) < 0 || rg_bweight_download(w->be, p->b, b) < 0))
        rc = rg_error_prefix("%s: its adapter", base->name);
      /* out[rows, in] += scale * B[rows, r] . A[r, in] */
      if (rc == 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, r, w->lora_scale, b, r, a, in, 1.0f, out, in);
      free(a);
      free(b);
      return rc;
    }
  return 0;
}
