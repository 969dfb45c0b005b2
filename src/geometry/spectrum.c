/* spectrum.c: scalar summaries of a singular-value spectrum (spectrum.h). */
#include "geometry/spectrum.h"

#include <math.h>
#include <stdlib.h>

#include "geometry/linalg.h"
#include "util/error.h"

/* exp of the Shannon entropy of w_i / sum w (w_i >= 0). */
static double entropy_rank(const double *w, int k) {
  double total = 0.0;
  for (int i = 0; i < k; i++) {
    if (!isfinite(w[i]) || w[i] < 0.0) return NAN;
    total += w[i];
  }
  if (!(total > 0.0)) return NAN;
  double h = 0.0;
  for (int i = 0; i < k; i++) {
    if (w[i] == 0.0) continue; /* 0 log 0 = 0 */
    double p = w[i] / total;
    h -= p * log(p);
  }
  return exp(h);
}

double rg_erank_sigma(const double *s, int k) { return entropy_rank(s, k); }

double rg_erank_sigma2(const double *s, int k) {
  double *w = malloc((size_t)(k > 0 ? k : 1) * sizeof *w);
  if (!w) return NAN;
  for (int i = 0; i < k; i++) w[i] = s[i] * s[i];
  double r = entropy_rank(w, k);
  free(w);
  return r;
}

double rg_participation_ratio(const double *s, int k) {
  double sum = 0.0, sum_sq = 0.0;
  for (int i = 0; i < k; i++) {
    if (!isfinite(s[i]) || s[i] < 0.0) return NAN;
    double lambda = s[i] * s[i];
    sum += lambda;
    sum_sq += lambda * lambda;
  }
  if (!(sum_sq > 0.0)) return NAN;
  return sum * sum / sum_sq;
}

int rg_matrix_spectrum_measures(const double *A, int m, int n, rg_spectrum_measures *out) {
  int k = m < n ? m : n;
  double *s = malloc((size_t)(k > 0 ? k : 1) * sizeof *s);
  if (!s) return rg_error_set("spectrum: out of memory");
  if (rg_singular_values(A, m, n, s) != 0) {
    free(s);
    return -1;
  }
  out->erank_sigma = rg_erank_sigma(s, k);
  out->erank_sigma2 = rg_erank_sigma2(s, k);
  out->participation_ratio = rg_participation_ratio(s, k);
  free(s);
  return 0;
}
