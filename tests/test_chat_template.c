/* test_chat_template: the built-in chat renderers against transformers.
 *
 * tests/fixtures/chat_template/cases.json (tools/reference/
 * make_chat_template_fixtures.py) holds each family's official Jinja template
 * and what transformers renders from it for 1-3 turn conversations, with and
 * without a system message and a generation prompt, plus conversations the
 * templates reject. Renderings must match byte for byte (no tolerance: a
 * prompt that differs by one byte tokenizes differently).
 * chat_template/qwen_cases.json holds the same conversations rendered from
 * Qwen2.5-Coder-0.5B-Instruct's GGUF template (ChatML with Qwen's default
 * system turn and a tools branch that these conversations do not take).
 * Every test runs on both files.
 */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_template.h"
#include "formats/gguf.h"
#include "util/error.h"
#include "util/fileio.h"

/* The fixture files, the template of each file's test model (GGUF) and how
 * many cases and one-turn generation cases each file has. */
typedef struct {
  const char *file, *model_env, *gguf_source;
  int n_cases, n_one_turn;
  const char *default_system; /* the system turn the GGUF template inserts */
} fixture_file;

static const fixture_file FILES[] = {
    {"chat_template/cases.json", "REFGEO_MODEL", "HuggingFaceTB/SmolLM2-135M-Instruct (GGUF)", 140, 7,
     "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
    {"chat_template/qwen_cases.json", "REFGEO_MODEL_QWEN", "Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF)", 20, 1,
     "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
};
#define N_FILES (sizeof FILES / sizeof FILES[0])

static const char *str_field(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *template_for(const cJSON *root, const char *template_source) {
  const cJSON *t;
  cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "templates")) {
    if (strcmp(str_field(t, "template_source"), template_source) == 0) return t;
  }
  fail_msg("fixture: no template %s", template_source);
  return NULL;
}

/* Detects from the official template text and checks the family. */
static void detect_or_fail(const cJSON *tmpl, rg_chat_template *out) {
  if (rg_chat_template_detect(str_field(tmpl, "template"), out) != 0)
    fail_msg("%s: %s", str_field(tmpl, "template_source"), rg_error_get());
  assert_string_equal(rg_chat_template_name(out->kind), str_field(tmpl, "family"));
}

static rg_chat_message *messages_of(const cJSON *c, int *n) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, "messages");
  *n = cJSON_GetArraySize(arr);
  rg_chat_message *m = calloc((size_t)(*n ? *n : 1), sizeof *m);
  assert_non_null(m);
  for (int i = 0; i < *n; i++) {
    const cJSON *msg = cJSON_GetArrayItem(arr, i);
    m[i].role = str_field(msg, "role");
    m[i].content = str_field(msg, "content");
  }
  return m;
}

/* Every fixture case: byte-identical rendering, or an error where the
 * official template raises. */
static void check_every_case(const fixture_file *ff) {
  cJSON *root = t_read_json_fixture(ff->file);
  int n_cases = 0, n_errors = 0, n_bad = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
    rg_chat_template t;
    detect_or_fail(template_for(root, str_field(c, "template_source")), &t);
    int n = 0;
    rg_chat_message *m = messages_of(c, &n);
    bool gen = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
    const char *expected = str_field(c, "expected");
    char *got = rg_chat_render(&t, m, n, gen);
    bool ok = expected ? got && strcmp(got, expected) == 0 : got == NULL && *rg_error_get();
    if (!ok) {
      n_bad++;
      fprintf(stderr, "MISMATCH %s %s gen=%d\n  expected: %s\n  got:      %s\n", str_field(c, "template_source"),
              str_field(c, "conversation"), gen, expected ? expected : "(error)",
              got ? got : rg_error_get());
    }
    n_errors += expected == NULL;
    n_cases++;
    free(got);
    free(m);
    rg_chat_template_free(&t);
  }
  fprintf(stderr, "%s: %d cases (%d rejected by the template), %d mismatches\n", ff->file, n_cases, n_errors,
          n_bad);
  assert_int_equal(n_bad, 0);
  /* cases.json: 7 templates x 10 conversations x 2; qwen_cases.json: 1 x 10 x 2 */
  assert_int_equal(n_cases, ff->n_cases);
  cJSON_Delete(root);
}

static void test_every_case_matches_transformers(void **state) {
  for (size_t f = 0; f < N_FILES; f++) check_every_case(&FILES[f]);
}

/* The default system message hard-coded in SmolLM2's, Qwen2's and
 * Qwen2.5-Coder's templates; the strings are the templates' own (see the
 * fixtures). */
static void test_detect_chatml_default_system(void **state) {
  static const struct {
    const char *file, *source, *system;
  } WANT[] = {
      {"chat_template/cases.json", "Qwen/Qwen2-0.5B-Instruct", "You are a helpful assistant."},
      {"chat_template/cases.json", FILES[0].gguf_source, FILES[0].default_system},
      {"chat_template/qwen_cases.json", FILES[1].gguf_source, FILES[1].default_system},
  };
  for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
    cJSON *root = t_read_json_fixture(WANT[i].file);
    rg_chat_template t;
    detect_or_fail(template_for(root, WANT[i].source), &t);
    assert_non_null(t.default_system);
    assert_string_equal(t.default_system, WANT[i].system);
    assert_string_equal(t.bos_text, "");
    rg_chat_template_free(&t);
    cJSON_Delete(root);
  }
  /* Plain ChatML by name has no default system turn. */
  rg_chat_template t;
  assert_int_equal(rg_chat_template_by_name("chatml", &t), 0);
  assert_null(t.default_system);
  rg_chat_template_free(&t);
}

/* The template stored in each test model itself. */
static void test_detect_gguf_template(void **state) {
  for (size_t f = 0; f < N_FILES; f++) {
    rg_gguf *g = rg_gguf_open(t_env(FILES[f].model_env));
    if (!g) fail_msg("%s", rg_error_get());
    char *jinja = rg_gguf_dup_str(g, "tokenizer.chat_template");
    assert_non_null(jinja);
    cJSON *root = t_read_json_fixture(FILES[f].file);
    const cJSON *fixture = template_for(root, FILES[f].gguf_source);
    assert_string_equal(jinja, str_field(fixture, "template")); /* the fixture is this model's template */
    rg_chat_template t;
    assert_int_equal(rg_chat_template_detect(jinja, &t), 0);
    assert_int_equal(t.kind, RG_CHAT_CHATML);
    assert_non_null(t.default_system);
    assert_string_equal(t.default_system, FILES[f].default_system);
    rg_chat_template_free(&t);
    cJSON_Delete(root);
    free(jinja);
    rg_gguf_close(g);
  }
}

/* post_instruction is what follows the instruction in the reference
 * rendering of a one-turn prompt with a generation prompt. */
static void check_post_instruction(const fixture_file *ff) {
  cJSON *root = t_read_json_fixture(ff->file);
  int checked = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
    if (strcmp(str_field(c, "conversation"), "1turn") != 0 ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")))
      continue;
    const char *expected = str_field(c, "expected");
    const char *instruction =
        str_field(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "messages"), 0), "content");
    const char *at = strstr(expected, instruction);
    assert_non_null(at);
    rg_chat_template t;
    detect_or_fail(template_for(root, str_field(c, "template_source")), &t);
    char *post = rg_chat_post_instruction(&t);
    if (!post) fail_msg("%s", rg_error_get());
    assert_string_equal(post, at + strlen(instruction));
    free(post);
    rg_chat_template_free(&t);
    checked++;
  }
  assert_int_equal(checked, ff->n_one_turn);
  cJSON_Delete(root);
}

static void test_post_instruction_matches_reference(void **state) {
  for (size_t f = 0; f < N_FILES; f++) check_post_instruction(&FILES[f]);
}

/* Every family is reachable by name and renders as its detected template
 * (chatml by name lacks the default system turn, so compare with one). */
static void check_by_name(const fixture_file *ff) {
  cJSON *root = t_read_json_fixture(ff->file);
  const cJSON *tmpl;
  rg_chat_message conv[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  cJSON_ArrayForEach(tmpl, cJSON_GetObjectItemCaseSensitive(root, "templates")) {
    rg_chat_template by_detect, by_name;
    detect_or_fail(tmpl, &by_detect);
    assert_int_equal(rg_chat_template_by_name(str_field(tmpl, "family"), &by_name), 0);
    assert_int_equal(by_name.kind, by_detect.kind);
    assert_string_equal(by_name.bos_text, by_detect.bos_text);
    /* mistral and gemma have no system role: start at the user turn. */
    int skip = by_name.kind == RG_CHAT_MISTRAL || by_name.kind == RG_CHAT_GEMMA;
    char *a = rg_chat_render(&by_detect, conv + skip, 4 - skip, true);
    char *b = rg_chat_render(&by_name, conv + skip, 4 - skip, true);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    free(a);
    free(b);
    rg_chat_template_free(&by_detect);
    rg_chat_template_free(&by_name);
  }
  cJSON_Delete(root);
}

static void test_by_name_matches_detect(void **state) {
  for (size_t f = 0; f < N_FILES; f++) check_by_name(&FILES[f]);
}

static void test_errors(void **state) {
  rg_chat_template t;
  assert_int_equal(rg_chat_template_by_name("vicuna", &t), -1);
  assert_non_null(strstr(rg_error_get(), "unknown chat template 'vicuna'"));

  rg_error_clear();
  assert_int_equal(rg_chat_template_detect("{% for m in messages %}### {{ m['content'] }}{% endfor %}", &t), -1);
  assert_non_null(strstr(rg_error_get(), "no built-in renderer matches"));
  assert_int_equal(rg_chat_template_detect("", &t), -1);
  assert_non_null(strstr(rg_error_get(), "no chat template"));

  /* transformers' apply_chat_template refuses an empty conversation. */
  assert_int_equal(rg_chat_template_by_name("chatml", &t), 0);
  rg_error_clear();
  assert_null(rg_chat_render(&t, NULL, 0, true));
  assert_non_null(strstr(rg_error_get(), "empty conversation"));
  rg_chat_message no_content = {"user", NULL};
  assert_null(rg_chat_render(&t, &no_content, 1, true));
  rg_chat_template_free(&t);

  /* The message names the family and the offending message. */
  assert_int_equal(rg_chat_template_by_name("gemma", &t), 0);
  rg_chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
  assert_null(rg_chat_render(&t, two_users, 2, true));
  assert_non_null(strstr(rg_error_get(), "chat template gemma: conversation roles must alternate"));
  rg_chat_template_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_case_matches_transformers),
      cmocka_unit_test(test_detect_chatml_default_system),
      cmocka_unit_test(test_detect_gguf_template),
      cmocka_unit_test(test_post_instruction_matches_reference),
      cmocka_unit_test(test_by_name_matches_detect),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
