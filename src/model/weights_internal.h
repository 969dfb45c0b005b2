/* weights_internal.h: the rg_weights struct, shared by weights.c (which
 * fills it) and the sessions (forward.c, backward.c), which read it. */
#ifndef RG_WEIGHTS_INTERNAL_H
#define RG_WEIGHTS_INTERNAL_H

#include "model/weights.h"

typedef struct {
  rg_bweight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv;
  rg_bweight *ffn_norm, *w_gate, *w_up, *w_down;
} layer_w;

struct rg_weights {
  const rg_model *m;
  rg_backend *be;
  layer_w *lw;                               /* [n_layers] */
  rg_bweight *tok_embd, *out_norm, *lm_head; /* lm_head == tok_embd when tied */
  rg_buf *inv_freq;                          /* [head_dim/2] RoPE frequencies */
  int n_params;                              /* the parameter list (weights.h) */
  const rg_tensor **tensors;
  rg_bweight **params;
  bool trainable;
  bool owns_backend; /* rg_weights_open */
};

#endif
