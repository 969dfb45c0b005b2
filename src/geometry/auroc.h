/* auroc.h: how well a direction separates harmful from harmless prompts.
 *
 * AUROC = P(score_harmful > score_harmless) + 1/2 P(equal), i.e. the
 * Mann-Whitney U of the harmful sample divided by n_harmful * n_harmless,
 * with ties counted 1/2 (midranks), the same number as sklearn's
 * roc_auc_score with harmful as the positive class.
 */
#ifndef RG_GEOMETRY_AUROC_H
#define RG_GEOMETRY_AUROC_H

#include <stdbool.h>

/* NaN when either sample is empty or holds a NaN (no ordering exists). */
double rg_auroc(const double *harmful, int n_harmful, const double *harmless, int n_harmless);

/* The AUROC of the values X[i] with POSITIVE[i] against those without
 * (rg_auroc of the two groups); *N_POS and *N_NEG get the group sizes.
 * NaN when either group is empty or on no memory. */
double rg_auroc_split(const double *x, const bool *positive, int n, int *n_pos, int *n_neg);

/* Projections of the n rows of X (n x d, row-major) onto the unit vector
 * along dir: out[i] = X_i . dir / |dir|. A zero dir gives NaN projections. */
void rg_project_rows(const double *X, int n, int d, const double *dir, double *out);

#endif
