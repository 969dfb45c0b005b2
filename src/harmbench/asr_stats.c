/* asr_stats.c: confidence intervals and tests for an attack success rate (asr_stats.h). */
#include "harmbench/asr_stats.h"

#include <math.h>

#include "util/error.h"

int rg_wilson_interval(long k, long n, double z, double *lo, double *hi) {
  if (n <= 0 || k < 0 || k > n) return rg_error_set("wilson interval: need 0 <= k <= n and n > 0 (k=%ld, n=%ld)", k, n);
  double nn = (double)n, phat = (double)k / nn, z2 = z * z;
  double denom = 1.0 + z2 / nn;
  double centre = (phat + z2 / (2.0 * nn)) / denom;
  double half = z / denom * sqrt(phat * (1.0 - phat) / nn + z2 / (4.0 * nn * nn));
  /* At k = 0 (k = n) the lower (upper) bound is exactly 0 (1); rounding would
   * leave ~1e-19 instead, which would put a published 0.000 outside. */
  *lo = k == 0 ? 0.0 : fmax(0.0, centre - half);
  *hi = k == n ? 1.0 : fmin(1.0, centre + half);
  return 0;
}

double rg_binom_pmf(long k, long n, double p) {
  if (k < 0 || k > n) return 0.0;
  /* The degenerate p = 0 / p = 1 cases would give 0 * log(0) below. */
  if (p == 0.0) return k == 0 ? 1.0 : 0.0;
  if (p == 1.0) return k == n ? 1.0 : 0.0;
  double log_choose = lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1);
  return exp(log_choose + (double)k * log(p) + (double)(n - k) * log1p(-p));
}

double rg_binom_test_two_sided(long k, long n, double p) {
  if (n <= 0 || k < 0 || k > n || !(p >= 0.0 && p <= 1.0)) {
    rg_error_set("binomial test: need 0 <= k <= n, n > 0, 0 <= p <= 1 (k=%ld, n=%ld, p=%g)", k, n, p);
    return -1.0;
  }
  if ((double)k == p * (double)n) return 1.0; /* scipy's special case */
  /* scipy (stats/_binomtest.py) sums the tail terms on each side of the mode
   * whose pmf is <= d * (1 + 1e-7); since the pmf is unimodal this is the same
   * set of outcomes as the direct scan below. */
  double threshold = rg_binom_pmf(k, n, p) * (1.0 + 1e-7);
  double sum = 0.0;
  for (long i = 0; i <= n; i++) {
    double q = rg_binom_pmf(i, n, p);
    if (q <= threshold) sum += q;
  }
  return fmin(1.0, sum);
}
