/* diff_means.c: streaming difference-in-means of residual activations (diff_means.h). */
#include "geometry/diff_means.h"

#include <stdlib.h>

#include "geometry/linalg.h"
#include "util/error.h"

static const char *class_name(rg_prompt_class cls) { return cls == RG_HARMFUL ? "harmful" : "harmless"; }

rg_diff_means *rg_diff_means_new(int n_pos, int n_layers, int d_model) {
  if (n_pos <= 0 || n_layers <= 0 || d_model <= 0) {
    rg_error_set("diff-in-means: bad shape %d positions x %d layers x %d", n_pos, n_layers, d_model);
    return NULL;
  }
  size_t cells = (size_t)n_pos * (size_t)n_layers;
  rg_diff_means *dm = calloc(1, sizeof *dm);
  if (!dm) goto oom;
  dm->n_pos = n_pos;
  dm->n_layers = n_layers;
  dm->d_model = d_model;
  for (int c = 0; c < 2; c++) {
    dm->sum[c] = calloc(cells * (size_t)d_model, sizeof *dm->sum[c]);
    dm->count[c] = calloc(cells, sizeof *dm->count[c]);
    if (!dm->sum[c] || !dm->count[c]) goto oom;
  }
  return dm;
oom:
  rg_diff_means_free(dm);
  rg_error_set("diff-in-means: out of memory for %d x %d x %d sums", n_pos, n_layers, d_model);
  return NULL;
}

void rg_diff_means_free(rg_diff_means *dm) {
  if (!dm) return;
  for (int c = 0; c < 2; c++) {
    free(dm->sum[c]);
    free(dm->count[c]);
  }
  free(dm);
}

static int check_cell(const rg_diff_means *dm, int pi, int layer) {
  if (pi < 0 || pi >= dm->n_pos || layer < 0 || layer >= dm->n_layers)
    return rg_error_set("diff-in-means: cell (position index %d, layer %d) outside %d x %d", pi, layer, dm->n_pos,
                        dm->n_layers);
  return 0;
}

static size_t cell_index(const rg_diff_means *dm, int pi, int layer) { return (size_t)pi * dm->n_layers + layer; }

int rg_diff_means_add(rg_diff_means *dm, rg_prompt_class cls, int pi, int layer, const float *x) {
  if (cls != RG_HARMFUL && cls != RG_HARMLESS) return rg_error_set("diff-in-means: bad prompt class %d", (int)cls);
  if (check_cell(dm, pi, layer) != 0) return -1;
  size_t cell = cell_index(dm, pi, layer);
  double *sum = dm->sum[cls] + cell * dm->d_model;
  for (int i = 0; i < dm->d_model; i++) sum[i] += (double)x[i];
  dm->count[cls][cell]++;
  return 0;
}

int rg_diff_means_add_prompt(rg_diff_means *dm, rg_prompt_class cls, const float *acts) {
  for (int l = 0; l < dm->n_layers; l++)
    for (int pi = 0; pi < dm->n_pos; pi++)
      rg_diff_means_add(dm, cls, pi, l, acts + ((size_t)l * dm->n_pos + pi) * dm->d_model);
  return 0;
}

int rg_diff_means_mean(const rg_diff_means *dm, rg_prompt_class cls, int pi, int layer, double *out) {
  if (cls != RG_HARMFUL && cls != RG_HARMLESS) return rg_error_set("diff-in-means: bad prompt class %d", (int)cls);
  if (check_cell(dm, pi, layer) != 0) return -1;
  size_t cell = cell_index(dm, pi, layer);
  long long n = dm->count[cls][cell];
  if (n == 0)
    return rg_error_set("diff-in-means: no %s samples at position %d, layer %d", class_name(cls), pi - dm->n_pos,
                        layer);
  const double *sum = dm->sum[cls] + cell * dm->d_model;
  for (int i = 0; i < dm->d_model; i++) out[i] = sum[i] / (double)n;
  return 0;
}

int rg_diff_means_direction(const rg_diff_means *dm, int pi, int layer, double *r) {
  double *nu = malloc((size_t)dm->d_model * sizeof *nu);
  if (!nu) return rg_error_set("diff-in-means: out of memory");
  int rc = -1;
  if (rg_diff_means_mean(dm, RG_HARMFUL, pi, layer, r) == 0 && rg_diff_means_mean(dm, RG_HARMLESS, pi, layer, nu) == 0) {
    for (int i = 0; i < dm->d_model; i++) r[i] -= nu[i];
    rc = 0;
  }
  free(nu);
  return rc;
}

int rg_diff_means_carrier_matrix(const rg_diff_means *dm, int layer, double *C) {
  for (int pi = 0; pi < dm->n_pos; pi++)
    if (rg_diff_means_direction(dm, pi, layer, C + (size_t)pi * dm->d_model) != 0) return -1;
  rg_matrix_normalize_rows(C, dm->n_pos, dm->d_model);
  return 0;
}

int rg_diff_means_layer_stack(const rg_diff_means *dm, int pi, double *S) {
  for (int l = 0; l < dm->n_layers; l++)
    if (rg_diff_means_direction(dm, pi, l, S + (size_t)l * dm->d_model) != 0) return -1;
  rg_matrix_normalize_rows(S, dm->n_layers, dm->d_model);
  return 0;
}
