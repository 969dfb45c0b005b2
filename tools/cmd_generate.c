/* cmd_generate: `refgeo generate (MODEL | --model PATH) --prompt TEXT [--chat] [--system TEXT]
 * [--chat-template NAME] [--max-new-tokens N] [--temperature X --top-p X
 * --seed N] [--ablate FILE[:...]] [--actadd FILE[:...] [--coeff C]]
 * [--threads N] [--fast-decode] [--json]` prints the continuation (special
 * tokens skipped) and its token ids. Greedy unless --temperature > 0.
 * --fast-decode runs the prompt and the decode steps on 8-bit activations (weights.h,
 * RG_WEIGHTS_TILED_Q8), as llama.cpp does; by default they are float32, as
 * transformers computes them. The intervention flags
 * are cli_intervention.h's. The prompt plus --max-new-tokens must fit the
 * model's context (max_ctx). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_intervention.h"
#include "cli_prompt.h"
#include "commands.h"
#include "engine/context_len.h"
#include "engine/generate.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

static int print_result(const rg_model *m, int n_prompt, const rg_gen_result *r, const char *text, bool json) {
  if (!json) {
    printf("%s\nids:", text);
    for (int i = 0; i < r->n; i++) printf(" %d", (int)r->ids[i]);
    printf("\n");
    return 0;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->path);
  cJSON_AddNumberToObject(o, "prompt_tokens", n_prompt);
  cJSON *ids = cJSON_AddArrayToObject(o, "ids");
  for (int i = 0; i < r->n; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->ids[i]));
  cJSON_AddStringToObject(o, "text", text);
  cJSON_AddBoolToObject(o, "stopped", r->stopped);
  return cli_print_json(o);
}

int cmd_generate(int argc, char **argv) {
  cli_prompt p = {0};
  cli_intervention ci = {.coeff = NAN};
  const char *model = NULL;
  int max_new = 128, threads = 0, seed = 0;
  double temperature = 0, top_p = 1;
  bool json = false, fast_decode = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      CLI_PROMPT_OPTS(&p),
      CLI_INTERVENTION_OPTS(&ci),
      {"max-new-tokens", CLI_INT, &max_new, "most tokens to generate (128)"},
      {"temperature", CLI_FLOAT, &temperature, "sampling temperature (0 = greedy)"},
      {"top-p", CLI_FLOAT, &top_p, "nucleus sampling mass (1)"},
      {"seed", CLI_INT, &seed, "sampling seed (0)"},
      {"threads", CLI_INT, &threads, "CPU threads (all)"},
      {"fast-decode", CLI_BOOL, &fast_decode, "generate on 8-bit activations, as llama.cpp (default: float32)"},
      {"json", CLI_BOOL, &json, "print JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "(MODEL | --model PATH) --prompt TEXT [flags]\n\nexample: refgeo generate " CLI_EXAMPLE_MODEL " --chat --max-new-tokens 40 --prompt \"Give me three tips for learning a new language.\"",
                     pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model) {
    rg_error_set("MODEL missing (a .gguf file or a Hugging Face directory)");
    return cli_fail();
  }
  if (max_new < 0) {
    rg_error_set("--max-new-tokens: %d is negative", max_new);
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  int32_t *ids = NULL, stop[2];
  int n_ids = 0, n_stop = 0, status = 1, ctx;
  rg_weights *w = NULL;
  rg_session *s = NULL;
  rg_gen_result r = {0};
  char *text = NULL;
  const rg_intervention *iv;
  if (cli_intervention_load(&ci, m, &iv) < 0) goto end;
  if (cli_prompt_tokens(m, &p, &ids, &n_ids, stop, &n_stop) < 0) goto end;
  if (n_ids == 0) {
    rg_error_set("--prompt: encodes to no tokens");
    goto end;
  }
  if (rg_context_len(&m->cfg, n_ids, max_new, &ctx) < 0) {
    rg_error_prefix("--max-new-tokens");
    goto end;
  }
  rg_backend_opts bo = {.threads = threads};
  /* decode-bound: weights in the file dtype (weights.h, RG_WEIGHTS_TILED[_Q8]) */
  if (!(w = rg_weights_open(m, &bo, fast_decode ? RG_WEIGHTS_TILED_Q8 : RG_WEIGHTS_TILED)) || !(s = rg_session_new(w, 1, ctx, NULL))) goto end;
  if (iv && rg_session_set_intervention(s, iv) < 0) goto end;
  rg_gen_opts go = {.max_new_tokens = max_new, .temperature = (float)temperature, .top_p = (float)top_p,
                    .seed = (uint64_t)seed, .stop_ids = stop, .n_stop = n_stop};
  const int32_t *prompts[1] = {ids};
  if (rg_generate(s, prompts, &n_ids, 1, &go, &r) < 0) goto end;
  if (!(text = rg_detokenize(m->tokenizer, r.ids, r.n, true))) goto end;
  if (print_result(m, n_ids, &r, text, json) < 0) goto end;
  status = 0;
end:
  if (status) cli_fail();
  free(text);
  rg_gen_results_free(&r, 1);
  rg_session_free(s);
  rg_weights_free(w);
  free(ids);
  cli_intervention_free(&ci);
  rg_model_free(m);
  return status;
}
