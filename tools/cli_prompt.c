/* cli_prompt.c: prompt flags -> token ids (see cli_prompt.h). */
#include "cli_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "model/chat_template.h"
#include "model/tokenizer.h"
#include "util/error.h"

/* The token that closes an assistant turn in each chat format. */
static const char *end_of_turn(rg_chat_kind kind) {
  switch (kind) {
  case RG_CHAT_CHATML: return "<|im_end|>";
  case RG_CHAT_LLAMA3: return "<|eot_id|>";
  case RG_CHAT_GEMMA: return "<end_of_turn>";
  default: return NULL; /* llama-2, mistral, zephyr end with EOS */
  }
}

int cli_chat_template(const rg_model *m, const char *name, rg_chat_template *out) {
  return name ? rg_chat_template_by_name(name, out)
         : m->chat_template ? rg_chat_template_detect(m->chat_template, out)
                            : rg_error_set("%s: model has no chat template (use --chat-template NAME)", m->path);
}

int cli_prompt_tokens(const rg_model *m, const cli_prompt *p, int32_t **ids, int *n_ids, int32_t stop_ids[2],
                      int *n_stop) {
  if (!p->prompt) return rg_error_set("--prompt: missing (give the prompt text)");
  int ns = 0;
  int32_t eos = rg_tokenizer_eos(m->tokenizer);
  if (eos >= 0) stop_ids[ns++] = eos;
  if (!p->chat) {
    *n_stop = ns;
    return rg_tokenize(m->tokenizer, p->prompt, strlen(p->prompt), true, true, ids, n_ids);
  }
  rg_chat_template t;
  int rc = cli_chat_template(m, p->chat_template, &t);
  if (rc < 0) return -1;
  rg_chat_message msgs[2];
  int nm = 0;
  if (p->system) msgs[nm++] = (rg_chat_message){"system", p->system};
  msgs[nm++] = (rg_chat_message){"user", p->prompt};
  char *text = rg_chat_render(&t, msgs, nm, true);
  if (text) {
    /* A template that writes BOS itself must not get a second one. */
    bool add_bos = !t.bos_text || t.bos_text[0] == '\0';
    rc = rg_tokenize(m->tokenizer, text, strlen(text), true, add_bos, ids, n_ids);
    const char *eot = end_of_turn(t.kind);
    int32_t id = eot ? rg_token_lookup(m->tokenizer, eot) : -1;
    if (id >= 0 && id != eos) stop_ids[ns++] = id;
  } else {
    rc = -1;
  }
  free(text);
  rg_chat_template_free(&t);
  *n_stop = ns;
  return rc;
}
