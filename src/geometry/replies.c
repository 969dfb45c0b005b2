/* replies.c: greedy replies of a checkpoint, judged refused or complied. */
#include "geometry/replies.h"

#include <stdlib.h>

#include "engine/generate.h"
#include "util/error.h"

int rg_judge_replies(rg_session *s, const rg_token_batch *b, int max_new_tokens, const int32_t *stop, int n_stop,
                     const rg_refusal_list *judge, rg_judged_replies *out) {
  *out = (rg_judged_replies){.n = b->n};
  const int batch = rg_session_max_seqs(s);
  const rg_tokenizer *tok = rg_session_model(s)->tokenizer;
  out->first = malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof *out->first);
  out->opening = malloc((size_t)(b->n > 0 ? b->n : 1) * RG_REPLY_OPENING * sizeof *out->opening);
  out->refused = malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof *out->refused);
  rg_gen_result *r = calloc((size_t)batch, sizeof *r);
  int rc = out->first && out->opening && out->refused && r ? 0 : rg_error_set("replies: out of memory");
  rg_gen_opts go = {.max_new_tokens = max_new_tokens, .stop_ids = stop, .n_stop = n_stop};
  for (int first = 0; first < b->n && rc == 0; first += batch) {
    int k = b->n - first < batch ? b->n - first : batch;
    if ((rc = rg_generate(s, b->ids + first, b->lens + first, k, &go, r)) < 0) break;
    for (int i = 0; i < k && rc == 0; i++) {
      char *text = rg_detokenize(tok, r[i].ids, r[i].n, true);
      if (!text) rc = -1;
      else {
        out->first[first + i] = r[i].n > 0 ? r[i].ids[0] : -1;
        for (int j = 0; j < RG_REPLY_OPENING; j++)
          out->opening[(size_t)(first + i) * RG_REPLY_OPENING + j] = j < r[i].n ? r[i].ids[j] : -1;
        out->refused[first + i] = rg_refusal_matches(judge, text);
      }
      free(text);
    }
    rg_gen_results_free(r, k);
  }
  free(r);
  if (rc < 0) rg_judged_replies_free(out);
  return rc;
}

void rg_judged_replies_free(rg_judged_replies *r) {
  free(r->first);
  free(r->opening);
  free(r->refused);
  *r = (rg_judged_replies){0};
}
