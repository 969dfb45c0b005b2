/* selection.h: admissible refusal carriers and the best one, following
 * refusal_direction's select_direction (docs/refusal-geometry.md section 6).
 *
 * A candidate (pos, layer) carries three scores: bypass (RD "refusal_score",
 * mean refusal log-odds on harmful prompts under ablation; low is better),
 * induce (RD "steering_score", on harmless prompts under +r; high is better)
 * and kl (KL on harmless prompts under ablation; small is better), and
 * induce_norm, the fraction of the baseline gap that induce recovers:
 *   (induce - base_harmless) / (base_harmful - base_harmless)
 * with the unintervened mean scores of the same val prompts (1 = harmless
 * prompts score like harmful ones; NaN when the gap is not positive).
 * It is admissible unless, checked in RD filter_fn's order:
 *   a score is not finite                      RG_REJECT_NONFINITE
 *   layer_cap and layer >= floor((1 - prune_frac) * n_layers)
 *                                              RG_REJECT_LAYER
 *   kl > kl_max                                RG_REJECT_KL
 *   RD rule: induce < induce_min, or
 *   normalized rule: induce_norm < induce_frac_min
 *                                              RG_REJECT_INDUCE
 * reason[] names the first filter a candidate fails; fails[] has a bit for
 * every filter it fails, each tested on its own (carriers.csv's pass_*
 * columns). Survivors are ordered by ascending bypass; ties keep RD's loop
 * order (pos -n_pos .. -1, then layer 0 .. L-1), whatever order the
 * candidates are given in. The best carrier is the first survivor.
 */
#ifndef RG_GEOMETRY_SELECTION_H
#define RG_GEOMETRY_SELECTION_H

#include <stdbool.h>

typedef struct {
  int pos;   /* relative eoi position, -n_pos .. -1 */
  int layer; /* 0 .. n_layers-1, the input of that decoder block */
  double bypass, induce, kl;
  double induce_norm; /* only read by the normalized induce rule */
} rg_candidate;

/* The baseline-gap fraction above; NaN when base_harmful <= base_harmless. */
double rg_induce_normalized(double induce, double base_harmful, double base_harmless);

typedef enum {
  RG_INDUCE_RD,        /* induce >= induce_min (refusal_direction) */
  RG_INDUCE_NORMALIZED /* induce_norm >= induce_frac_min */
} rg_induce_rule;

typedef struct {
  double kl_max;     /* RD kl_threshold, 0.1 */
  double induce_min; /* RD induce_refusal_threshold, 0.0 */
  bool layer_cap;    /* RD prunes late layers; true by default */
  double prune_frac; /* RD prune_layer_percentage, 0.2 */
  rg_induce_rule induce_rule; /* RG_INDUCE_RD */
  double induce_frac_min;     /* 0.5: recovers at least half the gap */
} rg_selection_rules;

/* The RD defaults above. */
rg_selection_rules rg_selection_rules_default(void);

typedef enum {
  RG_REJECT_NONE = 0, /* admissible */
  RG_REJECT_NONFINITE,
  RG_REJECT_LAYER,
  RG_REJECT_KL,
  RG_REJECT_INDUCE
} rg_reject_reason;

/* "", "nonfinite", "layer_cap", "kl", "induce" (the carriers.csv spelling). */
const char *rg_reject_reason_name(rg_reject_reason r);

/* Bits of rg_selection.fails: which filters a candidate fails. */
enum { RG_FAIL_NONFINITE = 1, RG_FAIL_LAYER = 2, RG_FAIL_KL = 4, RG_FAIL_INDUCE = 8 };

/* Ownership: rg_select allocates the arrays; rg_selection_free releases them. */
typedef struct {
  int n_candidates;
  int layer_limit;          /* floor((1 - prune_frac) * n_layers), or n_layers with no cap */
  rg_reject_reason *reason; /* [n_candidates] */
  unsigned *fails;          /* [n_candidates]: RG_FAIL_* bits */
  int *rank;                /* [n_candidates]: 0-based place among survivors, -1 if rejected */
  int n_admissible;
  int *order;               /* [n_admissible]: candidate indices, best first */
  int best;                 /* candidate index of the best carrier, -1 if none survived */
} rg_selection;

/* Selects among n candidates of a model with n_layers layers. Returns 0
 * (also when nothing survives: best = -1), or -1 with the error set for bad
 * input (n_layers <= 0, a layer outside [0, n_layers), a non-negative
 * position, or no memory). */
int rg_select(const rg_candidate *c, int n, int n_layers, const rg_selection_rules *rules, rg_selection *out);
void rg_selection_free(rg_selection *s);

/* Reads refusal_direction's direction_evaluations.json (or the _filtered
 * one): an array of {position, layer, refusal_score, steering_score,
 * kl_div_score}. Python writes NaN / Infinity / -Infinity, which are not
 * JSON; they are read as NaN (such candidates are rejected as non-finite).
 * Returns a malloc'd array (caller frees) and its length in *n, or NULL with
 * the error set ("PATH: ..."). */
rg_candidate *rg_candidates_read_json(const char *path, int *n);

#endif
