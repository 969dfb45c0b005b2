/* prompt_encode.h: a user's prompt -> the token ids a model is run on, the
 * one rule behind every command (generate, logits, tokenize, asr, attack,
 * capture).
 *
 * Plain text is tokenized with BOS as the tokenizer adds it. A chat prompt
 * is one user turn, after an optional system message, rendered with the
 * generation prompt by the chat template (the model's own, or one named by
 * the caller; a template's default system message, like SmolLM2's chatml,
 * is kept) and tokenized with special-token text parsed; BOS is added, when
 * the tokenizer adds one at all, unless the template writes it itself
 * (llama-2's "<s>"), so that no prompt starts with two.
 *
 * Every function returns 0, or -1 with the error set; arrays and strings
 * returned through out-pointers are malloc'd and owned by the caller.
 */
#ifndef RG_PROMPT_ENCODE_H
#define RG_PROMPT_ENCODE_H

#include <stdbool.h>
#include <stdint.h>

#include "tokenizer/chat_template.h"
#include "model/model.h"

typedef struct {
  const char *text;          /* the user's text */
  bool chat;                 /* one user turn with the generation prompt */
  const char *system;        /* system message (chat only); NULL = the template's default */
  const char *chat_template; /* renderer name; NULL = detect from the model */
  bool plain_specials;       /* special-token text in TEXT is plain text */
} rg_prompt_opts;

/* The chat template named NAME, or the model's own when NAME is NULL
 * (free with rg_chat_template_free). */
int rg_prompt_template(const rg_model *m, const char *name, rg_chat_template *out);

/* Whether the tokenizer's BOS goes before a prompt rendered with T. */
bool rg_prompt_wants_bos(const rg_chat_template *t);

/* One user turn USER (after SYSTEM when non-NULL) rendered with T and the
 * generation prompt, tokenized into *ids[*n]. */
int rg_prompt_encode_chat(const rg_model *m, const rg_chat_template *t, const char *system, const char *user,
                          bool parse_special, int32_t **ids, int *n);

/* P as the model sees it: plain or chat (P->text must be set). STOP (may be
 * NULL) receives up to 2 ids that end a reply: the tokenizer's EOS and, for
 * chat, the template's end-of-turn token when it differs. */
int rg_prompt_encode(const rg_model *m, const rg_prompt_opts *p, int32_t **ids, int *n, int32_t stop[2],
                     int *n_stop);

/* The ids that end a reply in a conversation rendered with T (NULL: plain
 * text) into stop[0..2): the tokenizer's EOS and T's end-of-turn token when
 * it differs (chatml's <|im_end|>, llama-3's <|eot_id|>). Returns the count. */
int rg_prompt_stop_ids(const rg_model *m, const rg_chat_template *t, int32_t stop[2]);

/* The template text before and after the user's instruction in a one-turn
 * prompt with the generation prompt, for callers that tokenize the pieces
 * apart (GCG: before | behavior | suffix | after | target). */
int rg_prompt_frame(const rg_chat_template *t, char **before, char **after);

#endif
