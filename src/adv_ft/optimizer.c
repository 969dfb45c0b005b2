/* optimizer.c: one optimizer update of a model being trained (optimizer.h). */
#include "adv_ft/optimizer.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"

struct rg_optimizer {
  rg_weights *w;
  rg_grads *g;
  rg_adamw_hparams h;
  long steps;
  rg_buf **m, **v; /* per parameter: the AdamW moments, on the backend; with ZeRO m[0], v[0]: the shard's */
  rg_zero *zero;
  int n_moments;
  bool sgd; /* rg_optimizer_use_sgd */
};

static rg_optimizer *optimizer_new(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h, rg_zero *z);

rg_optimizer *rg_optimizer_new(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h) {
  return optimizer_new(w, g, h, NULL);
}
rg_optimizer *rg_optimizer_new_zero(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h, rg_zero *z) {
  return optimizer_new(w, g, h, z);
}
rg_zero *rg_optimizer_zero(const rg_optimizer *o) { return o->zero; }

static rg_optimizer *optimizer_new(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h, rg_zero *z) {
  if (!rg_weights_trainable(w)) {
    rg_error_set("optimizer: the weights are not trainable (rg_weights_make_trainable)");
    return NULL;
  }
  const int n = rg_grads_count(g);
  if (n != rg_weights_count(w)) {
    rg_error_set("optimizer: %d gradients for %d parameters (gradients of other weights?)", n, rg_weights_count(w));
    return NULL;
  }
  rg_optimizer *o = calloc(1, sizeof *o);
  if (!o || !(o->m = calloc((size_t)(n ? n : 1), sizeof *o->m)) || !(o->v = calloc((size_t)(n ? n : 1), sizeof *o->v))) {
    rg_optimizer_free(o);
    rg_error_set("optimizer: out of memory");
    return NULL;
  }
  o->w = w;
  o->g = g;
  o->h = *h;
  o->zero = z;
  rg_backend *be = rg_weights_backend(w);
  for (int i = 0; i < (z ? 1 : n); i++, o->n_moments++) {
    const size_t len = z ? rg_zero_shard_floats(z) : (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
    if (!(o->m[i] = rg_buf_new(be, len)) || !(o->v[i] = rg_buf_new(be, len))) {
      rg_error_prefix("optimizer: moments of %s", z ? "this rank's ZeRO shard" : rg_weights_tensor(w, i)->name);
      o->n_moments++; /* a buffer made of the two is freed */
      rg_optimizer_free(o);
      return NULL;
    }
    /* Written once now, so that the first step does not fault on them: a
     * new CPU buffer's pages are the shared zero page until written, and
     * AdamW's read-then-write made each page a copy-on-write fault with a
     * TLB shootdown on every thread (about 2.5 s of a SmolLM2 first step) */
    rg_buf_zero(be, o->m[i], 0, len);
    rg_buf_zero(be, o->v[i], 0, len);
  }
  return o;
}

void rg_optimizer_free(rg_optimizer *o) {
  if (!o) return;
  rg_backend *be = o->w ? rg_weights_backend(o->w) : NULL;
  for (int i = 0; be && i < o->n_moments; i++) {
    rg_buf_free(be, o->m[i]);
    rg_buf_free(be, o->v[i]);
  }
  free(o->m);
  free(o->v);
  free(o);
}

int rg_optimizer_use_sgd(rg_optimizer *o) {
  if (o->zero) return rg_error_set("optimizer: sgd is not built with ZeRO");
  o->sgd = true;
  return 0;
}

/* torch.optim.SGD (momentum 0): g = s grad + wd theta; theta -= lr g, in
 * float32 on the host. */
static int sgd_step(rg_optimizer *o, double lr, float scale) {
  rg_backend *be = rg_weights_backend(o->w);
  const float lr_f = (float)lr, wd = (float)o->h.weight_decay;
  int rc = 0;
  for (int i = 0; rc == 0 && i < rg_grads_count(o->g); i++) {
    const size_t n = (size_t)rg_tensor_nelems(rg_weights_tensor(o->w, i));
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    if (!p || !g) rc = rg_error_set("optimizer: out of memory");
    if (rc == 0 && (rg_weights_download(o->w, i, p) < 0 || rg_buf_download(be, rg_grads_buf(o->g, i), 0, g, n) < 0))
      rc = rg_error_prefix("optimizer: sgd on %s", rg_weights_tensor(o->w, i)->name);
    for (size_t k = 0; rc == 0 && k < n; k++) p[k] -= lr_f * (scale * g[k] + wd * p[k]);
    if (rc == 0) rc = rg_weights_upload(o->w, i, p);
    free(p), free(g);
  }
  return rc;
}

int rg_optimizer_step(rg_optimizer *o, double lr, double max_norm, double *grad_norm) {
  rg_backend *be = rg_weights_backend(o->w);
  const int n = rg_grads_count(o->g);
  double ss = 0;
  if (o->zero && rg_zero_sum_squares(o->zero, &ss) < 0) return rg_error_prefix("optimizer");
  for (int i = 0; !o->zero && i < n; i++) {
    double part;
    if (rg_op_sum_squares(be, rg_grads_buf(o->g, i), &part) < 0) return rg_error_prefix("optimizer");
    ss += part;
  }
  const double norm = sqrt(ss);
  const rg_adamw_step st = {.lr = lr,
                            .beta1 = o->h.beta1,
                            .beta2 = o->h.beta2,
                            .eps = o->h.eps,
                            .weight_decay = o->h.weight_decay,
                            .step = ++o->steps,
                            .grad_scale = max_norm > 0 ? (float)rg_grad_clip_coef(norm, max_norm) : 1.0f};
  if (grad_norm) *grad_norm = norm;
  if (o->sgd) return sgd_step(o, lr, st.grad_scale);
  if (o->zero) return rg_zero_adamw(o->zero, o->m[0], o->v[0], &st) < 0 ? rg_error_prefix("optimizer") : 0;
  for (int i = 0; i < n; i++) rg_op_adamw(be, rg_weights_param(o->w, i), rg_grads_buf(o->g, i), o->m[i], o->v[i], &st);
  return rg_backend_status(be) < 0 ? rg_error_prefix("optimizer") : 0;
}

long rg_optimizer_steps(const rg_optimizer *o) { return o->steps; }

static size_t param_len(const rg_optimizer *o, int i) { return (size_t)rg_tensor_nelems(rg_weights_tensor(o->w, i)); }

int rg_optimizer_get_moments(const rg_optimizer *o, int i, float *m, float *v) {
  rg_backend *be = rg_weights_backend(o->w);
  const size_t n = param_len(o, i);
  return rg_buf_download(be, o->m[i], 0, m, n) < 0 || rg_buf_download(be, o->v[i], 0, v, n) < 0
             ? rg_error_prefix("optimizer: moments of %s", rg_weights_tensor(o->w, i)->name)
             : 0;
}

int rg_optimizer_set_moments(rg_optimizer *o, int i, const float *m, const float *v) {
  rg_backend *be = rg_weights_backend(o->w);
  const size_t n = param_len(o, i);
  rg_buf_upload(be, o->m[i], 0, m, n);
  rg_buf_upload(be, o->v[i], 0, v, n);
  return rg_backend_status(be) < 0 ? rg_error_prefix("optimizer: moments of %s", rg_weights_tensor(o->w, i)->name) : 0;
}

void rg_optimizer_set_steps(rg_optimizer *o, long steps) { o->steps = steps; }

/* Whether [at, at + n) lies in this rank's shard. */
static int shard_range(const rg_optimizer *o, size_t at, size_t n) {
  if (!o->zero) return rg_error_set("optimizer: no ZeRO shard");
  const size_t all = rg_zero_shard_floats(o->zero);
  return at <= all && n <= all - at ? 0 : rg_error_set("optimizer: floats %zu..%zu outside the shard's %zu", at, at + n, all);
}

int rg_optimizer_get_shard(const rg_optimizer *o, size_t at, size_t n, float *m, float *v) {
  rg_backend *be = rg_weights_backend(o->w);
  if (shard_range(o, at, n) < 0) return -1;
  return (m && rg_buf_download(be, o->m[0], at, m, n) < 0) || (v && rg_buf_download(be, o->v[0], at, v, n) < 0)
             ? rg_error_prefix("optimizer: moments of this rank's ZeRO shard")
             : 0;
}

int rg_optimizer_set_shard(rg_optimizer *o, size_t at, size_t n, const float *m, const float *v) {
  rg_backend *be = rg_weights_backend(o->w);
  if (shard_range(o, at, n) < 0) return -1;
  if (m) rg_buf_upload(be, o->m[0], at, m, n);
  if (v) rg_buf_upload(be, o->v[0], at, v, n);
  return rg_backend_status(be) < 0 ? rg_error_prefix("optimizer: moments of this rank's ZeRO shard") : 0;
}
