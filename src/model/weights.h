/* weights.h: a model's weights prepared for one backend, shared by sessions.
 *
 * rg_weights_new prepares every tensor of a loaded model once for a backend
 * (rg_backend_weight), and the RoPE frequencies as a backend buffer. Any
 * number of sessions (forward.h) compute with one rg_weights, so a model is
 * held once whether one inference session uses it or a training session,
 * an attack's gradient session and its candidate session run side by side.
 *
 * Weights change only through this object, and sessions hold pointers to
 * its prepared weights, not copies, so every session sees a change as soon
 * as it is made: rg_weights_make_trainable turns every parameter into a
 * writable float32 copy in backend memory in place, and the optimizer
 * (adv_ft/optimizer.h) updates those with backend operations. The model
 * itself is never modified.
 *
 * Ownership: the weights borrow the model (it must outlive them) and the
 * backend given to rg_weights_new (rg_weights_open's is theirs); free every
 * session made from them first.
 */
#ifndef RG_WEIGHTS_H
#define RG_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/backend.h"
#include "model/model.h"

typedef struct rg_weights rg_weights;

/* How non-f32 matrices are kept (backend.h, rg_weight_form). */
typedef enum {
  RG_WEIGHTS_AUTO = 0, /* float32 when the model's f32 matrices take < 25% of RAM */
  RG_WEIGHTS_TILED,    /* the file dtype, dequantized in tiles by each matmul */
  RG_WEIGHTS_F32       /* always float32 */
} rg_weight_mode;

/* Checks M's configuration and tensor shapes and prepares them on BE. NULL
 * with the error set. */
rg_weights *rg_weights_new(const rg_model *m, rg_backend *be, rg_weight_mode mode);
/* The common case: a backend made from BO (rg_backend_new) and M's weights
 * prepared on it, owned together (rg_weights_free frees the backend too). */
rg_weights *rg_weights_open(const rg_model *m, const rg_backend_opts *bo, rg_weight_mode mode);
void rg_weights_free(rg_weights *w);

const rg_model *rg_weights_model(const rg_weights *w);
rg_backend *rg_weights_backend(const rg_weights *w);
/* Bytes of backend memory the weights hold beyond the file maps. */
size_t rg_weights_bytes(const rg_weights *w);

/* Makes every parameter a writable float32 copy in backend memory (what an
 * optimizer updates), in place: sessions made earlier compute with the
 * copies from their next call. Idempotent. Returns 0, or -1 with the error
 * set (out of memory; the parameters converted so far stay converted). */
int rg_weights_make_trainable(rg_weights *w);
bool rg_weights_trainable(const rg_weights *w);

/* The parameters, one per distinct tensor (a tied head is the embedding),
 * in a fixed order: per block attn_norm, q, k, v, o, [q, k, v biases],
 * ffn_norm, gate, up, down; then the embedding, the final norm and an untied
 * lm_head. rg_tensor_nelems(tensor) floats each. */
int rg_weights_count(const rg_weights *w);
const rg_tensor *rg_weights_tensor(const rg_weights *w, int i);
rg_bweight *rg_weights_param(rg_weights *w, int i);
/* Parameter i's current values as float32 into out[nelems]. Returns 0 or -1. */
int rg_weights_download(const rg_weights *w, int i, float *out);
/* Sets parameter i of trainable weights to in[nelems] (a run resumed from
 * its saved state). Returns 0, or -1 with the error set. */
int rg_weights_upload(rg_weights *w, int i, const float *in);

#endif
