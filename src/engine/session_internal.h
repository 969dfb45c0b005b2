/* engine/session_internal.h: the session struct shared by session.c (its
 * allocation), forward.c (the pass itself), backward.c (gradients of a
 * training session's last pass) and sp_attention.c. */
#ifndef RG_SESSION_INTERNAL_H
#define RG_SESSION_INTERNAL_H

#include "dist/comm.h"
#include "engine/forward.h"
#include "engine/weights_internal.h"

typedef struct {
  rg_buf *x, *xn, *q, *k, *v, *att, *tmp, *gate, *up; /* [max_batch_tokens, width] */
  rg_buf *last, *logits;                               /* [max_logit_rows, d / vocab] */
  rg_buf *losses;                                      /* [max_logit_rows] */
  rg_buf *hooked;                                      /* [max_batch_tokens, d] rows for hooks */
  rg_buf *lora_u; /* [max_batch_tokens, rank] an adapter's (alpha/r) x A^T (NULL without adapters) */
} act_bufs;

/* Where one block reads and writes its activations. In an inference session
 * these are the shared act_bufs (x_in = x_mid = x_out = x, updated in place);
 * in a training session every block has its own saved copies, which the
 * backward pass reads. k and v live in the KV cache either way. */
typedef struct {
  rg_buf *x_in;  /* resid_pre, after the interventions */
  rg_buf *xn1;   /* attention norm output */
  rg_buf *q;     /* queries after RoPE */
  rg_buf *att;   /* attention output before o_proj */
  rg_buf *lse;   /* [T, n_heads] attention's log-sum-exps (training; Ulysses: head layout) */
  rg_buf *x_mid; /* resid_mid */
  rg_buf *xn2;   /* MLP norm output */
  rg_buf *gate, *up; /* MLP projections before the activation */
} layer_acts;

/* A training session's saved pass and backward scratch (forward.h:
 * rg_session_opts.train). */
typedef struct {
  layer_acts *saved;  /* [n_layers] */
  rg_buf *x_final;    /* [T, d] the last block's output */
  rg_buf *h;          /* [T, d_ff] silu(gate) * up, recomputed where needed */
  rg_buf *dx, *dxn, *dtmp, *dq, *dk, *dv, *datt, *dh, *dgate, *dup; /* [T, width] */
  rg_buf *dk_cache, *dv_cache;              /* one layer's cache shape */
  rg_buf *lora_du;                          /* [T, rank] an adapter's dy B (NULL without adapters) */
  rg_buf *normed, *dlast, *dnormed;         /* [R, d] */
  rg_buf *dlogits, *losses;                 /* [R, vocab], [R] */
  /* the last eval (its token metadata stays in the session's rg_batch),
   * and whether backward may use it */
  int n, n_logits;
  int *logit_rows; /* [R] */
  bool whole;      /* every sequence of the batch started at position 0 */
  int *prefix_len; /* [max_seqs] each sequence's cached tokens before the batch (0: not in it, or whole) */
  bool have_dlogits;
} train_state;

/* Sequence parallelism (forward.h, rg_session_opts.sp): this rank holds a
 * contiguous part of a batch whose tokens are split over the ranks of
 * comm, in rank order. Every rank computes its own tokens' activations but
 * attention's (sp_attention.c):
 *  - Ulysses: all-to-alls trade this rank's tokens of every head for every
 *    token of 1/P of the heads; the cache holds those heads only, and the
 *    saved queries (layer_acts.q) are kept in that layout;
 *  - all-gather KV: every rank gathers every rank's keys and values into
 *    its cache and attends for as many queries as it holds, half of them
 *    traded with a partner rank so that the causal work is balanced. */
typedef struct {
  rg_comm *comm;          /* borrowed; size > 1 */
  bool ulysses;
  int *counts, *send, *recv; /* [P] each rank's tokens in this pass; per-rank float counts of a collective */
  int first, total;       /* this rank's first token in the whole batch; its size */
  int *seq, *pos;         /* [P * max_tokens] the whole batch's sequence ids and positions */
  rg_batch *batch;        /* the same on the backend */
  /* all-gather: [P * max_tokens, kv_dim] every rank's keys and values, then
   * their gradients. Ulysses: [max_tokens, kv_dim] the batch's keys and
   * values of this rank's heads, then their gradients */
  rg_buf *k_all, *v_all;
  /* the packed send and receive buffers (Ulysses: [max_tokens, max(q_dim +
   * 2 kv_dim, 2 q_dim)]; all-gather: [max_tokens, q_dim]); attention's
   * output, and dq (Ulysses), or the output gradient (all-gather), in the
   * layout attention runs in [max_tokens, q_dim] */
  rg_buf *sendbuf, *recvbuf, *heads, *dheads;
  /* all-gather: this rank attends for its tokens but its last SWAP, and for
   * the last SWAP of rank PARTNER's (P - 1 - rank), which attends for
   * those of this rank: the queries this rank attends for, in that order */
  bool trading; /* this pass trades (every rank alike) */
  int partner, swap;
  int *att_seq, *att_pos; /* [max_tokens] */
  rg_batch *att_batch;
} sp_state;

struct rg_session {
  const rg_model *m;
  rg_config cfg;
  const rg_weights *w; /* shared; w->be is the session's backend */
  rg_backend *be;
  int max_seqs, max_ctx, max_tokens, max_logits;
  rg_batch *batch;             /* the current pass's token metadata */
  rg_batch *rows_batch;        /* the logit rows' own, for a last block on them (forward.c) */
  rg_buf **k_cache, **v_cache; /* per layer [max_seqs, max_ctx, kv_dim] */
  act_bufs a;
  bool train;
  rg_recompute recompute; /* rg_session_opts.recompute (train only) */
  train_state tr; /* used when train */
  sp_state *sp;   /* NULL: the batch is this process's alone */
  int cache_kv_heads; /* KV heads a cache slot holds: n_kv_heads, or n_kv_heads / P under Ulysses */
  /* interventions */
  rg_buf *ablate_unit, *actadd_vec;
  bool ablate_on, actadd_on;
  int actadd_layer;
  float actadd_coeff;
  rg_capture cap;
  bool cap_on;
  /* host bookkeeping */
  int *seq_len;       /* [max_seqs] */
  int *pos;           /* [max_tokens] positions of the current batch */
  int *chunk_seq;     /* [max_tokens] prefill chunk sequence ids */
  int32_t *chunk_ids; /* [max_tokens] */
  int *rows;          /* [max(max_tokens, max_logits)] logit rows / 0..n-1 */
  /* the rows of the current pass that hooks see (rg_capture.from_pos) */
  int n_hooked;
  int *hooked_rows, *hooked_seq, *hooked_pos; /* [max_tokens] */
  float *hook_rows;                           /* [max_tokens, d_model] host copy for hooks */
  int *rows_seq, *rows_pos;                   /* [max_tokens] the logit rows' sequences and positions */
};

/* forward.c: recomputes what s->recompute drops of block L of the last
 * pass, up to the MLP projections, without its interventions on the block
 * input (already applied in place) or hooks. */
int rg_session_rerun_block(rg_session *s, int l);

/* sp_attention.c: sequence parallelism.
 *  - alloc / free: the sp_state of a session made with opts.sp, attention
 *    by MODE; alloc runs before the session's other buffers (it sets
 *    cache_kv_heads);
 *  - positions: gathers the whole batch's sequence ids (N of this rank's
 *    tokens, or -1 when this rank refused its part) and gives every token
 *    its position, as forward.c does in one process, into s->pos for this
 *    rank's tokens; unassign takes them back;
 *  - attention: block L's attention of the pass into ATT (and its LSE, when
 *    not NULL), from this rank's q, k, v (after RoPE); under Ulysses q and
 *    lse are left in the head layout the backward reads. AGAIN: a
 *    recomputation, whose keys and values are already in the cache;
 *  - attention_backward: its gradient, from the pass's q, att and lse,
 *    into this rank's dq (zero on entry), dk and dv (overwritten). */
int rg_sp_alloc(rg_session *s, rg_comm *comm, rg_sp_mode mode);
void rg_sp_free(rg_session *s);
int rg_sp_positions(rg_session *s, const int *seq, int n);
void rg_sp_unassign(rg_session *s);
int rg_sp_attention(rg_session *s, int l, rg_buf *att, rg_buf *lse, rg_buf *q, const rg_buf *k, const rg_buf *v,
                    bool again);
int rg_sp_attention_backward(rg_session *s, int l, rg_buf *dq, rg_buf *dk, rg_buf *dv, const rg_buf *datt,
                             const rg_buf *q, const rg_buf *att, const rg_buf *lse);

#endif
