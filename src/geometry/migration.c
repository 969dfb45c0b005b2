/* migration.c: where the best admissible carrier sits at each checkpoint (migration.h). */
#include "geometry/migration.h"

#include <math.h>

#include "geometry/linalg.h"

rg_depth_thresholds rg_depth_thresholds_default(void) {
  return (rg_depth_thresholds){.early_below = 1.0 / 3.0, .late_from = 2.0 / 3.0};
}

const char *rg_depth_label(double rel_depth, const rg_depth_thresholds *t) {
  if (isnan(rel_depth)) return "none";
  if (rel_depth < t->early_below) return "early";
  if (rel_depth >= t->late_from) return "late";
  return "middle";
}

void rg_migration_row_fill(rg_migration_row *row, long step, const rg_candidate *c, const rg_selection *sel,
                           int n_layers, const rg_depth_thresholds *t, const double *dir, const double *dir_step0,
                           int d) {
  /* every field the pipeline fills later starts as "not measured" */
  *row = (rg_migration_row){.step = step,
                            .status = "",
                            .n_admissible = sel->n_admissible,
                            .spectrum = {NAN, NAN, NAN},
                            .matrix = "none",
                            .refusal_tokens = "",
                            .refusal_coverage = NAN,
                            .score_auroc = NAN,
                            .base_harmful = NAN,
                            .base_harmless = NAN,
                            .null_bypass_p5 = NAN,
                            .carrier_share = NAN,
                            .layer_lo = NAN,
                            .layer_hi = NAN,
                            .bypass_lo = NAN,
                            .bypass_hi = NAN,
                            .induce_lo = NAN,
                            .induce_hi = NAN,
                            .kl_lo = NAN,
                            .kl_hi = NAN,
                            .probe_layer = NAN};
  if (sel->best < 0) {
    row->best_pos = 0;
    row->best_layer = -1;
    row->rel_depth = row->bypass = row->induce = row->kl = NAN;
  } else {
    const rg_candidate *best = &c[sel->best];
    row->best_pos = best->pos;
    row->best_layer = best->layer;
    row->rel_depth = (double)best->layer / n_layers;
    row->bypass = best->bypass;
    row->induce = best->induce;
    row->kl = best->kl;
  }
  row->label = rg_depth_label(row->rel_depth, t);
  row->angle_vs_step0_deg = dir && dir_step0 ? rg_line_angle(dir, dir_step0, d) * (180.0 / M_PI) : NAN;
}
