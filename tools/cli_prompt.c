/* cli_prompt.c: prompt flags -> token ids (see cli_prompt.h). */
#include "cli_prompt.h"

#include "model/prompt_encode.h"
#include "util/error.h"

int cli_prompt_tokens(const rg_model *m, const cli_prompt *p, int32_t **ids, int *n_ids, int32_t stop_ids[2],
                      int *n_stop) {
  if (!p->prompt) return rg_error_set("--prompt: missing (give the prompt text)");
  rg_prompt_opts o = {.text = p->prompt, .chat = p->chat, .system = p->system, .chat_template = p->chat_template};
  return rg_prompt_encode(m, &o, ids, n_ids, stop_ids, n_stop);
}
