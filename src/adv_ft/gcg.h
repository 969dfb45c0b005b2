/* gcg.h: Greedy Coordinate Gradient (Zou et al. 2023) as HarmBench runs it
 * inside R2D2 training and as its evaluation attack
 * (HarmBench 8e1604d: adversarial_training/alignment-handbook/scripts/
 * adv_training_utils.py for R2D2, baselines/gcg/gcg.py and
 * configs/method_configs/GCG_config.yaml for the evaluation attack).
 *
 * A test case is one token sequence laid out as
 *     prefix | suffix | after | target
 * (chat-template text before the behaviour and the behaviour itself, the
 * adversarial suffix being optimized, the template text after it, and the
 * target completion). Its loss is the mean cross entropy of the target
 * tokens. One GCG step:
 *   1. the gradient of the loss with respect to the one-hot suffix matrix
 *      [n_suffix, vocab] (rg_gcg_token_grad);
 *   2. search_width candidates, candidate j changing only position
 *      floor(j * n_suffix / search_width) to a token drawn uniformly from
 *      that position's top_k of -gradient, disallowed tokens excluded
 *      (rg_gcg_sample = rg_gcg_top_k, then rg_gcg_draw);
 *   2b. optionally (rg_gcg_opts.retokenize_filter) the candidates whose
 *      suffix does not decode and re-encode to itself are dropped
 *      (rg_gcg_retokenizes): HarmBench's evaluation GCG does this, R2D2's
 *      inner GCG does not;
 *   3. every remaining candidate's loss (rg_gcg_candidate_losses), and the
 *      argmin becomes the suffix, unconditionally, as in HarmBench.
 * The random draws use refgeo's splitmix64, so runs are reproducible but do
 * not replay torch's.
 *
 * Ownership: callers own every array; the sessions are borrowed.
 */
#ifndef RG_ADV_FT_GCG_H
#define RG_ADV_FT_GCG_H

#include <stdbool.h>
#include <stdint.h>

#include "adv_ft/gcg_stop.h"
#include "dist/comm.h"
#include "engine/forward.h"
#include "model/model.h"

typedef struct {
  const int32_t *ids; /* the whole sequence, n tokens */
  int n;
  int suffix_start, n_suffix; /* the suffix is ids[suffix_start .. +n_suffix) */
  int n_target;               /* the target is the last n_target tokens */
} rg_gcg_case;

/* HarmBench's filter (get_nonascii_toks): disallowed[i] = 1 for ids i >= 3
 * whose decoding is not printable ASCII (0x20..0x7e only), and for the BOS,
 * EOS, PAD and UNK ids. disallowed has vocab_size entries. Embedding rows
 * past the tokenizer's vocabulary (which rg_detokenize cannot decode) are
 * disallowed too; HarmBench, ranging over tokenizer.vocab_size, leaves
 * them allowed. */
void rg_gcg_disallowed_tokens(const rg_model *m, unsigned char *disallowed);

/* How rg_gcg_token_grad treats the tokens before the suffix. */
typedef enum {
  RG_GCG_PREFIX_RUN,  /* run them into sequence 0 of the session, then the rest on top */
  RG_GCG_PREFIX_KEPT, /* sequence 0 holds them from an earlier call on this case: run only the rest */
  RG_GCG_WHOLE,       /* one pass and backward over the whole sequence (the reference) */
} rg_gcg_prefix;

/* Step 1: grad[n_suffix, vocab] for the case, on a training session (made
 * with rg_session_opts.train, max_batch_tokens >= n, max_logit_rows >=
 * max(n_target, n_suffix)); no parameter gradient is computed. *loss gets
 * the case's loss. The tokens before the suffix do not change within an
 * attack, so, as HarmBench's gcg.py with its prefix KV cache, the pass and
 * its backward cover only suffix | after | target on top of their cached
 * keys and values (PREFIX says whether they are already there). Returns 0
 * or -1 with the error set. */
int rg_gcg_token_grad(rg_session *train, const rg_gcg_case *c, rg_gcg_prefix prefix, float *grad, float *loss);

/* Step 2, its first half: top[n_suffix, top_k], each position's top_k
 * tokens of -grad, best first (equal gradients: the lower id first). grad
 * is modified (disallowed entries raised above the maximum, as HarmBench
 * does). top_k <= vocab. Returns 0, or -1 with the error set (out of
 * memory). */
int rg_gcg_top_k(float *grad, int n_suffix, int vocab, const unsigned char *disallowed, int top_k, int32_t *top);

/* Step 2, its second half: cands[search_width, n_suffix], candidate j the
 * current SUFFIX with position floor(j * n_suffix / search_width) replaced
 * by a token drawn uniformly from that position's row of TOP. */
void rg_gcg_draw(const int32_t *top, int n_suffix, int top_k, const int32_t *suffix, int search_width,
                 uint64_t *rng, int32_t *cands);

/* Step 2: rg_gcg_top_k, then rg_gcg_draw. Returns 0, or -1 with the error
 * set (out of memory). */
int rg_gcg_sample(float *grad, int n_suffix, int vocab, const unsigned char *disallowed, const int32_t *suffix,
                   int top_k, int search_width, uint64_t *rng, int32_t *cands);

/* The tokens a candidate suffix CAND shares with the case before its first
 * changed position (prefix and the unchanged start of the suffix), at most
 * up to the first row whose logits the loss reads: what step 3 does not
 * recompute for it. */
int rg_gcg_shared_tokens(const rg_gcg_case *c, const int32_t *cand);

/* The first candidate before J of cands[0..J] (each N_SUFFIX tokens) equal
 * to candidate J, or -1: a repeat, whose loss step 3 copies. */
int rg_gcg_repeat_of(const int32_t *cands, int j, int n_suffix);

/* Step 3: losses[j] of the case with suffix cands[j], for j < n_cands, on a
 * session of at least 2 sequences. The current case's tokens before the
 * first suffix position any candidate changes are run once into sequence
 * 0; each candidate forks (rg_session_fork) the part it shares, up to its
 * own first changed position, into one of sequences 1..max_seqs-1 and runs
 * the rest of its suffix | after | target, in batches bounded by
 * max_seqs - 1, max_batch_tokens and max_logit_rows. The session must hold
 * one whole suffix | after | target. Returns 0 or -1. */
int rg_gcg_candidate_losses(rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands, float *losses);

/* Step 3, screened: losses[j] of every candidate on SCREEN (a session on
 * cheaper weights of the same model: RG_WEIGHTS_TILED_Q8's 8-bit
 * activations), then the KEEP candidates with the lowest of those (a
 * repeat counted once; only among eligible[j] when ELIGIBLE is not NULL)
 * again on S, whose losses replace theirs and get verified[j] = 1, as do
 * their repeats; the others keep their screened loss and verified[j] = 0. The argmin of the
 * verified losses is then the candidate HarmBench's exhaustive step takes
 * whenever that one is among the KEEP best screened: the screen only has
 * to rank it, not to score it. KEEP >= 1. Returns 0 or -1. */
int rg_gcg_screened_losses(rg_session *screen, rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands,
                           int keep, const unsigned char *eligible, float *losses, unsigned char *verified);

/* keep[j] = whether candidate j (cands[j * L .. +L)) decodes and re-encodes
 * to the same L ids: the retokenization filter of
 * rg_gcg_opts.retokenize_filter. As gcg.py's tokenizer.batch_decode and
 * tokenizer(text, add_special_tokens=False): special tokens are decoded to
 * their text and that text re-encodes to them, no BOS is added, and the
 * decoded text is not cleaned up (clean_up_tokenization_spaces is false for
 * the tokenizers refgeo's tests run, SmolLM2's and Qwen2.5's). Returns 0 or
 * -1 with the error set. */
int rg_gcg_retokenizes(const rg_tokenizer *t, const int32_t *cands, int n_cands, int L, unsigned char *keep);

/* The candidates of cands[0..n) (each L ids) that KEEP marks, in order,
 * into LIVE and their indices into IDX; all of them when KEEP marks none
 * (gcg.py: "All removals; defaulting to keeping all"). Returns how many:
 * the candidates whose losses the step computes. */
int rg_gcg_kept_candidates(const int32_t *cands, int n, int L, const unsigned char *keep, int32_t *live, int *idx);

/* What one step of rg_gcg_run saw and chose, for rg_gcg_opts.on_step. The
 * arrays are rg_gcg_run's, valid during the call. */
typedef struct {
  int step;              /* 0, 1, ... */
  int n_suffix;
  const int32_t *suffix; /* the suffix the step started from */
  float loss;            /* its loss, from the token gradient */
  const int32_t *top;    /* [n_suffix, top_k]: rg_gcg_top_k's; NULL when rg_gcg_opts.sample drew the candidates */
  int top_k;
  const int32_t *cands;  /* [n_cands, n_suffix] */
  int n_cands;
  /* n_cands: the candidates whose loss was computed; NULL: all. With the
   * filter on, those it kept, or all when it kept none. */
  const unsigned char *evaluated;
  /* HarmBench's count of removals: the candidates the filter dropped, 0
   * when it dropped all (then all are kept) or is off */
  int n_removed;
  const float *losses;   /* n_cands; NaN where not evaluated */
  const unsigned char *verified; /* screened: whose loss is the candidate session's (NULL: all) */
  int best;              /* the candidate that became the suffix */
} rg_gcg_step_view;

typedef struct {
  int steps;        /* HarmBench's evaluation GCG: 500; R2D2's inner GCG: 5 */
  int search_width; /* candidates per step: 512 */
  int top_k;        /* 256 */
  /* Stops before a step once the current suffix's loss (from its token
   * gradient) is below it (<= 0: never). HarmBench's `early_stopping`
   * (early_stopping_min_loss), which its GCG config leaves off. */
  double min_loss;
  /* HarmBench's refusal-checked stop (gcg_stop.h), or NULL (R2D2's inner
   * GCG: always o->steps steps). */
  const rg_gcg_stop_rule *stop;
  /* Drop candidates whose suffix does not decode and re-encode (without
   * special tokens) to the same ids before their losses are computed, as
   * HarmBench's evaluation GCG does (baselines/gcg/gcg.py:174-197 at
   * 8e1604d; `refgeo attack` turns it on by default); when a step drops
   * every candidate, all are kept, as there. R2D2's inner GCG
   * (adv_training_utils.py) has no such filter: false, the zero value. */
  bool retokenize_filter;
  uint64_t seed;
  /* When set, replaces step 2 (rg_gcg_sample): writes search_width
   * candidates for step STEP given the current SUFFIX into cands, returns 0
   * or -1 with the error set. How a reference test gives torch and refgeo
   * the same candidates (the token gradient is still computed). */
  int (*sample)(void *user, int step, const int32_t *suffix, int n_suffix, int32_t *cands);
  void *sample_user;
  /* Ranks that run this attack in step (the same case, options and
   * weights), or NULL. Step 3's candidates are then split over the ranks
   * in contiguous shares and the losses gathered on every rank, as
   * HarmBench shards its 512 candidates over its GPUs: every rank computes
   * the same gradient and candidates, and takes the same argmin. */
  rg_comm *shard;
  /* When set (and screen_keep < search_width), step 3 is screened
   * (rg_gcg_screened_losses): every candidate on this session, the
   * screen_keep best again on the candidate session, and the argmin of
   * those taken; losses[k] stays a candidate-session loss. NULL: every
   * candidate on the candidate session, as HarmBench. */
  rg_session *screen;
  int screen_keep;
  /* When set, called after every step's choice with what the step saw
   * (`refgeo attack --dump-steps`); returns 0, or -1 with the error set,
   * which ends the run. */
  int (*on_step)(void *user, const rg_gcg_step_view *v);
  void *step_user;
} rg_gcg_opts;

typedef enum {
  RG_GCG_ALL_STEPS,   /* ran o->steps steps */
  RG_GCG_MIN_LOSS,    /* o->min_loss */
  RG_GCG_NO_REFUSAL,  /* o->stop: the check's generation held no refusal */
} rg_gcg_stop_reason;

/* "steps", "min_loss", "no_refusal" */
const char *rg_gcg_stop_reason_name(rg_gcg_stop_reason r);

/* Runs up to o->steps GCG steps on the sequence IDS (writable, laid out as
 * LAYOUT says; layout->ids is ignored), whose suffix becomes the argmin
 * candidate of every step. losses[k] is the loss of the suffix chosen at
 * step k, *n_steps the steps run and *why (may be NULL) why it ended. TRAIN is a
 * training session (rg_gcg_token_grad), INF any session for the candidates
 * (rg_gcg_candidate_losses). Returns 0 or -1 with the error set. */
int rg_gcg_run(rg_session *train, rg_session *inf, const unsigned char *disallowed, int32_t *ids,
               const rg_gcg_case *layout, const rg_gcg_opts *o, float *losses, int *n_steps,
               rg_gcg_stop_reason *why);

#endif
