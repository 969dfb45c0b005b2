/* optimizer.h: one optimizer update of a model being trained.
 *
 * Ties together the pieces of a training step after the backward passes of
 * its micro-batches: the gradients accumulated in an rg_grads (backward.h),
 * clipping by their global L2 norm, and AdamW (adamw.h) on the model's
 * float32 parameters (rg_model_to_f32, model.h), which a CPU session
 * computes with in place.
 *
 * Ownership: the optimizer borrows the model and the gradients (both must
 * outlive it) and owns the AdamW moments and a host copy of the gradients.
 */
#ifndef RG_ADV_FT_OPTIMIZER_H
#define RG_ADV_FT_OPTIMIZER_H

#include "adv_ft/adamw.h"
#include "model/backward.h"
#include "model/model.h"

typedef struct rg_optimizer rg_optimizer;

/* M must have been converted with rg_model_to_f32, and G made for a session
 * of M. NULL with the error set. */
rg_optimizer *rg_optimizer_new(rg_model *m, rg_grads *g, const rg_adamw_hparams *h);
void rg_optimizer_free(rg_optimizer *o);

/* Clips the accumulated gradients to a global L2 norm of max_norm (<= 0:
 * no clipping), applies one AdamW update with learning rate lr, and writes
 * the norm before clipping to *grad_norm (may be NULL). The gradients are
 * left as they were: zero them before the next step's micro-batches. */
void rg_optimizer_step(rg_optimizer *o, double lr, double max_norm, double *grad_norm);

#endif
