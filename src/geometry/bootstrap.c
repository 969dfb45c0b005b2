/* bootstrap.c: resampled carrier selection, the random-direction null and
 * percentile intervals from per-prompt scores. */
#include "geometry/bootstrap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double rg_percentile(const double *x, int n, double q) {
  double *s = malloc((size_t)n * sizeof *s);
  if (!s || n < 1) {
    free(s);
    return NAN;
  }
  memcpy(s, x, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double at = q / 100.0 * (n - 1);
  int lo = (int)floor(at);
  if (lo >= n - 1) lo = n - 1;
  double frac = at - lo, v = lo + 1 < n ? s[lo] + frac * (s[lo + 1] - s[lo]) : s[lo];
  free(s);
  return v;
}

/* Mean of row[idx[0..n)] (idx NULL: row[0..n)), summed in order. */
static double mean_at(const double *row, const int *idx, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += row[idx ? idx[i] : i];
  return sum / n;
}

int rg_carrier_means(const rg_carrier_samples *cs, const int *hi, const int *li, rg_candidate *out, double *null_p5) {
  const int nh = cs->nh, nl = cs->nl;
  double base_h = mean_at(cs->base_h, hi, nh), base_l = mean_at(cs->base_l, li, nl);
  for (int c = 0; c < cs->n_cand; c++) {
    out[c] = (rg_candidate){.pos = cs->cand[c].pos, .layer = cs->cand[c].layer};
    out[c].bypass = mean_at(cs->bypass + (size_t)c * nh, hi, nh);
    out[c].induce = mean_at(cs->induce + (size_t)c * nl, li, nl);
    out[c].kl = mean_at(cs->kl + (size_t)c * nl, li, nl);
    out[c].induce_norm = rg_induce_normalized(out[c].induce, base_h, base_l);
  }
  *null_p5 = NAN;
  if (cs->n_null < 1) return 0;
  double *nb = malloc((size_t)cs->n_null * sizeof *nb);
  if (!nb) return rg_error_set("bootstrap: out of memory");
  for (int k = 0; k < cs->n_null; k++) nb[k] = mean_at(cs->null_bypass + (size_t)k * nh, hi, nh);
  *null_p5 = rg_percentile(nb, cs->n_null, 5);
  free(nb);
  return 0;
}

int rg_carrier_select(const rg_candidate *c, int n_cand, int n_layers, const rg_selection_rules *rules,
                      double null_p5, int *best, int *n_admissible) {
  rg_selection sel;
  if (rg_select(c, n_cand, n_layers, rules, &sel) < 0) return -1;
  *n_admissible = sel.n_admissible;
  *best = sel.best >= 0 && (isnan(null_p5) || c[sel.best].bypass < null_p5) ? sel.best : -1;
  rg_selection_free(&sel);
  return 0;
}

int rg_carrier_bootstrap(const rg_carrier_samples *cs, int best, int B, uint64_t seed, rg_bootstrap_result *out) {
  *out = (rg_bootstrap_result){.resamples = B};
  const int nh = cs->nh, nl = cs->nl;
  int *hi = malloc((size_t)nh * sizeof *hi), *li = malloc((size_t)nl * sizeof *li);
  rg_candidate *c = malloc((size_t)(cs->n_cand > 0 ? cs->n_cand : 1) * sizeof *c);
  double *layers = malloc((size_t)B * sizeof *layers), *sb = malloc((size_t)B * 3 * sizeof *sb);
  int rc = hi && li && c && layers && sb && B >= 1 ? 0 : rg_error_set("bootstrap: out of memory");
  uint64_t state = seed;
  int n_with = 0;
  for (int b = 0; b < B && rc == 0; b++) {
    for (int i = 0; i < nh; i++) hi[i] = (int)(rg_splitmix64(&state) % (uint64_t)nh);
    for (int i = 0; i < nl; i++) li[i] = (int)(rg_splitmix64(&state) % (uint64_t)nl);
    double p5;
    int pick, n_adm;
    if ((rc = rg_carrier_means(cs, hi, li, c, &p5)) < 0) break;
    if ((rc = rg_carrier_select(c, cs->n_cand, cs->n_layers, cs->rules, p5, &pick, &n_adm)) < 0) break;
    if (pick >= 0) layers[n_with++] = c[pick].layer;
    if (best >= 0) {
      sb[b] = c[best].bypass;
      sb[B + b] = c[best].induce;
      sb[2 * B + b] = c[best].kl;
    }
  }
  if (rc == 0) {
    out->carrier_share = (double)n_with / B;
    out->layer_lo = n_with ? rg_percentile(layers, n_with, 2.5) : NAN;
    out->layer_hi = n_with ? rg_percentile(layers, n_with, 97.5) : NAN;
    out->bypass_lo = best >= 0 ? rg_percentile(sb, B, 2.5) : NAN;
    out->bypass_hi = best >= 0 ? rg_percentile(sb, B, 97.5) : NAN;
    out->induce_lo = best >= 0 ? rg_percentile(sb + B, B, 2.5) : NAN;
    out->induce_hi = best >= 0 ? rg_percentile(sb + B, B, 97.5) : NAN;
    out->kl_lo = best >= 0 ? rg_percentile(sb + 2 * B, B, 2.5) : NAN;
    out->kl_hi = best >= 0 ? rg_percentile(sb + 2 * B, B, 97.5) : NAN;
  }
  free(hi);
  free(li);
  free(c);
  free(layers);
  free(sb);
  return rc;
}
