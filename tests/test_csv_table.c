/* test_csv_table: rg_csv_read against Python's csv module on every
 * HarmBench/AdvBench CSV in data/, and its errors on crafted broken files. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"

static void test_data_csvs_match_python(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/csv_fields.json");
  const cJSON *files = cJSON_GetObjectItem(fx, "files");
  assert_int_equal(cJSON_GetArraySize(files), 6);
  const cJSON *f;
  cJSON_ArrayForEach(f, files) {
    char *path = t_data_path(cJSON_GetObjectItem(f, "path")->valuestring);
    rg_csv *t = rg_csv_read(path);
    if (!t) fail_msg("%s", rg_error_get());
    const cJSON *header = cJSON_GetObjectItem(f, "header");
    assert_int_equal(t->n_cols, cJSON_GetArraySize(header));
    for (int c = 0; c < t->n_cols; c++)
      assert_string_equal(t->header[c], cJSON_GetArrayItem(header, c)->valuestring);
    assert_int_equal(t->n_rows, cJSON_GetObjectItem(f, "n_rows")->valueint);
    const cJSON *lengths = cJSON_GetObjectItem(f, "lengths");
    const cJSON *hashes = cJSON_GetObjectItem(f, "fnv1a64");
    int multiline = 0;
    for (size_t r = 0; r < t->n_rows; r++) {
      const cJSON *lrow = cJSON_GetArrayItem(lengths, (int)r);
      const cJSON *hrow = cJSON_GetArrayItem(hashes, (int)r);
      for (int c = 0; c < t->n_cols; c++) {
        const char *field = t->rows[r][c];
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", t_fnv1a64(field));
        if (strlen(field) != (size_t)cJSON_GetArrayItem(lrow, c)->valueint ||
            strcmp(hex, cJSON_GetArrayItem(hrow, c)->valuestring) != 0)
          fail_msg("%s: row %zu column %s differs from Python's csv module", path, r, t->header[c]);
        multiline += strchr(field, '\n') != NULL;
      }
    }
    assert_int_equal(multiline, cJSON_GetObjectItem(f, "multiline_fields")->valueint);
    rg_csv_free(t);
    free(path);
  }
  cJSON_Delete(fx);
}

static rg_csv *read_text(const char *name, const char *text) {
  char *path = t_write_tmp(name, text, strlen(text));
  rg_csv *t = rg_csv_read(path);
  free(path);
  return t;
}

/* Quoted fields spanning lines, doubled quotes, CRLF line ends, a BOM and
 * blanks around unquoted fields: what Python's csv.reader yields for them. */
static void test_quoting_bom_crlf(void **state) {
  rg_csv *t = read_text("quoting.csv",
                        "\xEF\xBB\xBF"
                        "id,text\r\n"
                        "1,\"two\r\nlines, and \"\"quotes\"\"\"\r\n"
                        "2, padded \r\n"
                        "3,\n");
  if (!t) fail_msg("%s", rg_error_get());
  assert_int_equal(t->n_cols, 2);
  assert_string_equal(t->header[0], "id"); /* BOM stripped */
  assert_int_equal(t->n_rows, 3);
  assert_string_equal(t->rows[0][1], "two\r\nlines, and \"quotes\"");
  assert_string_equal(t->rows[1][1], " padded ");
  assert_string_equal(t->rows[2][1], "");
  assert_int_equal(rg_csv_col(t, "text"), 1);
  assert_int_equal(rg_csv_col(t, "nope"), -1);
  assert_int_equal(rg_csv_require_col(t, "nope"), -1);
  assert_non_null(strstr(rg_error_get(), "missing column nope"));
  rg_csv_free(t);

  t = read_text("header_only.csv", "a,b\n");
  assert_non_null(t);
  assert_int_equal(t->n_rows, 0);
  rg_csv_free(t);
}

static void expect_error(const char *name, const char *text, const char *needle) {
  rg_error_clear();
  rg_csv *t = read_text(name, text);
  assert_null(t);
  const char *msg = rg_error_get();
  if (!strstr(msg, name) || !strstr(msg, needle)) fail_msg("error '%s' lacks '%s'", msg, needle);
}

static void test_errors_name_file_and_line(void **state) {
  expect_error("empty.csv", "", "empty file");
  expect_error("bom_only.csv", "\xEF\xBB\xBF", "empty file");
  /* The ragged row starts on line 4, after a record spanning lines 2-3. */
  expect_error("ragged.csv", "a,b\n\"x\ny\",1\n5,6,7\n", "line 4: row has 3 fields, header has 2");
  /* A record spanning lines 2-4 that is one field short is reported at its first line. */
  expect_error("ragged_multiline.csv", "a,b,c\n1,\"p\nq\nr\"\n", "line 2: row has 2 fields, header has 3");
  expect_error("stray_quote.csv", "a,b\n1,2\n3,x\"y\n", "line 3: malformed quoting");
  expect_error("after_quote.csv", "a,b\n\"1\"x,2\n", "line 2: malformed quoting");
  expect_error("unterminated.csv", "a,b\n1,\"open\nstill open\n", "unterminated quoted field (starts on line 2)");
  char *absent = t_tmp_path("no_such_file.csv");
  assert_null(rg_csv_read(absent));
  assert_non_null(strstr(rg_error_get(), absent));
  free(absent);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_data_csvs_match_python),
      cmocka_unit_test(test_quoting_bom_crlf),
      cmocka_unit_test(test_errors_name_file_and_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
