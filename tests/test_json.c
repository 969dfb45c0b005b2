/* test_json: util/json.h's one error for every JSON file refgeo reads,
 * "PATH: not valid JSON at byte N". The expected N are counted by hand in
 * each text (0-based, the byte at which the text stops being JSON; for a
 * text cut short, its last byte). Old main said only "not valid JSON" (or
 * "invalid JSON near byte", or "not a JSON object") depending on the loader,
 * so the exact-string checks below fail on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "harmbench/completions.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json.h"

static void expect_read_error(const char *name, const char *text, size_t at) {
  char *path = t_write_tmp(name, text, strlen(text));
  rg_error_clear();
  cJSON *root = rg_json_read_file(path);
  assert_null(root);
  char want[1200];
  snprintf(want, sizeof want, "%s: not valid JSON at byte %zu", path, at);
  assert_string_equal(rg_error_get(), want);
  free(path);
}

static void test_byte_offsets(void **state) {
  expect_read_error("json_bad_value.json", "{\"a\": nope}", 6);     /* 'n' of nope */
  expect_read_error("json_trailing_comma.json", "{\"a\": 1,}", 8);  /* '}' where a key must be (one past it, as below, clamped to the last byte) */
  expect_read_error("json_second_line.json", "[1,\n 2,\n x]", 9);   /* 'x' on line 3 */
  expect_read_error("json_cut.json", "[1, 2", 4);                   /* cut short: the last byte */
  expect_read_error("json_empty.json", "", 0);
}

static void test_good_file(void **state) {
  static const char text[] = "{\"a\": [1, 2.5, \"x\"]} trailing text is ignored, as by cJSON_Parse";
  char *path = t_write_tmp("json_good.json", text, strlen(text));
  cJSON *root = rg_json_read_file(path);
  assert_non_null(root);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "a");
  assert_int_equal(cJSON_GetArraySize(a), 3);
  assert_true(cJSON_GetArrayItem(a, 1)->valuedouble == 2.5);
  cJSON_Delete(root);
  free(path);
}

static void test_missing_file(void **state) {
  char *path = t_tmp_path("json_no_such_file.json");
  remove(path);
  assert_null(rg_json_read_file(path));
  assert_non_null(strstr(rg_error_get(), path));
  assert_non_null(strstr(rg_error_get(), "No such file"));
  free(path);
}

/* Two loaders that had their own message each now give the shared one. */
static void test_loaders_share_the_message(void **state) {
  static const char cut[] = "{\"behavior_a\": [{\"test_case\": \"x\"";
  char *path = t_write_tmp("json_cut_completions.json", cut, strlen(cut));
  rg_completions c = {0};
  assert_int_equal(rg_completions_read(path, &c), -1);
  char want[1200];
  snprintf(want, sizeof want, "%s: not valid JSON at byte %zu", path, strlen(cut) - 1);
  assert_string_equal(rg_error_get(), want);
  free(path);

  /* Where a key must start, cJSON's parse_string has stepped past the bad
   * byte before it fails (cJSON.c: input_pointer = buffer_at_offset + 1),
   * so N is one past the second comma. */
  static const char tok[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,, }}}";
  path = t_write_tmp("json_bad_tokenizer.json", tok, strlen(tok));
  assert_null(rg_tokenizer_from_json(path, NULL));
  snprintf(want, sizeof want, "%s: not valid JSON at byte %zu", path, strstr(tok, ",,") + 2 - tok);
  assert_string_equal(rg_error_get(), want);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_byte_offsets),
      cmocka_unit_test(test_good_file),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_loaders_share_the_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
