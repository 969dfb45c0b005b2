/* islands_outer.c: the merge of pseudo-gradients and the outer SGD step (islands_outer.h). */
#include "adv_ft/islands_outer.h"

void rg_outer_accumulate(double *acc, const float *d, double w, size_t n) {
  for (size_t i = 0; i < n; i++) acc[i] += w * (double)d[i];
}

void rg_outer_mean(float *mean, const double *acc, double total, size_t n) {
  for (size_t i = 0; i < n; i++) mean[i] = (float)(acc[i] / total);
}

void rg_outer_merge(float *mean, const float *const *d, const double *w, int k, size_t n) {
  double total = 0;
  for (int j = 0; j < k; j++) total += w[j];
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (int j = 0; j < k; j++) s += w[j] * (double)d[j][i];
    mean[i] = (float)(s / total);
  }
}

void rg_outer_update(const rg_outer_hparams *h, float *u, const float *g, float *b, bool first, size_t n) {
  const float mu = (float)h->momentum, lr = (float)h->lr;
  for (size_t i = 0; i < n; i++) {
    float step = g[i];
    if (mu != 0) {
      b[i] = first ? g[i] : mu * b[i] + g[i];
      step = h->nesterov ? g[i] + mu * b[i] : b[i];
    }
    u[i] = lr * step;
  }
}

void rg_outer_apply(float *theta, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) theta[i] -= u[i];
}
