/* optimizer.h: one optimizer update of a model being trained.
 *
 * Ties together the pieces of a training step after the backward passes of
 * its micro-batches: the gradients accumulated in an rg_grads (backward.h),
 * clipping by their global L2 norm, and AdamW (adamw.h) on the trainable
 * weights (rg_weights_make_trainable, weights.h). Everything runs on the
 * weights' backend (rg_op_sum_squares, rg_op_adamw), with the moments in
 * backend buffers, so every session on those weights sees the update.
 *
 * Ownership: the optimizer borrows the weights and the gradients (both must
 * outlive it) and owns the AdamW moments.
 */
#ifndef RG_ADV_FT_OPTIMIZER_H
#define RG_ADV_FT_OPTIMIZER_H

#include "adv_ft/adamw.h"
#include "adv_ft/zero.h"
#include "engine/backward.h"
#include "engine/weights.h"

typedef struct rg_optimizer rg_optimizer;

/* W must be trainable, and G made for a training session on W. NULL with
 * the error set. */
rg_optimizer *rg_optimizer_new(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h);
void rg_optimizer_free(rg_optimizer *o);

/* The same over ZeRO's shards (zero.h, borrowed: it must outlive the
 * optimizer): the moments are this rank's shard's, and a step updates the
 * shard and gathers the parameters. NULL with the error set. */
rg_optimizer *rg_optimizer_new_zero(rg_weights *w, rg_grads *g, const rg_adamw_hparams *h, rg_zero *z);
/* The optimizer's ZeRO partition, or NULL. */
rg_zero *rg_optimizer_zero(const rg_optimizer *o);
/* With ZeRO: floats [at, at + n) of this rank's moments (m and v of
 * rg_zero_shard_floats floats each; a NULL one is skipped), downloaded or
 * set. 0, or -1 with the error set. */
int rg_optimizer_get_shard(const rg_optimizer *o, size_t at, size_t n, float *m, float *v);
int rg_optimizer_set_shard(rg_optimizer *o, size_t at, size_t n, const float *m, const float *v);

/* Clips the accumulated gradients to a global L2 norm of max_norm (<= 0:
 * no clipping), applies one AdamW update with learning rate lr, and writes
 * the norm before clipping to *grad_norm (may be NULL). The gradients are
 * left as they were: zero them before the next step's micro-batches.
 * Returns 0, or -1 with the error set (a backend failure). */
int rg_optimizer_step(rg_optimizer *o, double lr, double max_norm, double *grad_norm);

/* Makes O's steps plain SGD, torch.optim.SGD without momentum or
 * dampening: theta -= lr (s g + weight_decay theta), s the clipping factor.
 * Not with ZeRO. The AdamW moments stay allocated (and saved as zeros), so
 * a state has the same files. The update runs on the host (download,
 * update, upload): it is meant for checks that need a linear inner
 * optimizer (islands with H = 1 against data parallelism), not for speed.
 * 0, or -1 with the error set (O has ZeRO). */
int rg_optimizer_use_sgd(rg_optimizer *o);

/* Optimizer steps taken so far. */
long rg_optimizer_steps(const rg_optimizer *o);

/* What resuming a run needs: parameter i's moments as float32 (m and v,
 * nelems floats each), and setting them and the step count back. Returns 0,
 * or -1 with the error set (a backend failure). */
int rg_optimizer_get_moments(const rg_optimizer *o, int i, float *m, float *v);
int rg_optimizer_set_moments(rg_optimizer *o, int i, const float *m, const float *v);
void rg_optimizer_set_steps(rg_optimizer *o, long steps);

#endif
