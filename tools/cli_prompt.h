/* cli_prompt.h: turning --prompt/--chat/--system/--chat-template flags into
 * token ids, shared by `refgeo generate`, `logits` and `attack`. */
#ifndef RG_CLI_PROMPT_H
#define RG_CLI_PROMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "model/model.h"

typedef struct {
  const char *prompt;
  bool chat;                 /* render as a one-turn chat with a generation prompt */
  const char *system;        /* optional system message (chat only) */
  const char *chat_template; /* renderer name; NULL = detect from the model */
} cli_prompt;

/* The four cli_opt entries that fill a cli_prompt P, for a command's
 * option table: CLI_PROMPT_OPTS(&p), ... */
#define CLI_PROMPT_OPTS(P)                                                                       \
  {"prompt", CLI_STRING, &(P)->prompt, "prompt text"},                                           \
      {"chat", CLI_BOOL, &(P)->chat, "format the prompt with the model's chat template"},        \
      {"system", CLI_STRING, &(P)->system, "system message (with --chat)"},                      \
      {"chat-template", CLI_STRING, &(P)->chat_template, "chat format name (chatml, llama-2, mistral, ...)"}

/* Tokenizes the prompt by model/prompt_encode.h's rule (rendered with the
 * chat template when p->chat). *ids is malloc'd. stop_ids (may be NULL)
 * receives up to 2 ids that end a reply: the tokenizer's EOS and, for chat,
 * the template's end-of-turn token. Returns 0 or -1 with the error set. */
int cli_prompt_tokens(const rg_model *m, const cli_prompt *p, int32_t **ids, int *n_ids, int32_t stop_ids[2],
                      int *n_stop);

#endif
