/* auroc.c: how well a direction separates harmful from harmless prompts (auroc.h). */
#include "geometry/auroc.h"

#include <math.h>
#include <stdlib.h>

#include "geometry/linalg.h"

typedef struct {
  double value;
  int harmful;
} scored;

static int by_value(const void *a, const void *b) {
  double x = ((const scored *)a)->value, y = ((const scored *)b)->value;
  return (x > y) - (x < y);
}

double rg_auroc(const double *harmful, int n_harmful, const double *harmless, int n_harmless) {
  if (n_harmful <= 0 || n_harmless <= 0) return NAN;
  int n = n_harmful + n_harmless;
  scored *all = malloc((size_t)n * sizeof *all);
  if (!all) return NAN;
  for (int i = 0; i < n; i++) {
    double v = i < n_harmful ? harmful[i] : harmless[i - n_harmful];
    if (isnan(v)) {
      free(all);
      return NAN;
    }
    all[i] = (scored){v, i < n_harmful};
  }
  qsort(all, (size_t)n, sizeof *all, by_value);
  /* Sum of the harmful midranks (1-based): a run of equal values at sorted
   * indices i..j-1 shares the rank (i + 1 + j) / 2. */
  double rank_sum = 0.0;
  for (int i = 0; i < n;) {
    int j = i;
    int harmful_in_run = 0;
    while (j < n && all[j].value == all[i].value) harmful_in_run += all[j++].harmful;
    rank_sum += harmful_in_run * 0.5 * (double)(i + 1 + j);
    i = j;
  }
  free(all);
  double u = rank_sum - 0.5 * (double)n_harmful * (double)(n_harmful + 1);
  return u / ((double)n_harmful * (double)n_harmless);
}

void rg_project_rows(const double *X, int n, int d, const double *dir, double *out) {
  double norm = rg_vec_norm(dir, d);
  for (int i = 0; i < n; i++) out[i] = norm == 0.0 ? NAN : rg_vec_dot(X + (size_t)i * d, dir, d) / norm;
}

double rg_auroc_split(const double *x, const bool *positive, int n, int *n_pos, int *n_neg) {
  double *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a), *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
  int na = 0, nb = 0;
  double v = NAN;
  if (a && b) {
    for (int i = 0; i < n; i++) {
      if (positive[i]) a[na++] = x[i];
      else b[nb++] = x[i];
    }
    v = rg_auroc(a, na, b, nb);
  }
  *n_pos = na;
  *n_neg = nb;
  free(a);
  free(b);
  return v;
}
