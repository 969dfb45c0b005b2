/* fuzz_chat_template: a model's Jinja chat template (as tokenizer_config.json
 * or GGUF tokenizer.chat_template hold it) through rg_chat_template_detect,
 * then rendering of the fuzzer's conversation with and without the
 * generation prompt, and the post-instruction text.
 * Input, framed as fuzz_util.h describes: one "template" part (the Jinja
 * text; a NUL in it ends it, as in a C string from JSON) or a "name" part
 * (--chat-template NAME), then messages as parts named by their role:
 *     \n@@ template\n{% for message in messages %}...\n@@ user\nHi\n@@ assistant\nHello
 * Seeds: the templates of tests/fixtures/chat_template/cases.json. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tokenizer/chat_template.h"

static const char *const PARTS[] = {"template", "name", "system", "user", "assistant", "tool"};
enum { N_PARTS = sizeof PARTS / sizeof PARTS[0], MAX_PARTS = 32 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_part parts[MAX_PARTS];
  int n = fuzz_split(data, size, PARTS, N_PARTS, parts, MAX_PARTS);
  if (n == 0) return 0;
  /* Every part as a C string; messages keep their input order. */
  char *text[MAX_PARTS];
  rg_chat_message msgs[MAX_PARTS];
  int n_msgs = 0;
  for (int i = 0; i < n; i++) text[i] = strndup((const char *)parts[i].data, parts[i].size);
  rg_chat_template tpl;
  int rc = strcmp(parts[0].name, "template") == 0 ? rg_chat_template_detect(text[0], &tpl)
           : strcmp(parts[0].name, "name") == 0   ? rg_chat_template_by_name(text[0], &tpl)
                                                  : -1;
  for (int i = 1; i < n; i++)
    if (strcmp(parts[i].name, "template") != 0 && strcmp(parts[i].name, "name") != 0)
      msgs[n_msgs++] = (rg_chat_message){parts[i].name, text[i]};
  if (rc == 0) {
    free(rg_chat_render(&tpl, msgs, n_msgs, true));
    free(rg_chat_render(&tpl, msgs, n_msgs, false));
    free(rg_chat_post_instruction(&tpl));
    (void)rg_chat_template_name(tpl.kind);
    rg_chat_template_free(&tpl);
  }
  for (int i = 0; i < n; i++) free(text[i]);
  return 0;
}
