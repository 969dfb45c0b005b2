/* islands_outer.h: the outer step of training across islands (DiLoCo,
 * arXiv 2311.08105; docs/training.md, "Islands").
 *
 * The islands' pseudo-gradients Delta_i = theta_global - theta_i are merged
 * as a weighted mean, sum_i w_i Delta_i / sum_i w_i (the coordinator passes
 * them in island-id order, so the float sums do not depend on arrival), and
 * the mean g is the gradient of torch.optim.SGD with PyTorch's semantics
 * (https://pytorch.org/docs/stable/generated/torch.optim.SGD.html,
 * dampening 0, no weight decay):
 *   b_1 = g_1;  b_t = mu b_{t-1} + g_t;
 *   nesterov: g <- g + mu b_t, else g <- b_t (mu = 0: g itself);
 *   theta <- theta - lr g.
 * Here the step is split so that every copy of theta stays bitwise equal:
 * rg_outer_update computes the update u = lr g, the coordinator encodes it
 * (islands_quant.h) and both it and every island apply the decoded u' with
 * rg_outer_apply (theta <- theta - u'), the same float operation on the
 * same bits.
 *
 * Ownership: callers own every array.
 */
#ifndef RG_ADV_FT_ISLANDS_OUTER_H
#define RG_ADV_FT_ISLANDS_OUTER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  double lr, momentum;
  bool nesterov;
} rg_outer_hparams;

/* MEAN[0..n) = sum_k W[k] D[k][.] / sum_k W[k] over the K contributions
 * in the order given (sum in double, one rounding to float). The weights
 * must be positive. rg_outer_accumulate (ACC += w D, ACC zeroed first) and
 * rg_outer_mean (MEAN = ACC / TOTAL) do the same one contribution at a
 * time, with the same result. */
void rg_outer_merge(float *mean, const float *const *d, const double *w, int k, size_t n);
void rg_outer_accumulate(double *acc, const float *d, double w, size_t n);
void rg_outer_mean(float *mean, const double *acc, double total, size_t n);

/* One SGD step's update into U[0..n) from the gradient G (the merged
 * pseudo-gradient) and the momentum buffer B (updated; FIRST: B is
 * set to G, PyTorch's b_1 = g_1). Float32 arithmetic, as torch's on float32
 * tensors. */
void rg_outer_update(const rg_outer_hparams *h, float *u, const float *g, float *b, bool first, size_t n);

/* THETA[i] -= U[i]. */
void rg_outer_apply(float *theta, const float *u, size_t n);

#endif
