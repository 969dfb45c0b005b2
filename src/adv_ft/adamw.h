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
 * get_cosine_schedule_with_warmup; the elementwise update itself is a
 * backend operation (rg_op_adamw, backend/backend.h), so it runs where the
 * weights live.
 */
#ifndef RG_ADV_FT_ADAMW_H
#define RG_ADV_FT_ADAMW_H

#include <stddef.h>

typedef struct {
  double beta1, beta2, eps, weight_decay;
} rg_adamw_hparams;

/* torch.optim.AdamW's defaults but weight_decay 0 (transformers' default). */
rg_adamw_hparams rg_adamw_defaults(void);

/* torch.nn.utils.clip_grad_norm_: the factor min(1, max_norm / (total_norm
 * + 1e-6)) that scales every gradient, given the global L2 norm. */
double rg_grad_clip_coef(double total_norm, double max_norm);

/* transformers get_cosine_schedule_with_warmup (num_cycles 0.5): the
 * learning rate at optimizer step `step` (0-based) of `total`. */
double rg_lr_cosine(double base_lr, long step, long warmup, long total);

#endif
