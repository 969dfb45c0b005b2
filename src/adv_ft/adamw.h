/* adamw.h: the optimizer of HarmBench's adversarial training recipe.
 *
 * HarmBench's R2D2 recipe trains with transformers' Trainer defaults
 * (HarmBench 8e1604d, adversarial_training/alignment-handbook/
 * src/alignment/configs.py and transformers' TrainingArguments): optim
 * "adamw_torch" with betas
 * (0.9, 0.999), eps 1e-8, weight decay 0, gradient clipping at a global L2
 * norm of 1.0, and a cosine learning-rate schedule without warmup. These
 * functions reproduce torch.optim.AdamW (decoupled weight decay, bias
 * correction), torch.nn.utils.clip_grad_norm_ and transformers'
 * get_cosine_schedule_with_warmup, on float32 host arrays.
 *
 * Ownership: an rg_adamw owns its moment arrays; parameters and gradients
 * belong to the caller.
 */
#ifndef RG_ADV_FT_ADAMW_H
#define RG_ADV_FT_ADAMW_H

#include <stddef.h>

typedef struct {
  double beta1, beta2, eps, weight_decay;
} rg_adamw_hparams;

/* torch.optim.AdamW's defaults but weight_decay 0 (transformers' default). */
rg_adamw_hparams rg_adamw_defaults(void);

typedef struct rg_adamw rg_adamw;

/* Moments for n_tensors parameter tensors of sizes[i] floats, zero. NULL
 * with the error set (out of memory). */
rg_adamw *rg_adamw_new(const rg_adamw_hparams *h, const size_t *sizes, int n_tensors);
void rg_adamw_free(rg_adamw *o);

/* Starts optimizer step t = 1, 2, ... (the bias corrections use it). */
void rg_adamw_begin_step(rg_adamw *o);
long rg_adamw_steps(const rg_adamw *o);

/* Updates tensor i of the current step in place with learning rate lr:
 *   p -= lr * wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * grad is scaled by grad_scale first (the clipping coefficient). */
void rg_adamw_update(rg_adamw *o, int i, float *param, const float *grad, float grad_scale, double lr);

/* torch.nn.utils.clip_grad_norm_: the factor min(1, max_norm / (total_norm
 * + 1e-6)) that scales every gradient, given the global L2 norm. */
double rg_grad_clip_coef(double total_norm, double max_norm);

/* transformers get_cosine_schedule_with_warmup (num_cycles 0.5): the
 * learning rate at optimizer step `step` (0-based) of `total`. */
double rg_lr_cosine(double base_lr, long step, long warmup, long total);

#endif
