/* logsumexp.h: the float64 log-softmax normalizer of a float32 logits row,
 * shared by the host-side scores (geometry/scores.c, adv_ft/gcg.c). */
#ifndef RG_UTIL_LOGSUMEXP_H
#define RG_UTIL_LOGSUMEXP_H

#include <math.h>

static inline double rg_log_sum_exp(const float *x, int n) {
  double mx = x[0], sum = 0;
  for (int i = 1; i < n; i++) mx = fmax(mx, x[i]);
  for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
  return mx + log(sum);
}

#endif
