/* selection.h: admissible refusal carriers and the best one, following
 * refusal_direction's select_direction (docs/refusal-geometry.md section 6).
 *
 * A candidate (pos, layer) carries three scores: bypass (RD "refusal_score",
 * mean refusal log-odds on harmful prompts under ablation; low is better),
 * induce (RD "steering_score", on harmless prompts under +r; high is better)
 * and kl (KL on harmless prompts under ablation; small is better). It is
 * admissible unless, checked in RD filter_fn's order:
 *   a score is not finite                      RG_REJECT_NONFINITE
 *   layer_cap and layer >= floor((1 - prune_frac) * n_layers)
 *                                              RG_REJECT_LAYER
 *   kl > kl_max                                RG_REJECT_KL
 *   induce < induce_min                        RG_REJECT_INDUCE
 * Survivors are ordered by ascending bypass; ties keep RD's loop order
 * (pos -n_pos .. -1, then layer 0 .. L-1), whatever order the candidates are
 * given in. The best carrier is the first survivor.
 */
#ifndef RG_GEOMETRY_SELECTION_H
#define RG_GEOMETRY_SELECTION_H

#include <stdbool.h>

typedef struct {
  int pos;   /* relative eoi position, -n_pos .. -1 */
  int layer; /* 0 .. n_layers-1, the input of that decoder block */
  double bypass, induce, kl;
} rg_candidate;

typedef struct {
  double kl_max;     /* RD kl_threshold, 0.1 */
  double induce_min; /* RD induce_refusal_threshold, 0.0 */
  bool layer_cap;    /* RD prunes late layers; true by default */
  double prune_frac; /* RD prune_layer_percentage, 0.2 */
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

/* Ownership: rg_select allocates the arrays; rg_selection_free releases them. */
typedef struct {
  int n_candidates;
  int layer_limit;          /* floor((1 - prune_frac) * n_layers), or n_layers with no cap */
  rg_reject_reason *reason; /* [n_candidates] */
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
