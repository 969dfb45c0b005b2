/* test_progress.c: util/progress.h on a file (not a terminal): one line per
 * tenth of the work whatever the number of ticks, each with the count, the
 * percentage and the time left; nothing at all without a stream. */
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "util/progress.h"

static char *report(int total, int ticks) {
  FILE *f = tmpfile();
  assert_non_null(f);
  rg_progress p;
  rg_progress_start(&p, f, "scoring", total);
  for (int i = 1; i <= ticks; i++) rg_progress_tick(&p, i);
  rg_progress_end(&p);
  long n = ftell(f);
  rewind(f);
  char *text = calloc((size_t)n + 1, 1);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return text;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static void test_ten_lines(void **state) {
  /* 180 ticks (the demo's carrier count): 10 progress lines + the end line */
  char *text = report(180, 180);
  assert_int_equal(count_lines(text), 11);
  assert_non_null(strstr(text, "scoring: 18/180 (10%), "));
  assert_non_null(strstr(text, "scoring: 180/180 (100%), "));
  assert_non_null(strstr(text, "about 0s left"));
  assert_non_null(strstr(text, "scoring: done in "));
  assert_null(strchr(text, '\r')); /* a file gets no carriage returns */
  free(text);
  /* fewer items than tenths: one line per item */
  text = report(3, 3);
  assert_int_equal(count_lines(text), 4);
  assert_non_null(strstr(text, "scoring: 1/3 (33%)"));
  free(text);
}

static void test_no_stream(void **state) {
  rg_progress p;
  rg_progress_start(&p, NULL, "x", 5);
  rg_progress_tick(&p, 1); /* must not crash */
  rg_progress_end(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ten_lines), cmocka_unit_test(test_no_stream)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
