/* r2d2_loss.h: R2D2's training loss over one batch (HarmBench 8e1604d,
 * adversarial_training/alignment-handbook/scripts/adv_training_utils.py,
 * "ATU" below), seeded into a training session for one backward pass.
 *
 * A batch holds three kinds of examples: utility examples (supervised on
 * their completion tokens), away examples (a test case followed by its GCG
 * target: the model is pushed away from the target) and toward examples
 * (the same test case followed by the refusal: the model is pulled toward
 * it). Each logit row of the session's last eval is one supervised
 * position, predicting targets[r] (the next token), of one kind. Then
 *   utility = mean cross entropy over the utility rows      (ATU:1272-1278)
 *   toward  = mean cross entropy over the toward rows       (ATU:1264-1270)
 *   away    = -sum_r term_r / (number of away rows),        (ATU:451-488)
 *             term_r = log(1 - p_r), or 0 where log p_r < away_log_p_min;
 *             the dropped rows still count in the denominator, as coded
 *   total   = w_utility utility + w_away away + w_toward toward  (ATU:1281)
 * A kind without rows contributes 0 (HarmBench's mean over no tokens would
 * be NaN), so a batch may hold any subset of the kinds.
 */
#ifndef RG_R2D2_LOSS_H
#define RG_R2D2_LOSS_H

#include <stdint.h>

#include "dist/comm.h"
#include "engine/forward.h"

typedef enum { RG_R2D2_UTILITY, RG_R2D2_AWAY, RG_R2D2_TOWARD } rg_r2d2_kind;

typedef struct {
  float w_utility, w_away, w_toward; /* the loss weights */
  float away_log_p_min;              /* the away threshold on log p */
  /* NULL: the rows are the whole batch's. Otherwise they are this rank's
   * part of a batch split over the ranks of SP (sequence parallelism,
   * forward.h): each kind's row count, and so every row's weight and the
   * per-kind means, are the whole batch's (summed over the ranks), and a
   * rank may hold no rows at all. */
  rg_comm *sp;
} rg_r2d2_loss_opts;

/* HarmBench's constants: weights 1, 0.5, 0.5 (ATU:1281), threshold -5
 * (ATU:451, log_1_minus_p_loss's default). */
rg_r2d2_loss_opts rg_r2d2_loss_defaults(void);

typedef struct {
  double total, utility, away, toward; /* nats */
  int n_utility, n_away, n_toward;     /* rows of each kind */
} rg_r2d2_losses;

/* After rg_session_eval (logits left on the backend) of a batch with
 * n_rows logit rows, row r of kind[r] predicting targets[r]: computes the
 * losses into *out and seeds the gradient of out->total for
 * rg_session_backward (backward.h; added to any loss already seeded since
 * the eval). Returns 0, or -1 with the error set (n_rows not the eval's,
 * unknown kind, target out of range, not a training session). */
int rg_r2d2_loss(rg_session *s, const rg_r2d2_loss_opts *o, const rg_r2d2_kind *kind, const int32_t *targets,
                 int n_rows, rg_r2d2_losses *out);

#endif
