/* replies.h: a checkpoint's greedy replies to tokenized prompts, judged
 * refused or complied by a refusal substring list (harmbench/refusal_match.h),
 * for fitting and validating the refusal score (refusal_tokens.h).
 *
 * Replies are stripped of special tokens, as asr's completions are, and run
 * for at most max_new_tokens (a refusal says so in its first words).
 *
 * Ownership: rg_judged_replies owns its arrays; free with
 * rg_judged_replies_free.
 */
#ifndef RG_GEOMETRY_REPLIES_H
#define RG_GEOMETRY_REPLIES_H

#include <stdbool.h>
#include <stdint.h>

#include "geometry/scores.h"
#include "harmbench/refusal_match.h"
#include "engine/forward.h"

/* Tokens of each reply's opening that are kept. */
enum { RG_REPLY_OPENING = 4 };

typedef struct {
  int n;
  int32_t *first;   /* [n] first generated token, -1 when the reply stopped at once */
  int32_t *opening; /* [n * RG_REPLY_OPENING] the first tokens, -1 past the reply's end */
  bool *refused;  /* [n] */
} rg_judged_replies;

/* Generates on session S (its max_seqs prompts at a time; max_ctx must hold
 * the longest prompt plus max_new_tokens), greedy, stopping at STOP ids.
 * Returns 0, or -1 with the error set. */
int rg_judge_replies(rg_session *s, const rg_token_batch *b, int max_new_tokens, const int32_t *stop, int n_stop,
                     const rg_refusal_list *judge, rg_judged_replies *out);
void rg_judged_replies_free(rg_judged_replies *r);

#endif
