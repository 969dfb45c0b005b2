/* pipeline.h: the per-checkpoint refusal-geometry computation behind
 * `refgeo geometry`, from an activation file (capture/acts_h5.h) and the
 * checkpoint models, to the tables of docs/csv-formats.md and the verdict
 * of docs/geometry-verdict.md.
 *
 * The plan (verdict_plan.h) is pinned in OUT_DIR before anything is scored.
 * Then, for every checkpoint of the series, in step order (step 0 first):
 *  1. the refusal score and the prompts it keeps (step_prompts.h): refusal
 *     tokens (fixed, RD's, or fitted to the checkpoint's replies) or the
 *     sequence score's strings, the
 *     score's AUROC on refused vs complied harmful val prompts, and RD's
 *     prompt filter on train and val.
 *  2. r[p, l] = mean harmful_train - mean harmless_train resid_pre (float64,
 *     diff_means.h) over the kept train prompts (all of them when the
 *     filter leaves a class empty: geometry.csv's prompts column says
 *     which), for every eoi position p and layer l.
 *  3. geometry.csv rows (layer-major, then position): |r|, cos / angle to the
 *     same (p, l) at step 0 and at the previous checkpoint, the AUROC of the
 *     harmful vs harmless train projections onto r-hat, and the spectrum of
 *     that site's centred per-prompt difference matrix x_i^harm - nu
 *     (matrix "prompt_diff", n_harmful x d_model).
 *     probes.csv: per (p, l), the AUROC of the harmful val prompts'
 *     projections onto r-hat for those the checkpoint refuses against those
 *     it answers (its own greedy replies, judged).
 *  4. With at least n_min kept harmful train prompts and a kept prompt of
 *     each val class: candidate scores (scores.h) for every (p, l) in the
 *     layer range, per prompt, on the kept val prompts (the first max_val of
 *     each class), and the same for null_size random unit directions; the
 *     selection (selection.h), the null check and the bootstrap
 *     (bootstrap.h); the KL-budget sensitivity and the bypass-KL Pareto
 *     front. Otherwise the step has "no refusal to carry".
 *  5. migration.csv row: the status, the best carrier, its drift from step
 *     0's best carrier (line angle), the spectrum of the carrier matrix at
 *     the best layer (matrix "carrier", n_pos rows, row-normalized), the
 *     prompt counts, the score's tokens and AUROC, the null and the
 *     bootstrap intervals.
 *  6. directions.h5: every step's directions (float32, every eoi position and
 *     layer) with its selected carrier marked (directions_h5.h).
 * After the last step, transfer.csv (every step's best candidate scored in
 * every scored step's model), verdict.json and verdict.txt (verdict.h).
 *
 * Results are written after every step (atomically, so a run that dies
 * leaves the tables of the steps done so far).
 */
#ifndef RG_GEOMETRY_PIPELINE_H
#define RG_GEOMETRY_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/checkpoints.h"
#include "geometry/migration.h"
#include "geometry/selection.h"
#include "geometry/verdict_plan.h"

typedef struct {
  rg_verdict_plan plan;
  const char *refusal_substrings; /* HarmBench's refusal_substrings.json: the judge of replies */
  const char *toward_target;      /* the series' R2D2 toward target (NULL: none): refusal_string = auto's text */
  bool start_over;                /* replace results scored under another plan */
  int threads;                    /* <= 0 = all CPUs */
  FILE *log;                      /* NULL = quiet */
} rg_geometry_opts;

/* The default plan, all CPUs, quiet (refusal_substrings must be set). */
rg_geometry_opts rg_geometry_opts_default(void);

/* Runs the pipeline over SERIES (every step must be complete in ACTS_PATH)
 * and writes into OUT_DIR (created) plan.ini, plan.sha256, geometry.csv,
 * carriers.csv, migration.csv, sensitivity.csv, pareto.csv,
 * prompt_scores.csv, probes.csv, transfer.csv, directions.h5, verdict.json and
 * verdict.txt (its words).
 * Returns 0 (whatever the verdict), or -1 with the error set. */
int rg_geometry_run(const char *acts_path, const rg_checkpoint_series *series, const char *out_dir,
                    const rg_geometry_opts *opts);

#endif
