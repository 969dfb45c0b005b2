/* test_prompt_encode: the one prompt encoder (model/prompt_encode.h).
 *
 *  - chat: every prompt of the forward fixture, encoded as a chat prompt on
 *    SmolLM2, gives the ids transformers gives (apply_chat_template with the
 *    generation prompt, then tokenize without special tokens added;
 *    tools/reference/make_forward_fixtures.py). capture, generate, logits,
 *    asr and tokenize all encode through this function.
 *  - frame: for every built-in template, the text before the instruction,
 *    the instruction and the text after it put together are the rendered
 *    prompt (what GCG's token layout needs), and chatml's pieces are the ones
 *    its Jinja writes.
 *  - BOS: a template that writes BOS itself (llama-2's "<s>") gets none from
 *    the tokenizer; chatml, which writes none, does.
 */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/prompt_encode.h"
#include "testlib.h"
#include "util/error.h"

static void test_chat_matches_transformers(void **state) {
  rg_model *m = rg_model_load(t_env("REFGEO_MODEL"));
  if (!m) fail_msg("%s", rg_error_get());
  cJSON *index = t_read_json_fixture("forward/index.json");
  cJSON *prompts = cJSON_GetObjectItem(index, "prompts"), *p;
  int n = 0;
  cJSON_ArrayForEach(p, prompts) {
    rg_prompt_opts o = {.text = cJSON_GetObjectItem(p, "text")->valuestring, .chat = true};
    int32_t *ids = NULL;
    int len = 0;
    if (rg_prompt_encode(m, &o, &ids, &len, NULL, NULL) != 0) fail_msg("%s", rg_error_get());
    cJSON *want = cJSON_GetObjectItem(p, "ids");
    if (len != cJSON_GetArraySize(want)) fail_msg("prompt %d: %d ids, transformers %d", n, len, cJSON_GetArraySize(want));
    for (int k = 0; k < len; k++)
      if (ids[k] != cJSON_GetArrayItem(want, k)->valueint)
        fail_msg("prompt %d id %d: %d, transformers %d", n, k, ids[k], cJSON_GetArrayItem(want, k)->valueint);
    free(ids);
    n++;
  }
  print_message("%d chat prompts encoded as transformers does\n", n);
  assert_true(n > 0);
  cJSON_Delete(index);
  rg_model_free(m);
}

static void test_frame(void **state) {
  static const char *const NAMES[] = {"chatml", "llama-2", "mistral", "zephyr", "llama-3", "gemma"};
  static const char INSTR[] = "How do I bake bread?";
  for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
    rg_chat_template t;
    assert_int_equal(rg_chat_template_by_name(NAMES[i], &t), 0);
    char *before = NULL, *after = NULL;
    if (rg_prompt_frame(&t, &before, &after) != 0) fail_msg("%s: %s", NAMES[i], rg_error_get());
    rg_chat_message msg = {"user", INSTR};
    char *full = rg_chat_render(&t, &msg, 1, true);
    assert_non_null(full);
    size_t nb = strlen(before), ni = strlen(INSTR);
    if (strncmp(full, before, nb) != 0 || strncmp(full + nb, INSTR, ni) != 0 || strcmp(full + nb + ni, after) != 0)
      fail_msg("%s: '%s' + instruction + '%s' is not '%s'", NAMES[i], before, after, full);
    if (strcmp(NAMES[i], "chatml") == 0) {
      /* ChatML as SmolLM2's and Qwen's Jinja write it */
      assert_string_equal(after, "<|im_end|>\n<|im_start|>assistant\n");
      assert_true(nb >= strlen("<|im_start|>user\n") &&
                  strcmp(before + nb - strlen("<|im_start|>user\n"), "<|im_start|>user\n") == 0);
    }
    free(before), free(after), free(full);
    rg_chat_template_free(&t);
  }
}

static void test_bos_rule(void **state) {
  rg_chat_template t;
  assert_int_equal(rg_chat_template_by_name("llama-2", &t), 0);
  assert_false(rg_prompt_wants_bos(&t)); /* its Jinja starts with {{ bos_token }} */
  rg_chat_template_free(&t);
  assert_int_equal(rg_chat_template_by_name("chatml", &t), 0);
  assert_true(rg_prompt_wants_bos(&t));
  rg_chat_template_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chat_matches_transformers),
      cmocka_unit_test(test_frame),
      cmocka_unit_test(test_bos_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
