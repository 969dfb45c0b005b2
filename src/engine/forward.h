/* forward.h: batched, KV-cached forward passes of a loaded model.
 *
 * A session computes with shared weights (weights.h) on their backend and
 * owns a KV cache for up to max_seqs sequences of up to max_ctx tokens
 * each and every activation buffer, all allocated once in rg_session_new
 * (as llm.c does): a forward call allocates nothing.
 *
 * Batches are ragged and padding-free: the new tokens of all sequences are
 * concatenated, each tagged with its sequence id; its position is the
 * sequence's current length (positions count from 0 per sequence). No pad
 * token is ever computed, so a batch gives the same numbers as running each
 * sequence alone. This deliberately differs from a left-padded Hugging Face
 * batch without position_ids, whose positions are shifted by the padding.
 *
 * Sessions hold no weights of their own: any number of them share one
 * rg_weights, and all see an update of it from their next call. A session
 * is used from one thread at a time (the backend parallelizes internally);
 * sessions on one backend are used from one thread.
 *
 * Ownership: the session borrows the weights (they must outlive the
 * session). Interventions and capture specs are copied / borrowed as
 * documented.
 */
#ifndef RG_FORWARD_H
#define RG_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "dist/comm.h"
#include "engine/hooks.h"
#include "model/model.h"
#include "engine/weights.h"

typedef struct rg_session rg_session;

/* What a training session keeps per block for the backward, and what the
 * backward recomputes into one block's worth of buffers shared by all
 * (gradient checkpointing: Korthikanti et al. 2022, arXiv 2205.05198; AutoSP,
 * arXiv 2604.27089, for the policy that keeps attention). Floats per
 * token and block kept, for d = d_model, q = n_heads*head_dim and f = d_ff:
 *  - NONE: everything, 4 d + 2 q + 2 f;
 *  - FULL: the block input, d; the backward reruns the block's forward up
 *    to the MLP projections (as HarmBench's recipe sets it: about one more
 *    forward pass, attention included);
 *  - MATMULS: the block input, the queries and attention's output, d + 2 q;
 *    the backward recomputes the norms, o_proj, the residual and the MLP
 *    projections but not attention, whose cost grows with the context
 *    (per saved byte, recomputing causal attention costs about S flops,
 *    a matmul about d: past S ~ d this is the cheaper way to save memory;
 *    AutoSP's policy). Under sequence parallelism it also repeats no
 *    collective. */
typedef enum { RG_RECOMPUTE_NONE = 0, RG_RECOMPUTE_FULL, RG_RECOMPUTE_MATMULS } rg_recompute;

/* How attention runs when a batch is split over P ranks (sequence
 * parallelism: DeepSpeed-Ulysses, arXiv 2309.14509; Llama 3's context
 * parallelism, arXiv 2407.21783). */
typedef enum {
  /* Ulysses where n_heads and n_kv_heads are multiples of P, else all-gather */
  RG_SP_AUTO = 0,
  /* DeepSpeed-Ulysses: all-to-alls trade sequence shards for head shards,
   * each rank attends over the whole batch with 1/P of the heads and keeps
   * 1/P of the KV cache; a session refuses heads not divisible by P */
  RG_SP_ULYSSES,
  /* all-gather KV (Llama 3's context parallelism): each rank attends with
   * its own queries over every rank's keys and values; any head count,
   * the whole KV cache on every rank */
  RG_SP_ALLGATHER
} rg_sp_mode;

typedef struct {
  /* Most tokens one forward call computes at once (activation buffers are
   * sized by it); longer prefills are split into chunks. 0 = 512. */
  int max_batch_tokens;
  /* Most rows of logits one call returns; 0 = max_seqs. Set it to
   * max_batch_tokens to get logits at every position (training, KL). */
  int max_logit_rows;
  /* A training session: every block keeps its activations of the last
   * rg_session_eval (4 d + 2 n_heads*head_dim + 2 d_ff floats per token and
   * layer, plus d + d_ff per token for the last block's output and the MLP
   * product, for max_batch_tokens tokens) for rg_session_backward
   * (backward.h); it has none of an inference session's shared block
   * buffers. */
  bool train;
  /* With train: which activations rg_session_backward recomputes just
   * before each block's backward (rg_recompute) instead of keeping them
   * from the eval. The gradients are bitwise those without it (the same
   * kernels on the same inputs). */
  rg_recompute recompute;
  /* Sequence parallelism (a training session): the ranks of SP (borrowed;
   * NULL or one rank = none) each hold a contiguous part of every batch,
   * its tokens in the batch's order, rank 0's first: rank r's rg_session_eval
   * gets its part (any number of tokens, up to max_batch_tokens each) and
   * every rank calls every eval, loss and backward together. Positions,
   * attention and max_ctx are those of the whole batch; logit rows, losses,
   * d_embed and the hooks' rows are this rank's. Parameter gradients are
   * this rank's share: sum them over the ranks (rg_grads_allreduce), and
   * weight the losses by counts over the whole batch. SP_MODE says how
   * attention runs (rg_sp_mode; a session refuses RG_SP_ULYSSES for heads
   * that P does not divide). */
  rg_comm *sp;
  rg_sp_mode sp_mode;
} rg_session_opts;

/* NULL with the error set (bad sizes, out of memory). */
rg_session *rg_session_new(const rg_weights *w, int max_seqs, int max_ctx, const rg_session_opts *opts);
void rg_session_free(rg_session *s);

const rg_model *rg_session_model(const rg_session *s);
const rg_weights *rg_session_weights(const rg_session *s);
int rg_session_vocab(const rg_session *s);
int rg_session_max_seqs(const rg_session *s);
int rg_session_max_ctx(const rg_session *s);
int rg_session_max_batch_tokens(const rg_session *s);
int rg_session_max_logit_rows(const rg_session *s);
/* Tokens currently cached for sequence SEQ. */
int rg_session_seq_len(const rg_session *s, int seq);

/* Forgets every sequence / one sequence (its cache slots are reused). */
void rg_session_reset(rg_session *s);
void rg_session_drop(rg_session *s, int seq);
/* Keeps the first LEN tokens of sequence SEQ (nothing changes when it has
 * LEN or fewer): the next eval continues after them. */
void rg_session_truncate(rg_session *s, int seq, int len);

/* Makes sequence DST a copy of sequence SRC: its cached tokens (the KV
 * cache rows of every layer) and length, so both continue from the same
 * prefix, which is computed once (GCG's candidates share the text before
 * their suffix). Returns 0, or -1 with the error set (bad or equal ids). */
int rg_session_fork(rg_session *s, int src, int dst);

/* Sets the interventions (copied; NULL or all-NULL vectors = none). Returns
 * 0, or -1 with the error set (layer out of range). */
int rg_session_set_intervention(rg_session *s, const rg_intervention *iv);
/* Sets the capture spec (borrowed until replaced; NULL = no capture). */
void rg_session_set_capture(rg_session *s, const rg_capture *cap);

/* The core call: appends n tokens ids[i] to sequences seq[i] (any order,
 * a sequence may appear several times; its tokens are taken in order) and
 * runs them through the model; n <= max_batch_tokens. Writes the logits of
 * the batch rows logit_rows[0..n_logits-1] (indices into ids) to
 * logits[n_logits, vocab] (n_logits <= max_logit_rows). logits may be
 * NULL: they then stay on the backend, for rg_session_loss_ce (backward.h)
 * to read. Returns 0, or -1 with the error set (bad id, full
 * sequence, bad row, a backend failure); nothing is appended on error. */
int rg_session_eval(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows, int n_logits,
                    float *logits);

/* rg_session_eval on an inference session, starting at block LAYER: X_IN
 * [n, d_model] is the residual stream entering block LAYER before any
 * intervention of that block (what blocks.LAYER.hook_resid_pre captures on
 * an unintervened pass of the same batch), blocks below LAYER are skipped
 * and their caches are left as they are. With that X_IN and no
 * intervention below LAYER, the logits are the full pass's: activation
 * addition at LAYER leaves the blocks below it unchanged, so carrier
 * scoring (geometry/scores.h) runs them once. Returns 0, or -1 with the
 * error set (as rg_session_eval; a training session is refused). */
int rg_session_eval_from(rg_session *s, int layer, const float *x_in, const int32_t *ids, const int *seq, int n,
                         const int *logit_rows, int n_logits, float *logits);

/* rg_session_eval, but instead of the logits it returns the cross entropy
 * of each logit row r against targets[r] (nats): losses[r] =
 * logsumexp(z_r) - z_r[targets[r]], computed on the backend, so only
 * n_logits floats are downloaded (what GCG's candidate search needs). */
int rg_session_eval_ce(rg_session *s, const int32_t *ids, const int *seq, int n, const int *logit_rows,
                       const int32_t *targets, int n_logits, float *losses);

/* Resets sequences 0..n-1 and runs prompts[i] (lens[i] >= 1 tokens) into
 * sequence i, chunked by max_batch_tokens; writes each prompt's
 * last-position logits to logits[n, vocab]. n <= max_seqs and n <=
 * max_logit_rows. Returns 0 or -1 with the error set. */
int rg_session_prefill(rg_session *s, const int32_t *const *prompts, const int *lens, int n, float *logits);

/* out[i, v] = x[i, :] . E[v, :] for the token embedding table E, i < n <=
 * max_logit_rows: e.g. a gradient with respect to the embeddings turned
 * into one with respect to a one-hot token matrix (GCG). It reuses the
 * logit buffers: call it after rg_session_loss_ce. Returns 0 or -1. */
int rg_session_embedding_products(rg_session *s, const float *x, int n, float *out);

/* Appends tokens[i] to sequence seq[i] (distinct sequences) and writes the
 * next-token logits to logits[n, vocab]. Returns 0 or -1. */
int rg_session_decode(rg_session *s, const int *seq, const int32_t *tokens, int n, float *logits);

#endif
