/* prompt_encode.c: prompts -> token ids (see prompt_encode.h). */
#include "model/prompt_encode.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

int rg_prompt_template(const rg_model *m, const char *name, rg_chat_template *out) {
  if (name) return rg_chat_template_by_name(name, out);
  if (m->chat_template) return rg_chat_template_detect(m->chat_template, out);
  return rg_error_set("%s: model has no chat template (name one, e.g. chatml)", m->path);
}

bool rg_prompt_wants_bos(const rg_chat_template *t) { return !t->bos_text || t->bos_text[0] == '\0'; }

int rg_prompt_encode_chat(const rg_model *m, const rg_chat_template *t, const char *system, const char *user,
                          bool parse_special, int32_t **ids, int *n) {
  rg_chat_message msgs[2];
  int nm = 0;
  if (system) msgs[nm++] = (rg_chat_message){"system", system};
  msgs[nm++] = (rg_chat_message){"user", user};
  char *text = rg_chat_render(t, msgs, nm, true);
  if (!text) return -1;
  int rc = rg_tokenize(m->tokenizer, text, strlen(text), parse_special, rg_prompt_wants_bos(t), ids, n);
  free(text);
  return rc;
}

/* The token that closes an assistant turn in each chat format. */
static const char *end_of_turn(rg_chat_kind kind) {
  switch (kind) {
  case RG_CHAT_CHATML: return "<|im_end|>";
  case RG_CHAT_LLAMA3: return "<|eot_id|>";
  case RG_CHAT_GEMMA: return "<end_of_turn>";
  default: return NULL; /* llama-2, mistral, zephyr end with EOS */
  }
}

int rg_prompt_stop_ids(const rg_model *m, const rg_chat_template *t, int32_t stop[2]) {
  int ns = 0;
  int32_t eos = rg_tokenizer_eos(m->tokenizer);
  if (eos >= 0) stop[ns++] = eos;
  const char *eot = t ? end_of_turn(t->kind) : NULL;
  int32_t id = eot ? rg_token_lookup(m->tokenizer, eot) : -1;
  if (id >= 0 && id != eos) stop[ns++] = id;
  return ns;
}

int rg_prompt_encode(const rg_model *m, const rg_prompt_opts *p, int32_t **ids, int *n, int32_t stop[2],
                     int *n_stop) {
  if (n_stop) *n_stop = 0;
  if (!p->chat) {
    int ns = stop ? rg_prompt_stop_ids(m, NULL, stop) : 0;
    if (n_stop) *n_stop = ns;
    return rg_tokenize(m->tokenizer, p->text, strlen(p->text), !p->plain_specials, true, ids, n);
  }
  rg_chat_template t;
  if (rg_prompt_template(m, p->chat_template, &t) < 0) return -1;
  int rc = rg_prompt_encode_chat(m, &t, p->system, p->text, !p->plain_specials, ids, n);
  int ns = stop ? rg_prompt_stop_ids(m, &t, stop) : 0;
  if (n_stop) *n_stop = ns;
  rg_chat_template_free(&t);
  return rc;
}

int rg_prompt_frame(const rg_chat_template *t, char **before, char **after) {
  *before = NULL;
  /* The prompt with an empty instruction is the text before it followed by
   * the post-instruction text. */
  *after = rg_chat_post_instruction(t);
  if (!*after) return -1;
  rg_chat_message msg = {"user", ""};
  char *empty = rg_chat_render(t, &msg, 1, true);
  size_t n = empty ? strlen(empty) : 0, na = strlen(*after);
  if (!empty || n < na || strcmp(empty + n - na, *after) != 0) {
    free(empty);
    free(*after);
    *after = NULL;
    return empty ? rg_error_set("chat template %s: cannot split the prompt around the instruction",
                                rg_chat_template_name(t->kind))
                 : -1;
  }
  empty[n - na] = '\0';
  *before = empty;
  return 0;
}
