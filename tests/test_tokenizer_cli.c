/* test_tokenizer_cli: `refgeo tokenize` on SmolLM2 against
 * tests/fixtures/tokenizer/cli.json (tools/reference/make_tokenizer_fixtures.py):
 * ids from Hugging Face `tokenizers` (SmolLM2's tokenizer rebuilt from the
 * GGUF) for a plain text with and without special-token parsing, and for the
 * one-turn chat prompt that transformers' apply_chat_template renders from the
 * GGUF's own Jinja template. Ids are exact. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* Runs `refgeo tokenize MODEL FLAGS --json -- TEXT` (TEXT passed through a
 * temp file so the shell sees no quoting) and checks ids against EXPECTED. */
static void expect_ids(const char *flags, const char *text, const cJSON *expected) {
  char *in = t_write_tmp("tokenize_cli_input.txt", text, strlen(text));
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "tokenize '%s' %s --json -- \"$(cat '%s')\"", t_env("REFGEO_MODEL"), flags, in);
  char *out = NULL, *err = NULL;
  int rc = t_run_cli(cmd, &out, &err);
  if (rc != 0) fprintf(stderr, "refgeo %s failed: %s\n", cmd, err ? err : "");
  assert_int_equal(rc, 0);
  cJSON *r = cJSON_Parse(out);
  assert_non_null(r);
  const cJSON *ids = cJSON_GetObjectItem(r, "ids");
  char *got = cJSON_PrintUnformatted(ids), *want = cJSON_PrintUnformatted(expected);
  if (strcmp(got, want) != 0) fprintf(stderr, "flags '%s': expected %s\ngot %s\n", flags, want, got);
  assert_string_equal(got, want);
  assert_int_equal(cJSON_GetObjectItem(r, "n")->valueint, cJSON_GetArraySize(expected));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tokens")), cJSON_GetArraySize(expected));
  free(got);
  free(want);
  cJSON_Delete(r);
  free(out);
  free(err);
  free(in);
}

/* $(cat file) drops trailing newlines; none of the fixture texts ends in one. */
static void test_plain_and_no_special(void **state) {
  (void)state;
  cJSON *f = t_read_json_fixture("tokenizer/cli.json");
  const char *plain = cJSON_GetObjectItem(f, "plain")->valuestring;
  expect_ids("", plain, cJSON_GetObjectItem(f, "plain_ids"));
  expect_ids("--no-special", plain, cJSON_GetObjectItem(f, "plain_nospecial_ids"));
  cJSON_Delete(f);
}

static void test_chat(void **state) {
  (void)state;
  cJSON *f = t_read_json_fixture("tokenizer/cli.json");
  expect_ids("--chat", cJSON_GetObjectItem(f, "chat_user")->valuestring, cJSON_GetObjectItem(f, "chat_ids"));
  cJSON_Delete(f);
}

static void test_usage_errors(void **state) {
  (void)state;
  char *err = NULL;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "tokenize '%s'", t_env("REFGEO_MODEL"));
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "expected MODEL and TEXT"));
  free(err);
  snprintf(cmd, sizeof cmd, "tokenize '%s' --system x hi", t_env("REFGEO_MODEL"));
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "--chat"));
  free(err);
  assert_int_equal(t_run_cli("tokenize /nonexistent/model.gguf hi", NULL, &err), 1);
  assert_non_null(strstr(err, "/nonexistent/model.gguf"));
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_and_no_special),
      cmocka_unit_test(test_chat),
      cmocka_unit_test(test_usage_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
