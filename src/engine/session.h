/* engine/session.h: what a session holds, by kind (what `refgeo train
 * --plan` reports per session).
 *
 * Backend bytes are read from the buffers the session actually allocated
 * (their sizes in floats, rg_buf.n; a batch's metadata as the CPU backend
 * keeps it), so the figures follow rg_session_new and
 * its training buffers whatever they allocate; on a plan backend
 * (backend/plan.h) they add up to the bytes the backend counted. Host bytes
 * are the session's own host arrays, from the same sizes its allocation
 * uses. Any backend, any session.
 */
#ifndef RG_SESSION_MEMORY_H
#define RG_SESSION_MEMORY_H

#include <stddef.h>

#include "engine/forward.h"

typedef struct {
  size_t kv_cache;    /* every layer's K and V cache */
  size_t work;        /* the pass's working activations, LoRA scratch, batch metadata, intervention vectors,
                       * sequence parallelism's gathered / exchanged rows */
  size_t saved_layer; /* a training session: one block's saved activations (every block the same), else 0 */
  int saved_layers;   /* blocks with saved activations (n_layers for a training session, else 0) */
  size_t saved_other; /* a training session: the last block's output and silu(gate) * up (with
                       * recompute, and the one block's activations it recomputes into) */
  size_t backward;    /* a training session: the backward pass's activation gradients and cache-shaped ones */
  size_t logits;      /* logit rows: final-norm rows, logits, losses (and their gradients when training) */
  size_t backend;     /* all of the above: kv_cache + work + saved_layer * saved_layers + saved_other + backward + logits */
  size_t host;        /* host arrays: positions, rows, hooked rows and their copy, the training logit rows */
} rg_session_bytes;

void rg_session_memory(const rg_session *s, rg_session_bytes *out);

#endif
