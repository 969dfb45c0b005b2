/* migration.h: where the best admissible carrier sits at each checkpoint.
 *
 * Per step: the best carrier's layer l* and position (selection.h), its
 * relative depth l_best / L, a depth label, its scores, the number of admissible
 * candidates, and the drift of its direction from step 0's: the angle between
 * the two lines, arccos(|cos|) (a direction's sign carries no meaning here).
 * The labels are refgeo conventions, not from the paper
 * (docs/refusal-geometry.md section 10.6): "early" if l_best / L < early_below,
 * "late" if l_best / L >= late_from, "middle" otherwise; defaults 1/3 and 2/3.
 */
#ifndef RG_GEOMETRY_MIGRATION_H
#define RG_GEOMETRY_MIGRATION_H

#include "geometry/selection.h"
#include "geometry/spectrum.h"

typedef struct {
  double early_below; /* 1/3 */
  double late_from;   /* 2/3 */
} rg_depth_thresholds;

rg_depth_thresholds rg_depth_thresholds_default(void);

/* "early", "middle" or "late" (static strings); "none" for a NaN depth. */
const char *rg_depth_label(double rel_depth, const rg_depth_thresholds *t);

/* One row of migration.csv. Strings are borrowed, not owned. */
typedef struct {
  long step;
  const char *status; /* verdict.h's step status; "" before the pipeline sets it */
  int best_pos, best_layer; /* 0 and -1 when nothing is admissible */
  double rel_depth;         /* best_layer / n_layers; NaN when none */
  const char *label;        /* rg_depth_label, "none" when none */
  double bypass, induce, kl;
  int n_admissible;
  double angle_vs_step0_deg; /* NaN when either direction is missing or zero */
  rg_spectrum_measures spectrum;
  const char *matrix; /* what the spectrum was computed on, e.g. "carrier" */
  /* the prompts (step_prompts.h): kept / total per split, in
   * harmful_train, harmless_train, harmful_val, harmless_val order */
  int kept[4], total[4];
  const char *refusal_tokens; /* "40,2121" */
  double refusal_coverage;    /* auto tokens' share of refusals; NaN otherwise */
  double score_auroc;         /* refused vs complied harmful val prompts */
  double base_harmful, base_harmless; /* unintervened mean scores of the scored val prompts */
  double null_bypass_p5;      /* the null's 5th percentile of bypass */
  double carrier_share;       /* bootstrap resamples that select a carrier */
  double layer_lo, layer_hi;  /* bootstrap 95% interval of the selected layer */
  double bypass_lo, bypass_hi, induce_lo, induce_hi, kl_lo, kl_hi;
  double probe_layer; /* earliest layer whose direction reads refused vs complied at AUROC >= 0.8; NaN if none */
} rg_migration_row;

/* Sets the whole row: the fields below from one step's selection, the
 * others to "not measured" (NaN, "" or "none"; counts 0). From the selection
 * over candidates C of a model with n_layers layers. DIR and DIR_STEP0 are
 * the best carrier directions (length d) at this step and at step 0; either
 * may be NULL (angle NaN). */
void rg_migration_row_fill(rg_migration_row *row, long step, const rg_candidate *c, const rg_selection *sel,
                           int n_layers, const rg_depth_thresholds *t, const double *dir, const double *dir_step0,
                           int d);

#endif
