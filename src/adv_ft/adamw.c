#include "adv_ft/adamw.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"

struct rg_adamw {
  rg_adamw_hparams h;
  int n;
  size_t *sizes;
  float **m, **v;
  long t;
};

rg_adamw_hparams rg_adamw_defaults(void) {
  return (rg_adamw_hparams){.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};
}

rg_adamw *rg_adamw_new(const rg_adamw_hparams *h, const size_t *sizes, int n_tensors) {
  rg_adamw *o = calloc(1, sizeof *o);
  if (o) {
    o->h = *h;
    o->n = n_tensors;
    o->sizes = malloc((size_t)n_tensors * sizeof *o->sizes);
    o->m = calloc((size_t)n_tensors, sizeof *o->m);
    o->v = calloc((size_t)n_tensors, sizeof *o->v);
  }
  int ok = o && o->sizes && o->m && o->v;
  for (int i = 0; ok && i < n_tensors; i++) {
    o->sizes[i] = sizes[i];
    ok = (o->m[i] = calloc(sizes[i] ? sizes[i] : 1, sizeof(float))) && (o->v[i] = calloc(sizes[i] ? sizes[i] : 1, sizeof(float)));
  }
  if (!ok) {
    rg_adamw_free(o);
    rg_error_set("adamw: out of memory for the moments of %d tensors", n_tensors);
    return NULL;
  }
  return o;
}

void rg_adamw_free(rg_adamw *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    if (o->m) free(o->m[i]);
    if (o->v) free(o->v[i]);
  }
  free(o->m);
  free(o->v);
  free(o->sizes);
  free(o);
}

void rg_adamw_begin_step(rg_adamw *o) { o->t++; }
long rg_adamw_steps(const rg_adamw *o) { return o->t; }

void rg_adamw_update(rg_adamw *o, int i, float *param, const float *grad, float grad_scale, double lr) {
  const rg_adamw_hparams *h = &o->h;
  const double bc1 = 1 - pow(h->beta1, (double)o->t), bc2 = 1 - pow(h->beta2, (double)o->t);
  const float step = (float)(lr / bc1), decay = (float)(1 - lr * h->weight_decay);
  const float b1 = (float)h->beta1, b2 = (float)h->beta2, sbc2 = (float)sqrt(bc2), eps = (float)h->eps;
  float *m = o->m[i], *v = o->v[i];
  const size_t n = o->sizes[i];
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (size_t k = 0; k < n; k++) {
    const float g = grad[k] * grad_scale;
    m[k] = b1 * m[k] + (1 - b1) * g;
    v[k] = b2 * v[k] + (1 - b2) * g * g;
    param[k] = param[k] * decay - step * m[k] / (sqrtf(v[k]) / sbc2 + eps);
  }
}

double rg_grad_clip_coef(double total_norm, double max_norm) {
  const double c = max_norm / (total_norm + 1e-6);
  return c < 1 ? c : 1;
}

double rg_lr_cosine(double base_lr, long step, long warmup, long total) {
  if (step < warmup) return base_lr * (double)step / (double)(warmup > 1 ? warmup : 1);
  const double progress = (double)(step - warmup) / (double)(total - warmup > 1 ? total - warmup : 1);
  const double f = 0.5 * (1 + cos(M_PI * progress)); /* num_cycles 0.5: half a cosine */
  return base_lr * (f > 0 ? f : 0);
}
