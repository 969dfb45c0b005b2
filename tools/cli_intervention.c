/* cli_intervention.c: the --ablate / --actadd / --coeff flags (cli_intervention.h). */
#include "cli_intervention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "geometry/directions_h5.h"
#include "util/error.h"

/* The direction of SPEC into a malloc'd [d_model] vector; its layer in *LAYER. */
static float *load_direction(const char *flag, const char *spec, int d_model, int *layer) {
  char *file = NULL;
  rg_direction_ref ref;
  float *v = malloc((size_t)d_model * sizeof *v);
  if (!v) {
    rg_error_set("--%s: out of memory", flag);
    return NULL;
  }
  if (rg_direction_spec_parse(spec, &file, &ref) < 0 || rg_directions_read(file, &ref, d_model, v) < 0) {
    rg_error_prefix("--%s", flag);
    free(v);
    v = NULL;
  }
  *layer = ref.layer;
  free(file);
  return v;
}

int cli_intervention_load(cli_intervention *ci, const rg_model *m, const rg_intervention **iv) {
  *iv = NULL;
  bool have_coeff = !isnan(ci->coeff);
  if (have_coeff && !ci->actadd) return rg_error_set("--coeff: needs --actadd");
  if (have_coeff && !isfinite(ci->coeff)) return rg_error_set("--coeff: %g is not finite", ci->coeff);
  if (!cli_intervention_given(ci)) return 0;
  ci->iv = (rg_intervention){0};
  int layer;
  if (ci->ablate) {
    if (!(ci->ablate_dir = load_direction("ablate", ci->ablate, m->cfg.d_model, &layer))) return -1;
    ci->iv.ablate_dir = ci->ablate_dir;
  }
  if (ci->actadd) {
    if (!(ci->actadd_vec = load_direction("actadd", ci->actadd, m->cfg.d_model, &layer))) return -1;
    if (layer >= m->cfg.n_layers)
      return rg_error_set("--actadd: layer %d, but %s has %d layers", layer, m->path, m->cfg.n_layers);
    ci->iv.actadd_vec = ci->actadd_vec;
    ci->iv.actadd_layer = layer;
    ci->iv.actadd_coeff = have_coeff ? (float)ci->coeff : 1.0f;
  }
  *iv = &ci->iv;
  return 0;
}

bool cli_intervention_given(const cli_intervention *ci) { return ci->ablate || ci->actadd; }

/* The step, pos and layer SPEC resolves to, without reading the vector. */
static int resolve(const char *flag, const char *spec, rg_direction_ref *ref) {
  char *file = NULL;
  int rc = rg_direction_spec_parse(spec, &file, ref) < 0 || rg_directions_read(file, ref, 0, NULL) < 0 ? -1 : 0;
  if (rc < 0) rg_error_prefix("--%s", flag);
  free(file);
  return rc;
}

int cli_intervention_label(const cli_intervention *ci, char *buf, size_t n) {
  rg_direction_ref r;
  size_t used = 0;
  buf[0] = '\0';
  if (ci->ablate) {
    if (resolve("ablate", ci->ablate, &r) < 0) return -1;
    used += (size_t)snprintf(buf, n, "+ablate(step=%ld;pos=%d;layer=%d)", r.step, r.pos, r.layer);
  }
  if (ci->actadd && used < n) {
    if (resolve("actadd", ci->actadd, &r) < 0) return -1;
    snprintf(buf + used, n - used, "+actadd(step=%ld;pos=%d;layer=%d;coeff=%g)", r.step, r.pos, r.layer,
             isnan(ci->coeff) ? 1.0 : ci->coeff);
  }
  return 0;
}

void cli_intervention_free(cli_intervention *ci) {
  free(ci->ablate_dir);
  free(ci->actadd_vec);
  ci->ablate_dir = ci->actadd_vec = NULL;
}
