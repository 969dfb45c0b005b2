/* selection.c: admissible refusal carriers and the best one (selection.h). */
#include "geometry/selection.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/error.h"

rg_selection_rules rg_selection_rules_default(void) {
  return (rg_selection_rules){.kl_max = 0.1,
                              .induce_min = 0.0,
                              .layer_cap = true,
                              .prune_frac = 0.2,
                              .induce_rule = RG_INDUCE_RD,
                              .induce_frac_min = 0.5};
}

double rg_induce_normalized(double induce, double base_harmful, double base_harmless) {
  double gap = base_harmful - base_harmless;
  return gap > 0 ? (induce - base_harmless) / gap : NAN;
}

const char *rg_reject_reason_name(rg_reject_reason r) {
  switch (r) {
    case RG_REJECT_NONE: return "";
    case RG_REJECT_NONFINITE: return "nonfinite";
    case RG_REJECT_LAYER: return "layer_cap";
    case RG_REJECT_KL: return "kl";
    case RG_REJECT_INDUCE: return "induce";
  }
  return "?";
}

/* Every filter on its own; a NaN fails every comparison it enters. */
static unsigned failed_filters(const rg_candidate *c, int layer_limit, const rg_selection_rules *rules) {
  bool normalized = rules->induce_rule == RG_INDUCE_NORMALIZED;
  unsigned f = 0;
  if (!isfinite(c->bypass) || !isfinite(c->induce) || !isfinite(c->kl) || (normalized && !isfinite(c->induce_norm)))
    f |= RG_FAIL_NONFINITE;
  if (c->layer >= layer_limit) f |= RG_FAIL_LAYER;
  if (!(c->kl <= rules->kl_max)) f |= RG_FAIL_KL;
  if (normalized ? !(c->induce_norm >= rules->induce_frac_min) : !(c->induce >= rules->induce_min)) f |= RG_FAIL_INDUCE;
  return f;
}

/* The first failed filter in RD filter_fn's order. */
static rg_reject_reason first_failure(unsigned f) {
  if (f & RG_FAIL_NONFINITE) return RG_REJECT_NONFINITE;
  if (f & RG_FAIL_LAYER) return RG_REJECT_LAYER;
  if (f & RG_FAIL_KL) return RG_REJECT_KL;
  if (f & RG_FAIL_INDUCE) return RG_REJECT_INDUCE;
  return RG_REJECT_NONE;
}

/* Sort key: bypass, then RD's loop order (pos, layer), then input order, so
 * the order is total and qsort's instability cannot show. */
typedef struct {
  double bypass;
  int pos, layer, index;
} survivor;

static int by_bypass_then_loop_order(const void *a, const void *b) {
  const survivor *x = a, *y = b;
  if (x->bypass != y->bypass) return x->bypass < y->bypass ? -1 : 1;
  if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
  if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

int rg_select(const rg_candidate *c, int n, int n_layers, const rg_selection_rules *rules, rg_selection *out) {
  *out = (rg_selection){.best = -1};
  if (n_layers <= 0) return rg_error_set("selection: n_layers must be positive, got %d", n_layers);
  for (int i = 0; i < n; i++) {
    if (c[i].layer < 0 || c[i].layer >= n_layers)
      return rg_error_set("selection: candidate %d has layer %d outside [0, %d)", i, c[i].layer, n_layers);
    if (c[i].pos >= 0) return rg_error_set("selection: candidate %d has position %d (must be negative)", i, c[i].pos);
  }
  /* Python's int(n_layer * (1.0 - prune)) on the same doubles. */
  out->layer_limit = rules->layer_cap ? (int)floor(n_layers * (1.0 - rules->prune_frac)) : n_layers;
  out->n_candidates = n;
  size_t cap = (size_t)(n > 0 ? n : 1);
  out->reason = malloc(cap * sizeof *out->reason);
  out->fails = malloc(cap * sizeof *out->fails);
  out->rank = malloc(cap * sizeof *out->rank);
  out->order = malloc(cap * sizeof *out->order);
  survivor *alive = malloc(cap * sizeof *alive);
  if (!out->reason || !out->fails || !out->rank || !out->order || !alive) {
    free(alive);
    rg_selection_free(out);
    return rg_error_set("selection: out of memory for %d candidates", n);
  }
  int k = 0;
  for (int i = 0; i < n; i++) {
    out->fails[i] = failed_filters(&c[i], out->layer_limit, rules);
    out->reason[i] = first_failure(out->fails[i]);
    out->rank[i] = -1;
    if (out->reason[i] == RG_REJECT_NONE) alive[k++] = (survivor){c[i].bypass, c[i].pos, c[i].layer, i};
  }
  qsort(alive, (size_t)k, sizeof *alive, by_bypass_then_loop_order);
  for (int r = 0; r < k; r++) {
    out->order[r] = alive[r].index;
    out->rank[alive[r].index] = r;
  }
  out->n_admissible = k;
  out->best = k > 0 ? out->order[0] : -1;
  free(alive);
  return 0;
}

void rg_selection_free(rg_selection *s) {
  free(s->reason);
  free(s->fails);
  free(s->rank);
  free(s->order);
  *s = (rg_selection){.best = -1};
}
