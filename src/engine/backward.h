/* backward.h: gradients of a training session's last forward pass.
 *
 * A session made with rg_session_opts.train keeps every block's activations
 * of its last rg_session_eval. After that eval (whose batch must hold whole
 * sequences, each one starting at position 0 in that call, unless only the
 * input gradient is asked for: then the batch may continue cached tokens,
 * whose keys and values are constants of the pass, as GCG's cached prefix),
 *   1. rg_session_loss_ce computes the cross entropy of the eval's logit rows
 *      against targets and seeds the gradient of the weighted loss sum;
 *      rg_session_loss_away does the same for the unlikelihood (away) loss.
 *      Several losses may be seeded after one eval: each ADDS its gradient
 *      to the loss gradient (the first one after an eval or a backward
 *      starts it from zero), so one backward differentiates their sum, as
 *      R2D2's utility + away + toward loss over one batch needs;
 *   2. rg_session_backward runs the blocks in reverse with the backend's
 *      gradient operations and ADDS the gradient of every parameter into an
 *      rg_grads (zero it between optimizer steps; not between micro-batches),
 *      and can return the gradient with respect to the token embeddings of
 *      the batch (what GCG differentiates).
 * Interventions set on the session are differentiated too (ablation is its
 * own backward; activation addition passes gradients through unchanged);
 * unlike the plain pass, that path is not yet checked against a reference.
 *
 * Ownership: an rg_grads belongs to the session it was made for and must be
 * freed (rg_grads_free) before that session.
 */
#ifndef RG_BACKWARD_H
#define RG_BACKWARD_H

#include <stddef.h>
#include <stdint.h>

#include "engine/forward.h"

typedef struct rg_grads rg_grads;

/* One float32 gradient buffer per parameter of the session's weights
 * (weights.h, in their order; a tied head shares the embedding's). NULL
 * with the error set (not a training session, out of memory). */
rg_grads *rg_grads_new(rg_session *s);
void rg_grads_free(rg_grads *g);
void rg_grads_zero(rg_grads *g);

/* Gradients whose transformer blocks share one block's buffers (parameter
 * k of every block is parameter k of block 0, where their sizes agree):
 * for a caller that takes each block's gradient away as soon as its
 * backward is done (rg_grads_set_block_hook) and leaves those buffers zero,
 * as ZeRO-2 does (adv_ft/zero.h). The embedding, the final norm and an
 * untied head keep buffers of their own. NULL with the error set. */
rg_grads *rg_grads_new_per_block(rg_session *s);

/* rg_session_backward calls HOOK(CTX, l) after the backward of block l
 * (from the last block down; every parameter gradient of block l is then
 * complete for this pass) and HOOK(CTX, -1) at its end (the embedding, the
 * final norm and the head); a hook returning -1 fails the backward. NULL
 * removes it. Only a backward with parameter gradients calls it. */
void rg_grads_set_block_hook(rg_grads *g, int (*hook)(void *ctx, int block), void *ctx);

/* Backend bytes of the gradient buffers (a shared buffer once). */
size_t rg_grads_bytes(const rg_grads *g);

/* The parameters, in the weights' order: count, the tensor of entry i (its
 * Hugging Face name is tensor->name), its gradient buffer on the backend,
 * and that gradient downloaded to out[rg_tensor_nelems(tensor)] in the
 * tensor's own element order (0 or -1 with the error set). */
int rg_grads_count(const rg_grads *g);
const rg_tensor *rg_grads_tensor(const rg_grads *g, int i);
rg_buf *rg_grads_buf(const rg_grads *g, int i);
int rg_grads_download(const rg_grads *g, int i, float *out);

/* Sums every gradient over the ranks of C, in place (sequence parallelism:
 * each rank's backward gives its tokens' share; data parallelism: each
 * rank's micro-batch). Returns 0, or -1 with the error set. */
int rg_grads_allreduce(rg_grads *g, rg_comm *c);

/* The logit rows of the last eval of a training session (what a loss
 * reads: its targets, scale and losses have this many entries); 0 for an
 * inference session. */
int rg_session_loss_rows(const rg_session *s);

/* Cross entropy of the last eval's logit rows: row r (r < n_logits of that
 * eval) against targets[r], weighted by scale[r] (0 skips a row). Writes
 * losses[r] (nats) of every row and adds the gradient of
 * sum_r scale[r] * losses[r] to the loss gradient for rg_session_backward.
 * Returns 0, or -1 with the error set. */
int rg_session_loss_ce(rg_session *s, const int32_t *targets, const float *scale, float *losses);

/* The away (unlikelihood) loss of the same rows (backend.h,
 * rg_op_unlikelihood): losses[r] = -log(1 - p(targets[r])), or 0 where
 * log p < log_p_min; adds the gradient of sum_r scale[r] * losses[r] as
 * rg_session_loss_ce does. Returns 0, or -1 with the error set. */
int rg_session_loss_away(rg_session *s, const int32_t *targets, const float *scale, float log_p_min, float *losses);

/* Adds the gradient of the losses seeded since the last eval (the sum of
 * each one's sum_r scale[r] * losses[r]) into G (NULL: no
 * parameter gradients, as an attack needs); if d_embed is not NULL, writes
 * the gradient with respect to the batch's token embeddings (the eval's n
 * rows of d_model floats). Returns 0, or -1 with the error set
 * (no loss set, parameter gradients of a batch that continued cached
 * sequences). */
int rg_session_backward(rg_session *s, rg_grads *g, float *d_embed);

#endif
