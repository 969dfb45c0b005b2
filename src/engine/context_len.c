/* context_len.c: the positions a prompt and its generation need, checked against the model (context_len.h). */
#include "engine/context_len.h"

#include "util/error.h"

int rg_context_len(const rg_config *c, long long n_prompt, long long n_new, int *ctx) {
  if (n_prompt < 0 || n_new < 0) return rg_error_set("negative token count (%lld prompt, %lld new)", n_prompt, n_new);
  /* each is at most INT_MAX where callers get them, so the sum fits */
  long long total = n_prompt + n_new;
  if (total > c->max_ctx)
    return rg_error_set("%lld prompt tokens + %lld new tokens exceed the model's context of %d tokens", n_prompt, n_new,
                        c->max_ctx);
  *ctx = (int)total;
  return 0;
}
