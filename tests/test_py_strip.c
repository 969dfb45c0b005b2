/* test_py_strip.c: rg_py_space_len and rg_py_strip (harmbench/
 * py_whitespace.h) against Python's own str.isspace() and str.strip()
 * (tests/fixtures/harmbench/strip.json, written by
 * tools/reference/make_strip_fixtures.py): every code point's UTF-8 form
 * (encoded here by hand) counts as whitespace exactly when Python says so,
 * and every fixture text strips to Python's result, byte for byte. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/py_whitespace.h"
#include "testlib.h"

/* The UTF-8 form of code point C into OUT (NUL-terminated); its length. */
static size_t utf8(unsigned c, char *out) {
  size_t n = 0;
  if (c < 0x80) {
    out[n++] = (char)c;
  } else if (c < 0x800) {
    out[n++] = (char)(0xC0 | c >> 6), out[n++] = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out[n++] = (char)(0xE0 | c >> 12), out[n++] = (char)(0x80 | (c >> 6 & 0x3F)), out[n++] = (char)(0x80 | (c & 0x3F));
  } else {
    out[n++] = (char)(0xF0 | c >> 18), out[n++] = (char)(0x80 | (c >> 12 & 0x3F));
    out[n++] = (char)(0x80 | (c >> 6 & 0x3F)), out[n++] = (char)(0x80 | (c & 0x3F));
  }
  out[n] = '\0';
  return n;
}

static void test_space_set_is_pythons(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/strip.json");
  bool *space = calloc(0x110000, sizeof *space);
  assert_non_null(space);
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "space_code_points")) space[c->valueint] = true;
  int n_space = 0;
  for (unsigned cp = 1; cp < 0x110000; cp++) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    char s[8];
    const size_t n = utf8(cp, s);
    const size_t got = rg_py_space_len(s);
    if (got != (space[cp] ? n : 0)) fail_msg("U+%04X: rg_py_space_len %zu, Python's isspace() %d", cp, got, space[cp]);
    n_space += space[cp];
  }
  assert_int_equal(n_space, cJSON_GetArraySize(cJSON_GetObjectItem(fx, "space_code_points")));
  free(space);
  cJSON_Delete(fx);
}

static void test_strip_is_pythons(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/strip.json");
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "cases")) {
    char *s = strdup(cJSON_GetObjectItem(c, "text")->valuestring);
    assert_non_null(s);
    rg_py_strip(s);
    const char *want = cJSON_GetObjectItem(c, "stripped")->valuestring;
    if (strcmp(s, want) != 0) fail_msg("'%s' stripped to '%s', Python '%s'", cJSON_GetObjectItem(c, "text")->valuestring, s, want);
    free(s);
  }
  cJSON_Delete(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_space_set_is_pythons),
      cmocka_unit_test(test_strip_is_pythons),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
