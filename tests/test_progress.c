/* test_progress.c: util/progress.h on a file and on a terminal.
 *
 * A file or pipe (a log) gets one line per loop, at its end, with the count,
 * the time and the rate; no carriage return, no bar. A pseudo-terminal
 * (openpty: isatty is true, as for a user's shell) gets the bar redrawn in
 * place with the count, percentage, rate and ETA, then the end line.
 * Without a stream nothing is written.
 */
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "util/progress.h"

static void tick_all(FILE *f, int total) {
  rg_progress p;
  rg_progress_start(&p, f, "scoring", total);
  for (int i = 1; i <= total; i++) rg_progress_tick(&p, i);
  rg_progress_end(&p);
}

static char *read_all(FILE *f) {
  long n = ftell(f);
  rewind(f);
  char *text = calloc((size_t)n + 1, 1);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  return text;
}

static void test_log_gets_one_line(void **state) {
  FILE *f = tmpfile();
  assert_non_null(f);
  tick_all(f, 180); /* the demo's carrier count */
  char *text = read_all(f);
  fclose(f);
  assert_non_null(strstr(text, "scoring: 180 done in "));
  assert_non_null(strstr(text, "/s)\n"));
  assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1); /* one line */
  assert_null(strchr(text, '\r'));
  assert_null(strchr(text, '['));
  free(text);
}

static void test_terminal_gets_a_bar(void **state) {
  int leader, follower;
  assert_int_equal(openpty(&leader, &follower, NULL, NULL, NULL), 0);
  FILE *f = fdopen(follower, "w");
  assert_non_null(f);
  tick_all(f, 4);
  fclose(f);
  char text[4096];
  size_t n = 0;
  ssize_t got;
  while (n < sizeof text - 1 && (got = read(leader, text + n, sizeof text - 1 - n)) > 0) n += (size_t)got;
  text[n] = '\0';
  close(leader);
  /* after 2 of 4: half the 24-character bar, 50%, a rate and an ETA */
  assert_non_null(strstr(text, "\rscoring [############............] 2/4  50%  "));
  assert_non_null(strstr(text, "ETA "));
  assert_non_null(strstr(text, "scoring [########################] 4/4 100%"));
  assert_non_null(strstr(text, "\rscoring: 4 done in "));
}

/* REFGEO_VERBOSITY, which --quiet / --verbose set: quiet writes nothing,
 * verbose adds a log line at every tenth. */
static void test_quiet_and_verbose(void **state) {
  setenv("REFGEO_VERBOSITY", "quiet", 1);
  FILE *f = tmpfile();
  tick_all(f, 180);
  assert_int_equal(ftell(f), 0);
  fclose(f);
  setenv("REFGEO_VERBOSITY", "verbose", 1);
  f = tmpfile();
  tick_all(f, 180);
  char *text = read_all(f);
  fclose(f);
  unsetenv("REFGEO_VERBOSITY");
  int lines = 0;
  for (const char *c = text; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, 11); /* 10 tenths + the end line */
  assert_non_null(strstr(text, "scoring: 18/180 (10%)\n"));
  free(text);
}

static void test_no_stream(void **state) {
  rg_progress p;
  rg_progress_start(&p, NULL, "x", 5);
  rg_progress_tick(&p, 1); /* must not crash */
  rg_progress_end(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_log_gets_one_line),
                                     cmocka_unit_test(test_terminal_gets_a_bar), cmocka_unit_test(test_quiet_and_verbose),
                                     cmocka_unit_test(test_no_stream)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
