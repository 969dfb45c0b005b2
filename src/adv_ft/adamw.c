/* adamw.c: AdamW with HarmBench's R2D2 settings and its learning-rate schedule (adamw.h). */
#include "adv_ft/adamw.h"

#include <math.h>

rg_adamw_hparams rg_adamw_defaults(void) {
  return (rg_adamw_hparams){.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};
}

double rg_grad_clip_coef(double total_norm, double max_norm) {
  const double c = max_norm / (total_norm + 1e-6);
  return c < 1 ? c : 1;
}

double rg_lr_cosine(double base_lr, long step, long warmup, long total) {
  if (step < warmup) return base_lr * (double)step / (double)(warmup > 1 ? warmup : 1);
  const double progress = (double)(step - warmup) / (double)(total - warmup > 1 ? total - warmup : 1);
  const double f = 0.5 * (1 + cos(M_PI * progress)); /* num_cycles 0.5: half a cosine */
  return base_lr * (f > 0 ? f : 0);
}
