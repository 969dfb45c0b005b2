/* cmd_tokenize: `refgeo tokenize (MODEL | --model PATH) [--chat] [--system TEXT]
 * [--chat-template NAME] [--no-special] [--json] TEXT` prints the token ids
 * of TEXT, optionally rendered first as one user turn (with the generation
 * prompt) through the model's chat template. Special-token text such as
 * "<|im_start|>" is recognised unless --no-special; BOS is added when the
 * tokenizer is configured to add it (and the template does not write it). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "model/model.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

static int print_json(const rg_tokenizer *tok, const int32_t *ids, int n) {
  cJSON *r = cJSON_CreateObject();
  cJSON *jids = cJSON_AddArrayToObject(r, "ids");
  cJSON *jtoks = cJSON_AddArrayToObject(r, "tokens");
  for (int i = 0; i < n; i++) {
    cJSON_AddItemToArray(jids, cJSON_CreateNumber(ids[i]));
    cJSON_AddItemToArray(jtoks, cJSON_CreateString(rg_token_text(tok, ids[i])));
  }
  cJSON_AddNumberToObject(r, "n", n);
  char *s = cJSON_PrintUnformatted(r);
  cJSON_Delete(r);
  if (!s) return rg_error_set("out of memory");
  printf("%s\n", s);
  free(s);
  return 0;
}

int cmd_tokenize(int argc, char **argv) {
  bool chat = false, no_special = false, json = false;
  const char *system = NULL, *template_name = NULL, *model = NULL;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      {"chat", CLI_BOOL, &chat, "render TEXT as one user turn with the generation prompt"},
      {"system", CLI_STRING, &system, "system message (with --chat)"},
      {"chat-template", CLI_STRING, &template_name, "renderer name instead of detecting it from the model"},
      {"no-special", CLI_BOOL, &no_special, "treat special-token text as plain text"},
      {"json", CLI_BOOL, &json, "print {\"ids\": [...], \"tokens\": [...], \"n\": N}"},
  };
  const char *pos[2];
  int n_pos;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "(MODEL | --model PATH) [flags] TEXT\n\nexample: refgeo tokenize " CLI_EXAMPLE_MODEL " --json \"Sorry, I can't do that.\"", pos,
                     2, &n_pos);
  if (rc == 1) return 0;
  if (rc < 0) return cli_fail();
  /* MODEL TEXT, or --model PATH TEXT */
  if (n_pos == 2 && cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model || n_pos != 1) {
    rg_error_set("expected MODEL and TEXT (or --model PATH and TEXT; see refgeo tokenize --help)");
    return cli_fail();
  }
  const char *text = pos[0];
  if (!chat && (system || template_name)) {
    rg_error_set("--system and --chat-template need --chat");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  rg_prompt_opts p = {.text = text, .chat = chat, .system = system, .chat_template = template_name,
                      .plain_specials = no_special};
  int32_t *ids = NULL;
  int n = 0;
  rc = rg_prompt_encode(m, &p, &ids, &n, NULL, NULL);
  if (rc == 0 && json) {
    rc = print_json(m->tokenizer, ids, n);
  } else if (rc == 0) {
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
  }
  free(ids);
  rg_model_free(m);
  return rc == 0 ? 0 : cli_fail();
}
