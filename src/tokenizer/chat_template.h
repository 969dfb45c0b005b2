/* chat_template.h: built-in renderers for the common chat formats.
 *
 * refgeo does not interpret Jinja. Each renderer reproduces, byte for byte,
 * what the model's own Jinja template produces (checked against transformers
 * in tests). The renderer is chosen from the model's template text
 * (rg_chat_template_detect) or by name (rg_chat_template_by_name; the CLI's
 * --chat-template NAME).
 *
 * Names: chatml (SmolLM2, Qwen), llama-2, mistral, zephyr, llama-3, gemma.
 */
#ifndef RG_CHAT_TEMPLATE_H
#define RG_CHAT_TEMPLATE_H

#include <stdbool.h>

typedef enum {
  RG_CHAT_CHATML = 1,
  RG_CHAT_LLAMA2,
  RG_CHAT_MISTRAL,
  RG_CHAT_ZEPHYR,
  RG_CHAT_LLAMA3,
  RG_CHAT_GEMMA
} rg_chat_kind;

typedef struct {
  rg_chat_kind kind;
  /* System message inserted when the conversation has none (SmolLM2's
   * template carries one); NULL for none. Owned by the template. */
  char *default_system;
  /* Literal BOS text the template itself emits (e.g. "<s>" for llama-2),
   * "" when the tokenizer adds BOS instead. Owned by the template. */
  char *bos_text;
} rg_chat_template;

typedef struct {
  const char *role;    /* "system", "user" or "assistant" */
  const char *content;
} rg_chat_message;

/* Picks the renderer matching a Jinja template string. -1 with the error set
 * when none matches. */
int rg_chat_template_detect(const char *jinja, rg_chat_template *out);
/* By name; -1 with the error set for an unknown name. */
int rg_chat_template_by_name(const char *name, rg_chat_template *out);
void rg_chat_template_free(rg_chat_template *t);
const char *rg_chat_template_name(rg_chat_kind kind);

/* Renders a conversation; add_generation_prompt appends the assistant header.
 * Returns a malloc'd string, or NULL with the error set (e.g. roles that the
 * format cannot express). */
char *rg_chat_render(const rg_chat_template *t, const rg_chat_message *msgs, int n_msgs,
                     bool add_generation_prompt);

/* The template text that follows the user's instruction in a single-turn
 * prompt with a generation prompt (refusal_direction's "eoi" text), malloc'd. */
char *rg_chat_post_instruction(const rg_chat_template *t);

#endif
