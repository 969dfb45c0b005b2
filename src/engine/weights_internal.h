/* weights_internal.h: the rg_weights struct, shared by weights.c (which
 * fills it) and the sessions (forward.c, backward.c), which read it. */
#ifndef RG_WEIGHTS_INTERNAL_H
#define RG_WEIGHTS_INTERNAL_H

#include "engine/weights.h"

/* The linear modules LoRA can adapt, in the order of weights.h's RG_LORA_*
 * bits (bit 1 << m is module m). */
enum { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_MODULES };

/* One module's adapter, y += scale * (x A^T) B^T: a [rank, in] and b
 * [out, rank], float32; both NULL when the module is not adapted. */
typedef struct {
  rg_bweight *a, *b;
} lora_pair;

typedef struct {
  rg_bweight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv;
  rg_bweight *ffn_norm, *w_gate, *w_up, *w_down;
  lora_pair lora[LORA_MODULES];
} layer_w;

struct rg_weights {
  const rg_model *m;
  rg_backend *be;
  layer_w *lw;                               /* [n_layers] */
  rg_bweight *tok_embd, *out_norm, *lm_head; /* lm_head == tok_embd when tied */
  rg_buf *inv_freq;                          /* [head_dim/2] RoPE frequencies */
  /* every tensor of the model, in the parameter order of weights.h (what
   * rg_weights_export_* enumerates) */
  int n_model;
  const rg_tensor **model_tensors;
  rg_bweight **model_params;
  /* the trainable parameters (weights.h): the model's arrays above, or,
   * after rg_weights_add_lora, the adapters' own */
  int n_params;
  const rg_tensor **tensors;
  rg_bweight **params;
  /* LoRA (lora.c): rank 0 when there are no adapters */
  int lora_rank;
  float lora_scale;        /* alpha / rank */
  rg_tensor *lora_tensors; /* [n_params] the adapters' descriptions (data NULL) */
  bool trainable;
  bool owns_backend; /* rg_weights_open */
};

/* lora.c: the adapters' share of a pass, for forward.c and backward.c.
 * y += scale * (x A^T) B^T for the n rows of x, with U [n, rank] scratch;
 * a no-op when P is not adapted. */
void rg_lora_forward(const rg_weights *w, const lora_pair *p, rg_buf *y, const rg_buf *x, int n, rg_buf *u);
/* Its backward given dy: dB += dy^T u, dA += du^T x and dx += du A with
 * u = scale x A^T (recomputed in U) and du = scale dy B (in DU). dA and dB
 * may be NULL (input gradient only). */
void rg_lora_backward(const rg_weights *w, const lora_pair *p, rg_buf *da, rg_buf *db, rg_buf *dx, const rg_buf *dy,
                      const rg_buf *x, int n, rg_buf *u, rg_buf *du);
/* OUT holds base weight BW's values ([out, in] float32): adds
 * scale * B A when BW's module is adapted. Returns 0 or -1. */
int rg_lora_merge(const rg_weights *w, const rg_bweight *bw, float *out);
/* Frees the adapters (rg_weights_free). */
void rg_lora_free(rg_weights *w);

#endif
