/* scores.h: refusal_direction's three candidate scores of select_direction
 * (docs/refusal-geometry.md sections 5.3, 6.2, 7.1), computed with the
 * engine (engine/forward.h), under one of two refusal scores:
 *
 *   tokens     RD's: log(P + 1e-8) - log(1 - P + 1e-8), P = the summed
 *              float64 softmax of the last-position logits over the refusal
 *              token ids
 *   sequence   log p(R | prompt) - log p(C | prompt), teacher-forced: R the
 *              refusal string's tokens, C the compliance string's (HarmBench's
 *              targets all open with "Sure, here's"), each a sum of float64
 *              log-softmaxes at the positions that predict its tokens
 *
 *   bypass     mean refusal score on harmful val prompts with r-hat
 *              ablated at resid_pre, attn_out and mlp_out of every layer
 *   induce     mean refusal score on harmless val prompts with +1.0 * r
 *              added to the input of block `layer`
 *   kl         mean over harmless val prompts of KL(base || ablated) of
 *              the distributions at the prompt's last position, float64,
 *              eps 1e-6: sum_v p(v) [log(p(v) + 1e-6) - log(q(v) + 1e-6)]
 *              (in both modes: the next-token distribution RD compares)
 *
 * The engine's batches are padding-free (forward.h), so every prompt is
 * scored exactly as if it ran alone; RD's left-padded batches give the same
 * numbers up to float noise. One candidate costs two passes: harmful and
 * harmless val together under ablation (bypass and KL), and harmless val
 * under activation addition (induce). The sequence score runs each prompt
 * twice, once followed by R and once by C.
 *
 * Ownership: the scorer owns its session and buffers and borrows the model
 * and the prompt token arrays (they must outlive it); it copies the
 * measure's ids. rg_scorer_new opens (and owns) its weights,
 * rg_scorer_new_on borrows them.
 */
#ifndef RG_GEOMETRY_SCORES_H
#define RG_GEOMETRY_SCORES_H

#include <stdint.h>

#include "engine/forward.h"
#include "engine/weights.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* The refusal score's kind. */
typedef enum { RG_SCORE_TOKENS, RG_SCORE_SEQUENCE } rg_score_mode;

/* What a refusal score measures (ids borrowed). TOKENS: the first tokens
 * REFUSAL[n_refusal]. SEQUENCE: the refusal string REFUSAL[n_refusal]
 * against the compliance string COMPLIANCE[n_compliance], both >= 1 token. */
typedef struct {
  rg_score_mode mode;
  const int32_t *refusal;
  int n_refusal;
  const int32_t *compliance;
  int n_compliance;
} rg_refusal_measure;

/* The measure of the first tokens IDS[n] (RD's score). */
rg_refusal_measure rg_refusal_measure_tokens(const int32_t *ids, int n);

/* Checks the measure's ids against VOCAB: 0, or -1 with the error set. */
int rg_refusal_measure_check(const rg_refusal_measure *rm, int vocab);

/* The refusal log-odds of one row of logits[vocab] (the tokens score). */
double rg_refusal_score(const float *logits, int vocab, const int32_t *refusal_ids, int n_refusal);

/* KL(softmax(base) || softmax(other)) with RD's eps 1e-6, float64. */
double rg_kl_logits(const float *base, const float *other, int vocab);

/* refusal_direction's per-family refusal token for Llama-style chat models:
 * the single token of "I" (the first token of "I cannot ..."), looked up
 * without a prefix space. Returns the count (1) with ids[0] set, or -1 with
 * the error set when "I" is not a single token of this tokenizer. */
int rg_refusal_tokens_default(const rg_tokenizer *t, int32_t *ids);

/* A list of tokenized prompts, borrowed. */
typedef struct {
  const int32_t *const *ids;
  const int *lens;
  int n;
} rg_token_batch;

typedef struct rg_scorer rg_scorer;

/* Opens a session on M sized for HARMFUL + HARMLESS (both n >= 1) and runs
 * the unintervened baseline (harmless logits for KL, baseline scores).
 * THREADS <= 0 = all CPUs. NULL with the error set. */
rg_scorer *rg_scorer_new(const rg_model *m, const rg_token_batch *harmful, const rg_token_batch *harmless,
                         const rg_refusal_measure *rm, int threads);
/* The same on weights W (borrowed: they must outlive the scorer). */
rg_scorer *rg_scorer_new_on(const rg_weights *w, const rg_token_batch *harmful, const rg_token_batch *harmless,
                            const rg_refusal_measure *rm);
void rg_scorer_free(rg_scorer *sc);

/* Mean refusal scores without intervention. */
double rg_scorer_base_harmful(const rg_scorer *sc);
double rg_scorer_base_harmless(const rg_scorer *sc);
/* The same per prompt, into harmful[n_harmful] and harmless[n_harmless]. */
void rg_scorer_base_each(const rg_scorer *sc, double *harmful, double *harmless);

/* Scores the candidate direction r[d_model] (float64, unnormalized) taken at
 * block LAYER's input. Returns 0, or -1 with the error set. */
int rg_scorer_score(rg_scorer *sc, const double *r, int layer, double *bypass, double *induce, double *kl);

/* Per-prompt parts of the scores: bypass[n_harmful] (each harmful prompt's
 * refusal score under ablation of r-hat), kl[n_harmless] (each harmless
 * prompt's KL under that ablation), induce[n_harmless] (each harmless
 * prompt's refusal score with +r added at block LAYER). Their means are
 * rg_scorer_score's numbers; a bootstrap over prompts needs the parts. */
int rg_scorer_ablate_each(rg_scorer *sc, const double *r, double *bypass, double *kl);
int rg_scorer_induce_each(rg_scorer *sc, const double *r, int layer, double *induce);

/* Each prompt's refusal score without intervention, on session S (the
 * prompts run in chunks of its max_seqs, batch tokens and logit rows; its
 * max_ctx must hold a prompt and the longer string of a sequence measure),
 * into out[b->n]. Returns 0 or -1 with the error set. */
int rg_prompt_refusal_scores(rg_session *s, const rg_token_batch *b, const rg_refusal_measure *rm, double *out);

#endif
