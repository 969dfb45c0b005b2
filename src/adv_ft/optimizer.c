#include "adv_ft/optimizer.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"

struct rg_optimizer {
  rg_model *m;
  rg_grads *g;
  rg_adamw *adamw;
  float **params; /* per gradient entry: the model's f32 data */
  float *host;    /* every gradient, downloaded back to back */
  size_t *offset; /* of entry i in host */
};

rg_optimizer *rg_optimizer_new(rg_model *m, rg_grads *g, const rg_adamw_hparams *h) {
  const int n = rg_grads_count(g);
  rg_optimizer *o = calloc(1, sizeof *o);
  size_t *sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
  if (!o || !sizes || !(o->params = calloc((size_t)(n ? n : 1), sizeof *o->params)) ||
      !(o->offset = malloc((size_t)(n ? n : 1) * sizeof *o->offset))) {
    free(sizes);
    rg_optimizer_free(o);
    rg_error_set("optimizer: out of memory");
    return NULL;
  }
  o->m = m;
  o->g = g;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    const rg_tensor *t = rg_grads_tensor(g, i);
    if (!(o->params[i] = rg_model_f32_data(m, t))) {
      free(sizes);
      rg_optimizer_free(o);
      rg_error_set("optimizer: %s: the model's parameters are not float32 copies (rg_model_to_f32)", t->name);
      return NULL;
    }
    sizes[i] = (size_t)rg_tensor_nelems(t);
    o->offset[i] = total;
    total += sizes[i];
  }
  o->host = malloc((total ? total : 1) * sizeof *o->host);
  o->adamw = o->host ? rg_adamw_new(h, sizes, n) : NULL;
  free(sizes);
  if (!o->adamw) {
    rg_optimizer_free(o);
    rg_error_set("optimizer: out of memory for %zu gradient floats", total);
    return NULL;
  }
  return o;
}

void rg_optimizer_free(rg_optimizer *o) {
  if (!o) return;
  rg_adamw_free(o->adamw);
  free(o->params);
  free(o->host);
  free(o->offset);
  free(o);
}

void rg_optimizer_step(rg_optimizer *o, double lr, double max_norm, double *grad_norm) {
  const int n = rg_grads_count(o->g);
  double ss = 0;
  for (int i = 0; i < n; i++) {
    float *gi = o->host + o->offset[i];
    rg_grads_download(o->g, i, gi);
    const size_t len = (size_t)rg_tensor_nelems(rg_grads_tensor(o->g, i));
    for (size_t k = 0; k < len; k++) ss += (double)gi[k] * gi[k];
  }
  const double norm = sqrt(ss);
  const float coef = max_norm > 0 ? (float)rg_grad_clip_coef(norm, max_norm) : 1.0f;
  rg_adamw_begin_step(o->adamw);
  for (int i = 0; i < n; i++) rg_adamw_update(o->adamw, i, o->params[i], o->host + o->offset[i], coef, lr);
  if (grad_norm) *grad_norm = norm;
}
