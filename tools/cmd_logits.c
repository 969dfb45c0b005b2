/* cmd_logits: `refgeo logits (MODEL | --model PATH) --prompt TEXT [--chat] [--system TEXT]
 * [--chat-template NAME] [--ablate FILE[:...]] [--actadd FILE[:...]
 * [--coeff C]] --top K [--threads N] [--json]` prints the K largest
 * next-token logits at the last prompt position with their log-probabilities
 * (logit - logsumexp, computed in double) and the logsumexp itself. The
 * intervention flags are cli_intervention.h's. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_intervention.h"
#include "cli_prompt.h"
#include "commands.h"
#include "engine/context_len.h"
#include "engine/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/logsumexp.h"

/* Indices of the k largest logits, largest first (ties: lower id first). */
static void top_k(const float *lg, int n, int k, int *out) {
  for (int j = 0; j < k; j++) out[j] = -1;
  for (int i = 0; i < n; i++) {
    int j = k;
    while (j > 0 && (out[j - 1] < 0 || lg[i] > lg[out[j - 1]])) j--;
    if (j == k) continue;
    for (int t = k - 1; t > j; t--) out[t] = out[t - 1];
    out[j] = i;
  }
}

static int print_report(const rg_model *m, int n_prompt, const float *lg, const int *top, int k, double lse,
                        bool json) {
  if (!json) {
    printf("prompt_tokens %d  logsumexp %.6f\n", n_prompt, lse);
    printf("rank\tid\tlogit\tlogprob\ttoken\n");
    for (int j = 0; j < k; j++) {
      const char *t = rg_token_text(m->tokenizer, top[j]);
      printf("%d\t%d\t%.6f\t%.6f\t%s\n", j + 1, top[j], lg[top[j]], lg[top[j]] - lse, t ? t : "");
    }
    return 0;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->path);
  cJSON_AddNumberToObject(o, "prompt_tokens", n_prompt);
  cJSON_AddNumberToObject(o, "logsumexp", lse);
  cJSON *arr = cJSON_AddArrayToObject(o, "top");
  for (int j = 0; j < k; j++) {
    cJSON *e = cJSON_CreateObject();
    const char *t = rg_token_text(m->tokenizer, top[j]);
    cJSON_AddNumberToObject(e, "id", top[j]);
    cJSON_AddNumberToObject(e, "logit", lg[top[j]]);
    cJSON_AddNumberToObject(e, "logprob", lg[top[j]] - lse);
    cJSON_AddStringToObject(e, "token", t ? t : "");
    cJSON_AddItemToArray(arr, e);
  }
  return cli_print_json(o);
}

int cmd_logits(int argc, char **argv) {
  cli_prompt p = {0};
  cli_intervention ci = {.coeff = NAN};
  int k = 10, threads = 0;
  bool json = false;
  const char *model = NULL;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      CLI_PROMPT_OPTS(&p),
      CLI_INTERVENTION_OPTS(&ci),
      {"top", CLI_INT, &k, "how many logits to print (10)"},
      {"threads", CLI_INT, &threads, "CPU threads (all)"},
      {"json", CLI_BOOL, &json, "print JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(MODEL | --model PATH) --prompt TEXT [--top K] [flags]\n\nexample: refgeo logits " CLI_EXAMPLE_MODEL " --chat --top 5 --prompt \"How do I pick a lock?\"", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model) {
    rg_error_set("MODEL missing (a .gguf file or a Hugging Face directory)");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  if (k < 1 || k > m->cfg.vocab_size) {
    rg_error_set("--top: %d is not in 1..%d", k, m->cfg.vocab_size);
    rg_model_free(m);
    return cli_fail();
  }
  int32_t *ids = NULL, stop[2];
  int n_ids = 0, n_stop = 0, status = 1, ctx;
  rg_weights *w = NULL;
  rg_session *s = NULL;
  float *lg = malloc((size_t)m->cfg.vocab_size * sizeof *lg);
  int *top = malloc((size_t)k * sizeof *top);
  if (!lg || !top) {
    rg_error_set("out of memory");
    goto end;
  }
  const rg_intervention *iv;
  if (cli_intervention_load(&ci, m, &iv) < 0) goto end;
  if (cli_prompt_tokens(m, &p, &ids, &n_ids, stop, &n_stop) < 0) goto end;
  if (n_ids == 0) {
    rg_error_set("--prompt: encodes to no tokens");
    goto end;
  }
  if (rg_context_len(&m->cfg, n_ids, 0, &ctx) < 0) {
    rg_error_prefix("--prompt");
    goto end;
  }
  rg_backend_opts bo = {.threads = threads};
  if (!(w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO)) || !(s = rg_session_new(w, 1, ctx, NULL))) goto end;
  if (iv && rg_session_set_intervention(s, iv) < 0) goto end;
  const int32_t *prompts[1] = {ids};
  if (rg_session_prefill(s, prompts, &n_ids, 1, lg) < 0) goto end;
  top_k(lg, m->cfg.vocab_size, k, top);
  if (print_report(m, n_ids, lg, top, k, rg_log_sum_exp(lg, m->cfg.vocab_size), json) < 0) goto end;
  status = 0;
end:
  if (status) cli_fail();
  free(lg);
  free(top);
  free(ids);
  rg_session_free(s);
  rg_weights_free(w);
  cli_intervention_free(&ci);
  rg_model_free(m);
  return status;
}
