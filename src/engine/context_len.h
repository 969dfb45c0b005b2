/* context_len.h: how many positions a session needs for a prompt and the
 * tokens generated after it, checked against the model's context.
 *
 * Callers add counts that come from users (--max-new-tokens can be
 * 2147483647), so the sum is taken in 64 bits; and a context beyond the
 * model's max_ctx (context_length / max_position_embeddings) is refused
 * rather than run with positions the model was never trained on.
 */
#ifndef RG_MODEL_CONTEXT_LEN_H
#define RG_MODEL_CONTEXT_LEN_H

#include "formats/config.h"

/* *CTX = N_PROMPT + N_NEW (both >= 0) when that is at most C->max_ctx;
 * else -1 with the error "N_PROMPT prompt tokens + N_NEW new tokens exceed
 * the model's context of MAX_CTX tokens". */
int rg_context_len(const rg_config *c, long long n_prompt, long long n_new, int *ctx);

#endif
