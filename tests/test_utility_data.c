/* test_utility_data: utility (SFT) examples on SmolLM2 against transformers.
 *
 * tests/fixtures/utility (tools/reference/make_utility_fixtures.py) holds a
 * chat JSONL file and, per conversation, transformers' apply_chat_template
 * ids with the GGUF's own template, the length of the prompt (the messages
 * before the last, with the generation prompt) and the first token where
 * the two differ; and the greedy float32 continuations (16 tokens, ended by
 * <|im_end|>) of three one-turn prompts with their decoded text. Those
 * paths' smallest top-1/top-2 margins (0.039 to 0.110) are far above the
 * 5e-3 within which test_forward allows refgeo's logits to differ from
 * transformers', so refgeo's greedy choice must be the same at every step.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adv_ft/utility_data.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static rg_model *M;
static rg_chat_template T;
static cJSON *EXPECTED;

static int setup(void **state) {
  (void)state;
  if (!(M = rg_model_load(t_env("REFGEO_MODEL"))) || rg_prompt_template(M, NULL, &T) < 0) {
    fprintf(stderr, "%s\n", rg_error_get());
    return -1;
  }
  EXPECTED = t_read_json_fixture("utility/expected.json");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  cJSON_Delete(EXPECTED);
  rg_chat_template_free(&T);
  rg_model_free(M);
  return 0;
}

static int int_at(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key)->valueint; }

static rg_utility_set *jsonl_or_fail(const char *path, int max_len, rg_utility_labels labels) {
  rg_utility_set *u = rg_utility_from_jsonl(M, &T, path, max_len, labels);
  if (!u) fail_msg("%s", rg_error_get());
  return u;
}

/* Example E has the first N of reference ids REF. */
static void assert_ids(const rg_utility_example *e, const cJSON *ref, int n) {
  assert_int_equal(e->n, n);
  for (int k = 0; k < n; k++)
    if (e->ids[k] != cJSON_GetArrayItem(ref, k)->valueint)
      fail_msg("token %d: %d vs transformers' %d", k, e->ids[k], cJSON_GetArrayItem(ref, k)->valueint);
}

static void test_jsonl_ids_and_labels(void **state) {
  (void)state;
  char *path = t_fixture_path("utility/conversations.jsonl");
  const cJSON *conv = cJSON_GetObjectItemCaseSensitive(EXPECTED, "conversations");
  rg_utility_set *a = jsonl_or_fail(path, 4096, RG_UTILITY_LABELS_ASSISTANT);
  rg_utility_set *all = jsonl_or_fail(path, 4096, RG_UTILITY_LABELS_ALL);
  assert_int_equal(rg_utility_count(a), cJSON_GetArraySize(conv));
  assert_int_equal(rg_utility_count(all), cJSON_GetArraySize(conv));
  assert_int_equal(rg_utility_skipped(a), 0);
  for (int i = 0; i < rg_utility_count(a); i++) {
    const cJSON *c = cJSON_GetArrayItem(conv, i);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
    const rg_utility_example *e = rg_utility_get(a, i), *f = rg_utility_get(all, i);
    assert_ids(e, ids, cJSON_GetArraySize(ids));
    assert_ids(f, ids, cJSON_GetArraySize(ids));
    /* row label_from predicts the first token of the last reply */
    assert_int_equal(e->label_from + 1, int_at(c, "first_reply"));
    assert_int_equal(int_at(c, "first_reply"), int_at(c, "prompt_len")); /* no token straddles the boundary here */
    assert_int_equal(f->label_from, 0);
  }
  rg_utility_free(a);
  rg_utility_free(all);
  free(path);
}

/* Packing as TRL 0.7.4's ConstantLengthDataset: transformers' ids of every
 * conversation, each followed by EOS, cut every LEN tokens, the partial
 * last sequence dropped, every token supervised. 50 tokens: sequences
 * that start and end inside conversations. */
static void test_pack(void **state) {
  (void)state;
  char *path = t_fixture_path("utility/conversations.jsonl");
  const cJSON *conv = cJSON_GetObjectItemCaseSensitive(EXPECTED, "conversations");
  rg_utility_set *u = jsonl_or_fail(path, 4096, RG_UTILITY_LABELS_ALL);
  const int32_t eos = rg_tokenizer_eos(M->tokenizer);
  enum { LEN = 50 };
  int stream_n = 0;
  for (int i = 0; i < cJSON_GetArraySize(conv); i++)
    stream_n += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(conv, i), "ids")) + 1;
  int32_t *stream = malloc((size_t)stream_n * sizeof *stream);
  int at = 0;
  for (int i = 0; i < cJSON_GetArraySize(conv); i++) {
    const cJSON *id;
    cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(conv, i), "ids")) stream[at++] = id->valueint;
    stream[at++] = eos;
  }
  rg_utility_set *p = rg_utility_pack(u, LEN, eos);
  if (!p) fail_msg("%s", rg_error_get());
  assert_true(stream_n >= 2 * LEN); /* the fixture makes more than one sequence */
  assert_int_equal(rg_utility_count(p), stream_n / LEN);
  for (int s = 0; s < rg_utility_count(p); s++) {
    const rg_utility_example *e = rg_utility_get(p, s);
    assert_int_equal(e->n, LEN);
    assert_int_equal(e->label_from, 0);
    for (int k = 0; k < LEN; k++)
      if (e->ids[k] != stream[s * LEN + k]) fail_msg("sequence %d token %d: %d, TRL's %d", s, k, e->ids[k], stream[s * LEN + k]);
  }
  rg_utility_free(p);
  /* too short a sequence, or a stream shorter than one sequence */
  assert_null(rg_utility_pack(u, 1, eos));
  assert_non_null(strstr(rg_error_get(), "sequences of 1 tokens"));
  assert_null(rg_utility_pack(u, stream_n + 1, eos));
  assert_non_null(strstr(rg_error_get(), "fewer than one"));
  rg_utility_free(u);
  free(stream);
  free(path);
}

/* max_len cuts an example; a prompt that reaches max_len skips it. */
static void test_jsonl_max_len(void **state) {
  (void)state;
  char *path = t_fixture_path("utility/conversations.jsonl");
  const cJSON *conv = cJSON_GetObjectItemCaseSensitive(EXPECTED, "conversations");
  const int max_len = 40;
  rg_utility_set *u = jsonl_or_fail(path, max_len, RG_UTILITY_LABELS_ASSISTANT);
  int kept = 0;
  for (int i = 0; i < cJSON_GetArraySize(conv); i++) {
    const cJSON *c = cJSON_GetArrayItem(conv, i);
    if (int_at(c, "first_reply") >= max_len) continue;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
    int n = cJSON_GetArraySize(ids);
    const rg_utility_example *e = rg_utility_get(u, kept++);
    assert_ids(e, ids, n < max_len ? n : max_len);
    assert_int_equal(e->label_from + 1, int_at(c, "first_reply"));
  }
  /* first_reply 37, 26, 53, 46, 37 against 40: three kept (two cut to 40), two skipped */
  assert_int_equal(kept, 3);
  assert_int_equal(rg_utility_count(u), 3);
  assert_int_equal(rg_utility_skipped(u), 2);
  for (int i = 0; i < rg_utility_count(u); i++) /* at least one supervised row each */
    assert_true(rg_utility_get(u, i)->label_from < rg_utility_get(u, i)->n - 1);
  rg_utility_free(u);
  /* at the boundary: a prompt of exactly max_len = 37 tokens leaves no reply token */
  u = jsonl_or_fail(path, 37, RG_UTILITY_LABELS_ASSISTANT);
  assert_int_equal(rg_utility_count(u), 1);
  assert_int_equal(rg_utility_skipped(u), 4);
  assert_int_equal(rg_utility_get(u, 0)->label_from + 1, 26);
  rg_utility_free(u);
  assert_null(rg_utility_from_jsonl(M, &T, path, 20, RG_UTILITY_LABELS_ALL));
  assert_non_null(strstr(rg_error_get(), "reach max_len 20"));
  free(path);
}

/* A bad line's error names the file and the line. */
static void expect_jsonl_error(const char *text, const char *want) {
  char *path = t_write_tmp("utility_bad.jsonl", text, strlen(text));
  assert_null(rg_utility_from_jsonl(M, &T, path, 256, RG_UTILITY_LABELS_ASSISTANT));
  const char *e = rg_error_get();
  if (strncmp(e, path, strlen(path)) != 0 || !strstr(e, want)) fail_msg("error '%s' lacks '%s' or '%s'", e, path, want);
  free(path);
}

#define GOOD_LINE "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}]}\n"

static void test_jsonl_errors(void **state) {
  (void)state;
  expect_jsonl_error(GOOD_LINE "\n{\"messages\": [}\n", "line 3: not valid JSON at byte 14");
  expect_jsonl_error(GOOD_LINE "[1, 2]\n", "line 2: expected an object with a \"messages\" array");
  expect_jsonl_error("{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
                     "line 1: message 1: role \"tool\"");
  expect_jsonl_error("{\"messages\": [{\"role\": \"user\", \"content\": 3}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
                     "line 1: message 1 needs string");
  expect_jsonl_error(GOOD_LINE "{\"messages\": [{\"role\": \"assistant\", \"content\": \"y\"}, {\"role\": \"user\", \"content\": \"x\"}]}",
                     "line 2: the last message must be the assistant's reply");
  expect_jsonl_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"y\"}]}", "line 1: a conversation needs");
  expect_jsonl_error("\n  \n", "no conversation");
  assert_null(rg_utility_from_jsonl(M, &T, "/nonexistent/u.jsonl", 256, RG_UTILITY_LABELS_ALL));
  assert_non_null(strstr(rg_error_get(), "/nonexistent/u.jsonl"));
  /* a conversation the template refuses (mistral has no system role) */
  rg_chat_template mistral;
  assert_int_equal(rg_chat_template_by_name("mistral", &mistral), 0);
  static const char SYS[] = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": "
                            "\"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}\n";
  char *path = t_write_tmp("utility_sys.jsonl", SYS, strlen(SYS));
  assert_null(rg_utility_from_jsonl(M, &mistral, path, 256, RG_UTILITY_LABELS_ALL));
  assert_non_null(strstr(rg_error_get(), "line 1: chat template mistral"));
  rg_chat_template_free(&mistral);
  free(path);
}

/* The lines of a JSONL file, parsed (fails the test on a bad line). */
static cJSON *read_jsonl(const char *path) {
  size_t len;
  char *text = rg_read_file(path, &len);
  assert_non_null(text);
  cJSON *lines = cJSON_CreateArray();
  for (char *s = text; *s;) {
    char *end = strchr(s, '\n');
    assert_non_null(end); /* every line ends with a newline */
    cJSON *o = cJSON_ParseWithLength(s, (size_t)(end - s));
    if (!o) fail_msg("%s: line %d is not JSON", path, cJSON_GetArraySize(lines) + 1);
    cJSON_AddItemToArray(lines, o);
    s = end + 1;
  }
  free(text);
  return lines;
}

static const char *message(const cJSON *line, int i, const char *key) {
  const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(line, "messages"), i);
  return cJSON_GetObjectItemCaseSensitive(m, key)->valuestring;
}

static void test_completions(void **state) {
  (void)state;
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(EXPECTED, "completions"), "items");
  const int n_items = cJSON_GetArraySize(items);
  /* the prompts file: the fixture's prompts, then one more that max_prompts leaves out */
  cJSON *prompts = cJSON_CreateArray();
  for (int i = 0; i <= n_items; i++) {
    cJSON *p = cJSON_CreateObject();
    const char *text = i < n_items ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, i), "prompt")->valuestring
                                   : "Never generated.";
    cJSON_AddStringToObject(p, "instruction", text);
    cJSON_AddItemToArray(prompts, p);
  }
  char *ptext = cJSON_Print(prompts);
  char *prompts_path = t_write_tmp("utility_prompts.json", ptext, strlen(ptext));
  char *cache = t_tmp_path("utility_cache.jsonl");
  unlink(cache);
  rg_weights *w = rg_weights_open(M, &(rg_backend_opts){.threads = 2}, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  /* batches of 2: the three prompts take two generate calls */
  rg_utility_completions_opts o = {.prompts_path = prompts_path, .max_prompts = n_items, .max_new_tokens = 16,
                                   .batch = 2, .cache_path = cache, .max_len = 4096};
  bool generated = false;
  rg_utility_set *u = rg_utility_from_completions(w, &T, &o, &generated);
  if (!u) fail_msg("%s", rg_error_get());
  assert_true(generated);
  assert_int_equal(rg_utility_count(u), n_items);

  cJSON *lines = read_jsonl(cache);
  assert_int_equal(cJSON_GetArraySize(lines), n_items);
  for (int i = 0; i < n_items; i++) {
    const cJSON *want = cJSON_GetArrayItem(items, i), *line = cJSON_GetArrayItem(lines, i);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(line, "messages")), 2);
    assert_string_equal(message(line, 0, "role"), "user");
    assert_string_equal(message(line, 0, "content"), cJSON_GetObjectItemCaseSensitive(want, "prompt")->valuestring);
    assert_string_equal(message(line, 1, "role"), "assistant");
    assert_string_equal(message(line, 1, "content"), cJSON_GetObjectItemCaseSensitive(want, "text")->valuestring);
    /* the example: transformers' prompt ids, supervised from the reply on */
    const cJSON *pids = cJSON_GetObjectItemCaseSensitive(want, "prompt_ids");
    const rg_utility_example *e = rg_utility_get(u, i);
    assert_int_equal(e->label_from + 1, cJSON_GetArraySize(pids));
    for (int k = 0; k < cJSON_GetArraySize(pids); k++) assert_int_equal(e->ids[k], cJSON_GetArrayItem(pids, k)->valueint);
  }
  cJSON_Delete(lines);
  rg_utility_free(u);

  /* A second call reads the cache: an edit of it comes back, nothing is generated. */
  size_t len;
  char *text = rg_read_file(cache, &len);
  const char *first_reply = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, 0), "text")->valuestring;
  char *at = strstr(text, first_reply);
  assert_non_null(at);
  memcpy(at, "Edited", 6);
  assert_int_equal(rg_write_file_atomic(cache, text, len), 0);
  u = rg_utility_from_completions(w, &T, &o, &generated);
  if (!u) fail_msg("%s", rg_error_get());
  assert_false(generated);
  const rg_utility_example *e = rg_utility_get(u, 0);
  char *reply = rg_detokenize(M->tokenizer, e->ids + e->label_from + 1, e->n - e->label_from - 1, true);
  char want[256]; /* the edited reply, then the "\n" after <|im_end|> */
  snprintf(want, sizeof want, "Edited%s\n", first_reply + 6);
  assert_string_equal(reply, want);
  free(reply);
  rg_utility_free(u);
  free(text);

  /* errors: a missing prompts file, no new tokens */
  unlink(cache);
  o.prompts_path = "/nonexistent/prompts.json";
  assert_null(rg_utility_from_completions(w, &T, &o, NULL));
  assert_non_null(strstr(rg_error_get(), "/nonexistent/prompts.json"));
  assert_false(rg_path_exists(cache));
  o.prompts_path = prompts_path;
  o.max_new_tokens = 0;
  assert_null(rg_utility_from_completions(w, &T, &o, NULL));
  assert_non_null(strstr(rg_error_get(), "max_new_tokens 0"));
  o.max_new_tokens = 16;
  o.max_len = 1;
  assert_null(rg_utility_from_completions(w, &T, &o, NULL));
  assert_non_null(strstr(rg_error_get(), "max_len 1"));
  assert_false(rg_path_exists(cache)); /* refused before generating */

  rg_weights_free(w);
  cJSON_Delete(prompts);
  free(ptext);
  free(prompts_path);
  free(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jsonl_ids_and_labels),
      cmocka_unit_test(test_jsonl_max_len),
      cmocka_unit_test(test_pack),
      cmocka_unit_test(test_jsonl_errors),
      cmocka_unit_test(test_completions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
