/* geometry_csv.h: the three geometry result tables (docs/csv-formats.md
 * documents every column). Writers only; each writes the whole file
 * atomically (util/csv_write.h) and returns 0, or -1 with the error set.
 * Row structs borrow their strings. Angles are in degrees.
 */
#ifndef RG_GEOMETRY_GEOMETRY_CSV_H
#define RG_GEOMETRY_GEOMETRY_CSV_H

#include "geometry/migration.h"
#include "geometry/selection.h"
#include "geometry/spectrum.h"

/* geometry.csv: one row per step x layer x position. */
typedef struct {
  long step;
  const char *checkpoint; /* path or name of the checkpoint */
  int layer, pos;
  const char *hook; /* TransformerLens name, e.g. "blocks.5.hook_resid_pre" */
  long long n_harmful, n_harmless;
  double dir_norm;                   /* |r[pos, layer]| */
  double cos_step0, angle_step0_deg; /* vs the same (pos, layer) at step 0 */
  double cos_prev, angle_prev_deg;   /* vs the previous step */
  double auroc;                      /* harmful vs harmless projections onto r */
  rg_spectrum_measures spectrum;
  const char *matrix; /* what the spectrum was computed on */
  const char *prompts; /* "filtered" (RD's prompt filter) or "all" */
} rg_geometry_row;

int rg_write_geometry_csv(const char *path, const rg_geometry_row *rows, int n);

/* carriers.csv: one row per candidate per step. */
typedef struct {
  long step;
  rg_candidate c;
  rg_reject_reason reason;
  unsigned fails; /* RG_FAIL_* bits: the pass_* columns */
  int rank;       /* 0-based among the step's survivors, -1 if rejected */
} rg_carrier_row;

/* The n_candidates rows of one step's selection, into out[sel->n_candidates]. */
void rg_carrier_rows_fill(rg_carrier_row *out, long step, const rg_candidate *c, const rg_selection *sel);

int rg_write_carriers_csv(const char *path, const rg_carrier_row *rows, int n);

/* migration.csv: one row per step. */
int rg_write_migration_csv(const char *path, const rg_migration_row *rows, int n);

/* sensitivity.csv: one row per step and KL budget (reported, never deciding). */
typedef struct {
  long step;
  double kl_max;
  int n_admissible;
  int best_pos, best_layer; /* best_layer -1: none admissible */
  double best_bypass;
} rg_sensitivity_row;

int rg_write_sensitivity_csv(const char *path, const rg_sensitivity_row *rows, int n);

/* pareto.csv: the candidates no other candidate beats on both bypass and KL. */
typedef struct {
  long step;
  int pos, layer;
  double bypass, kl;
} rg_pareto_row;

int rg_write_pareto_csv(const char *path, const rg_pareto_row *rows, int n);

/* probes.csv: how well each direction reads the checkpoint's own refusals. */
typedef struct {
  long step;
  int layer, pos;
  double auroc; /* projections onto r-hat[p, l]: refused vs complied harmful val prompts */
  int n_refused, n_complied;
} rg_probe_row;

int rg_write_probes_csv(const char *path, const rg_probe_row *rows, int n);

/* transfer.csv: one step's best direction scored in another step's model:
 * its carrier (the selection's best), or with the plan's transfer_layers
 * its best direction at each layer. */
typedef struct {
  long from_step, to_step;
  int pos, layer; /* the direction's candidate at from_step */
  bool carrier;   /* the step's selected candidate (else a layer's best) */
  double bypass, induce;              /* in to_step's model, on its val prompts */
  double base_harmful, base_harmless; /* to_step's unintervened means of the same prompts */
} rg_transfer_row;

int rg_write_transfer_csv(const char *path, const rg_transfer_row *rows, int n);

/* prompt_scores.csv: every per-prompt score behind a step's means (long form). */
typedef struct {
  long step;
  const char *kind;    /* "candidate", "null" or "base" (static) */
  int pos, layer;      /* candidate only */
  int null_index;      /* null only */
  const char *split;   /* "harmful_val" or "harmless_val" (static) */
  int prompt;          /* index in the activation file's split */
  const char *measure; /* "bypass", "kl", "induce" or "score" (static) */
  double value;
} rg_prompt_score_row;

int rg_write_prompt_scores_csv(const char *path, const rg_prompt_score_row *rows, long n);

#endif
