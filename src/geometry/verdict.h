/* verdict.h: does the refusal carrier migrate across a checkpoint series?
 *
 * Each step ends in one status: "carrier" (an admissible candidate that
 * beats the random-direction null, in at least half the bootstrap
 * resamples), "carrier in under half the resamples", "nothing beats the
 * null", "none admissible", "no refusal to carry" (the prompt filter kept
 * fewer than N_min refused prompts in a harmful split), or "harmless
 * prompts refused" (it kept fewer than N_min unrefused prompts in a
 * harmless split: too little contrast to take).
 * The verdict, over the steps with status "carrier":
 *   migration     a carrier in the late band is followed, at a later step,
 *                 by one in the early band, their bootstrap intervals of the
 *                 selected layer apart, and no later late carrier is apart
 *                 from that early one (Lan et al. 2026's late-to-early
 *                 relocation); the first such pair in step order is named;
 *   undetermined  fewer than two steps have a carrier (the reason names the
 *                 other steps' statuses); or every late-then-early pair has
 *                 overlapping intervals; or the carrier moves late to early
 *                 and back;
 *   no migration  no late carrier is followed by an early one (the reason
 *                 lists every carrier's layer and band).
 * Bands are those of migration.h (relative depth layer / n_layers).
 * Lan et al.'s claims are then checked one by one against this run's steps
 * (docs/geometry-verdict.md lists the rules).
 */
#ifndef RG_GEOMETRY_VERDICT_H
#define RG_GEOMETRY_VERDICT_H

#include "geometry/migration.h"

typedef enum {
  RG_STEP_CARRIER = 0,
  RG_STEP_BELOW_NULL,
  RG_STEP_NONE_ADMISSIBLE,
  RG_STEP_UNSTABLE,
  RG_STEP_NO_REFUSAL,
  RG_STEP_NO_CONTRAST,
  RG_STEP_STATUSES /* how many there are */
} rg_step_status;

/* A carrier must be selected in at least this share of the bootstrap
 * resamples: one found in fewer is a chance pick of the prompts, and its
 * layer interval, taken over those resamples alone, says nothing of it. */
#define RG_CARRIER_SHARE_MIN 0.5

/* The status's name, as above. */
const char *rg_step_status_name(rg_step_status s);

typedef struct {
  long step;
  rg_step_status status;
  int layer;                 /* the selected layer (status carrier) */
  double layer_lo, layer_hi; /* its bootstrap 95% interval */
  double erank_sigma;        /* of the carrier matrix (NaN without a carrier) */
} rg_verdict_step;

typedef struct {
  const char *verdict; /* "migration", "no migration", "undetermined" (static) */
  char reason[512];
  long from_step, to_step; /* the steps compared (-1 when none) */
  const char *from_band, *to_band;
} rg_verdict;

void rg_verdict_decide(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *bands,
                       rg_verdict *out);

/* One of Lan et al.'s findings checked on this run. */
typedef struct {
  const char *claim;   /* the finding, in words (static) */
  const char *outcome; /* "matched", "contradicted", "not testable" (static) */
  char why[640];
} rg_lan_claim;

enum { RG_LAN_CLAIMS = 4 };

/* Fills out[RG_LAN_CLAIMS]: late carrier kept through step 100, relocation
 * to an early layer after step 100, erank_sigma 1.23-1.27, XSTest over-refusal
 * (not testable from geometry alone). */
void rg_lan_claims_check(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *bands,
                         const rg_verdict *v, rg_lan_claim *out);

#endif
