/* r2d2_step.h: the two halves of an R2D2 micro-batch on explicit inputs
 * (docs/training.md, "One update"):
 *   rg_r2d2_refresh      GCG steps on one test case, on the current weights,
 *                        towards its away target (its suffix is updated);
 *   rg_r2d2_accumulate   one forward and backward over the away and toward
 *                        examples of some test cases and some utility
 *                        examples, adding the gradient of R2D2's loss.
 * The trainer (trainer.h) draws the inputs (pool entries, utility order)
 * and calls these; test_r2d2_update calls them on a torch reference's
 * inputs, so that what is checked is the trainer's own update.
 *
 * A test case is laid out as test_case.h says: the away example ends with
 * the away target, the toward example with the refusal and the
 * tokenizer's EOS (HarmBench ATU:1154-1203); each target is tokenized on
 * its own (quirk h).
 *
 * Ownership: an rg_r2d2_step borrows the model, frame, sessions and
 * disallowed-token table, and owns its batch buffers.
 */
#ifndef RG_ADV_FT_R2D2_STEP_H
#define RG_ADV_FT_R2D2_STEP_H

#include <stdint.h>

#include "adv_ft/gcg.h"
#include "adv_ft/r2d2_loss.h"
#include "adv_ft/test_case.h"
#include "adv_ft/utility_data.h"
#include "engine/backward.h"

typedef struct {
  const rg_model *m;
  const rg_test_case_frame *frame;
  rg_session *train;               /* the batch; GCG's token gradient unless gcg_train */
  rg_session *gcg_train;           /* GCG's token gradient (NULL: train); a session of this process alone */
  /* NULL, or the ranks train's batches are split over (sequence
   * parallelism): every rank builds the whole batch and evaluates its part */
  rg_comm *sp;
  rg_session *cand;                /* GCG's candidate losses (NULL: no GCG) */
  const unsigned char *disallowed; /* rg_gcg_disallowed_tokens */
  const char *refusal;             /* the toward target */
  int max_case_tokens;             /* a test case with either target */
  /* the batch, sized by rg_r2d2_step_init */
  int max_tokens;
  int32_t *ids, *targets;
  int *seq, *rows;
  rg_r2d2_kind *kinds;
} rg_r2d2_step;

/* One test case: its behavior text, away target and suffix (updated in
 * place by rg_r2d2_refresh); NAME labels errors (the BehaviorID). */
typedef struct {
  const char *name, *behavior, *target;
  int32_t *suffix;
  int n_suffix;
} rg_r2d2_case;

/* Allocates batch buffers for MAX_TOKENS tokens (the training session's
 * max_batch_tokens). S's other fields are set by the caller. Returns 0 or -1. */
int rg_r2d2_step_init(rg_r2d2_step *s, int max_tokens);
void rg_r2d2_step_free(rg_r2d2_step *s);

/* O->steps GCG steps on C towards its away target; C's suffix becomes the
 * last step's choice and *LOSS (may be NULL) its target loss (NAN without
 * steps). Returns 0, or -1 with the error set (a test case longer than
 * max_case_tokens names the case). */
int rg_r2d2_refresh(rg_r2d2_step *s, rg_r2d2_case *c, const rg_gcg_opts *o, double *loss);

/* The forward and backward pass of the away and toward examples of
 * cases[0..n_cases) and the utility examples utility[0..n_utility), with
 * the loss weights of LO (the caller divides them by the accumulation
 * steps), adding the gradients into G. *OUT gets the losses (unweighted
 * per kind). *N_TOKENS (may be NULL) the batch's tokens. Returns 0, or -1
 * with the error set (more than max_tokens tokens). */
int rg_r2d2_accumulate(rg_r2d2_step *s, const rg_r2d2_case *cases, int n_cases, const rg_utility_example *const *utility,
                       int n_utility, const rg_r2d2_loss_opts *lo, rg_grads *g, rg_r2d2_losses *out, int *n_tokens);

#endif
