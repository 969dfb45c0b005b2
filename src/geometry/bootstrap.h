/* bootstrap.h: how sure a step's carrier is, from per-prompt scores alone
 * (no extra forward passes): bootstrap resamples of the val prompts, the
 * null of random directions, and the selection rerun on every resample.
 *
 * A candidate's bypass is the mean of its per-prompt harmful scores, induce
 * and KL the means of its per-prompt harmless ones (scores.h). A resample
 * draws nh harmful and nl harmless prompt indices with replacement
 * (splitmix64 from the seed: harmful indices first, then harmless, each
 * index = next value mod n), recomputes every candidate's means and the
 * null's, and reruns the selection. A carrier must beat the null: its
 * bypass must lie below the 5th percentile of the null directions' bypass
 * (random unit directions, ablated like any candidate). Percentiles
 * interpolate linearly between order statistics (numpy's default).
 *
 * Ownership: inputs are borrowed; results are plain values.
 */
#ifndef RG_GEOMETRY_BOOTSTRAP_H
#define RG_GEOMETRY_BOOTSTRAP_H

#include <stdint.h>

#include "geometry/selection.h"

typedef struct {
  int n_cand, nh, nl;
  const rg_candidate *cand; /* [n_cand]: pos and layer (its scores are not read) */
  const double *bypass;     /* [n_cand][nh] */
  const double *induce;     /* [n_cand][nl] */
  const double *kl;         /* [n_cand][nl] */
  const double *base_h;     /* [nh] unintervened harmful scores (normalized induce) */
  const double *base_l;     /* [nl] */
  int n_null;
  const double *null_bypass; /* [n_null][nh] */
  int n_layers;
  const rg_selection_rules *rules;
} rg_carrier_samples;

/* The q-th percentile (q in [0, 100]) of x[n] (n >= 1; x is not changed). */
double rg_percentile(const double *x, int n, double q);

/* Every candidate's means over the prompt indices HI[nh] and LI[nl] (NULL:
 * each prompt once) into out[n_cand] (pos and layer copied); *NULL_P5 gets
 * the null's 5th percentile of bypass (NaN without null directions).
 * Returns 0, or -1 with the error set (no memory). */
int rg_carrier_means(const rg_carrier_samples *cs, const int *hi, const int *li, rg_candidate *out, double *null_p5);

/* The selected carrier of one sample: the selection's best when it beats
 * the null (bypass < null_p5, or no null), else -1. *N_ADMISSIBLE gets the
 * selection's count. Returns 0 or -1 with the error set. */
int rg_carrier_select(const rg_candidate *c, int n_cand, int n_layers, const rg_selection_rules *rules,
                      double null_p5, int *best, int *n_admissible);

typedef struct {
  int resamples;
  double carrier_share;      /* share of resamples that select a carrier */
  double layer_lo, layer_hi; /* 2.5 and 97.5 percentiles of the selected layer (resamples with one) */
  /* of the full sample's best candidate BEST over all resamples */
  double bypass_lo, bypass_hi, induce_lo, induce_hi, kl_lo, kl_hi;
} rg_bootstrap_result;

/* B resamples (B >= 1) from SEED. BEST (full-sample carrier index, or -1)
 * names the candidate whose score intervals are reported (NaN when -1).
 * Returns 0, or -1 with the error set. */
int rg_carrier_bootstrap(const rg_carrier_samples *cs, int best, int B, uint64_t seed, rg_bootstrap_result *out);

#endif
