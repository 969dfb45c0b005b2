/* pipeline.h: the per-checkpoint refusal-geometry computation behind
 * `refgeo geometry`, from an activation file (capture/acts_h5.h) and the
 * checkpoint models, to geometry.csv, carriers.csv and migration.csv
 * (docs/csv-formats.md).
 *
 * For every checkpoint of the series, in step order (step 0 first):
 *  1. r[p, l] = mean harmful_train - mean harmless_train resid_pre (float64,
 *     diff_means.h) for every eoi position p and layer l.
 *  2. geometry.csv rows (layer-major, then position): |r|, cos / angle to the
 *     same (p, l) at step 0 and at the previous checkpoint, the AUROC of the
 *     harmful vs harmless train projections onto r-hat, and the spectrum of
 *     that site's centred per-prompt difference matrix x_i^harm - nu
 *     (matrix "prompt_diff", n_harmful x d_model).
 *  3. Candidate scores (scores.h) for every (p, l) with l in the layer range,
 *     on harmful_val / harmless_val token ids stored in the file (the first
 *     max_val of each), with the checkpoint model; selection (selection.h).
 *  4. migration.csv row: the best carrier, its drift from step 0's best
 *     carrier (line angle), and the spectrum of the carrier matrix at the
 *     best layer (matrix "carrier", n_pos rows, row-normalized). With no
 *     admissible carrier the spectrum is NaN and matrix is "none".
 *  5. directions.h5: every step's directions (float32, every eoi position and
 *     layer) with its selected carrier marked (directions_h5.h).
 * The log gets progress, elapsed times and, per step, the three spectra of
 * the best carrier (prompt_diff at (p*, l*), carrier at l*, layer stack at
 * p*).
 *
 * Results are written after every step (atomically, so a run that dies
 * leaves the tables of the steps done so far).
 */
#ifndef RG_GEOMETRY_PIPELINE_H
#define RG_GEOMETRY_PIPELINE_H

#include <stdint.h>
#include <stdio.h>

#include "model/checkpoints.h"
#include "geometry/migration.h"
#include "geometry/selection.h"

typedef struct {
  rg_selection_rules rules;
  rg_depth_thresholds depth;
  int layer_lo, layer_hi;     /* candidate layers [lo, hi); hi <= 0 = n_layers */
  int max_val;                /* val prompts used per class; <= 0 = all */
  const int32_t *refusal_ids; /* NULL = rg_refusal_tokens_default */
  int n_refusal;
  int threads; /* <= 0 = all CPUs */
  FILE *log;   /* NULL = quiet */
} rg_geometry_opts;

/* RD selection rules, default depth thresholds, every layer, every val
 * prompt, derived refusal tokens, all CPUs, quiet. */
rg_geometry_opts rg_geometry_opts_default(void);

/* Runs the pipeline over SERIES (every step must be complete in ACTS_PATH)
 * and writes OUT_DIR/{geometry,carriers,migration}.csv and OUT_DIR/directions.h5
 * (OUT_DIR is created).
 * Returns 0 (also when some step has no admissible carrier), or -1 with the
 * error set. */
int rg_geometry_run(const char *acts_path, const rg_checkpoint_series *series, const char *out_dir,
                    const rg_geometry_opts *opts);

#endif
