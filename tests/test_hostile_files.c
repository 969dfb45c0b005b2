/* test_hostile_files: the refgeo CLI on every hostile input listed in
 * tests/data/bad/cases.tsv (issue 17; the file's header describes its
 * format). Each case runs `$REFGEO_BIN ARGS` in tests/data/bad, in a child
 * limited to 2 GiB of address space (what `prlimit --as=2147483648` does),
 * and must:
 *   - exit with status 1, not by a signal;
 *   - print one or two lines on stderr that contain the case's EXPECT text,
 *     with no "out of memory" (the file's sizes contradict themselves, the
 *     machine is not short of memory) and no sanitizer report;
 *   - peak at under 256 MiB of RSS (wait4's ru_maxrss);
 *   - finish in under a second (not under the sanitizers, which slow every
 *     step several times).
 * Two controls, the tiny models the hostile inputs were made from with
 * nothing wrong, must load, so that each case fails for its planted defect
 * and not for some other flaw of the tiny model. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"
#include "util/clock.h"
#include "util/fileio.h"

enum {
  MAX_ARGS = 32,
  MAX_RSS_KIB = 256 * 1024,
};
static const rlim_t ADDRESS_SPACE_LIMIT = (rlim_t)2 << 30;
static const double MAX_SECONDS = 1.0;

/* What one run of refgeo did. */
typedef struct {
  int status; /* wait4's status word */
  char *out, *err;
  double seconds;
  long max_rss_kib;
} run_result;

/* Under ASan (REFGEO_SANITIZED=1, set by tests/CMakeLists.txt) the shadow
 * memory alone reserves terabytes of address space, so the 2 GiB limit
 * would make every run fail at start-up; it is applied only to unsanitized
 * builds, and the sanitized run checks the rest (status, message, no
 * sanitizer report). The time limit is likewise for unsanitized builds. */
static bool sanitized(void) {
  const char *s = getenv("REFGEO_SANITIZED");
  return s && strcmp(s, "1") == 0;
}

/* tests/data/bad, found from REFGEO_FIXTURES (tests/fixtures), its sibling. */
static char *bad_dir(void) {
  char *dir = t_fixture_path("../data/bad");
  char *real = realpath(dir, NULL);
  if (!real) fail_msg("%s: %s", dir, strerror(errno));
  free(dir);
  return real;
}

static char *read_all(int fd) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  for (;;) {
    if (len + 1 >= cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
    ssize_t r = read(fd, buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  return buf;
}

/* Runs REFGEO_BIN with ARGV (argv[0] included, NULL-terminated) in DIR.
 * stdout goes to a temporary file so that a large report cannot fill a pipe
 * while the parent reads stderr. */
static run_result run_refgeo(const char *dir, char **argv) {
  const char *bin = t_env("REFGEO_BIN");
  const bool limit_address_space = !sanitized();
  char *out_path = t_tmp_path("hostile-stdout.XXXXXX");
  int out_fd = mkstemp(out_path);
  assert_true(out_fd >= 0);
  int err_pipe[2];
  assert_int_equal(pipe(err_pipe), 0);
  double t0 = rg_now_seconds();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Only async-signal-safe calls until exec; 126/127 say which step failed. */
    struct rlimit as = {ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT};
    if (chdir(dir) != 0 || dup2(out_fd, 1) < 0 || dup2(err_pipe[1], 2) < 0) _exit(126);
    if (limit_address_space && setrlimit(RLIMIT_AS, &as) != 0) _exit(126);
    close(err_pipe[0]);
    close(err_pipe[1]);
    close(out_fd);
    execv(bin, argv);
    _exit(127);
  }
  close(err_pipe[1]);
  run_result r = {0};
  r.err = read_all(err_pipe[0]);
  close(err_pipe[0]);
  struct rusage ru;
  while (wait4(pid, &r.status, 0, &ru) < 0) assert_int_equal(errno, EINTR);
  r.seconds = rg_now_seconds() - t0;
  r.max_rss_kib = ru.ru_maxrss; /* Linux reports kibibytes */
  lseek(out_fd, 0, SEEK_SET);
  r.out = read_all(out_fd);
  close(out_fd);
  unlink(out_path);
  free(out_path);
  return r;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The limits every run must keep, hostile or not. Returns a problem, or NULL. */
static const char *resource_problem(const run_result *r) {
  if (r->max_rss_kib >= MAX_RSS_KIB) return "peak RSS of 256 MiB or more";
  if (!sanitized() && r->seconds >= MAX_SECONDS) return "took a second or more";
  return NULL;
}

/* What is wrong with how refgeo refused a hostile input, or NULL. */
static const char *refusal_problem(const run_result *r, const char *expect) {
  if (!WIFEXITED(r->status)) return "killed by a signal";
  if (WEXITSTATUS(r->status) != 1) return "exit status is not 1";
  int lines = count_lines(r->err);
  if (lines < 1 || lines > 2 || r->err[strlen(r->err) - 1] != '\n') return "stderr is not one or two lines";
  if (strstr(r->err, "Sanitizer") || strstr(r->err, "runtime error")) return "sanitizer report";
  if (strstr(r->err, "out of memory")) return "says 'out of memory'";
  if (!strstr(r->err, expect)) return "message lacks the expected text";
  return resource_problem(r);
}

static void free_result(run_result *r) {
  free(r->out);
  free(r->err);
}

/* Splits LINE in place at each SEP; returns the number of fields (at most MAX). */
static int split(char *line, char sep, char **fields, int max) {
  int n = 0;
  fields[n++] = line;
  for (char *p = line; *p && n < max; p++)
    if (*p == sep) {
      *p = '\0';
      fields[n++] = p + 1;
    }
  return n;
}

static void test_manifest_cases(void **state) {
  (void)state;
  char *dir = bad_dir();
  char *manifest = rg_path_join(dir, "cases.tsv");
  char *text = rg_read_file(manifest, NULL);
  if (!text) fail_msg("cannot read %s", manifest);
  int n_cases = 0, n_failed = 0, line_no = 0;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    line_no++;
    if (*line == '\0' || *line == '#') continue;
    char *field[4];
    if (split(line, '\t', field, 4) != 3 || !*field[0] || !*field[1] || !*field[2])
      fail_msg("%s:%d: expected NAME<TAB>ARGS<TAB>EXPECT", manifest, line_no);
    char *argv[MAX_ARGS + 2];
    argv[0] = (char *)t_env("REFGEO_BIN");
    int argc = 1 + split(field[1], ' ', argv + 1, MAX_ARGS);
    argv[argc] = NULL;
    run_result r = run_refgeo(dir, argv);
    const char *problem = refusal_problem(&r, field[2]);
    n_cases++;
    if (problem) {
      n_failed++;
      /* Two lines of status, then the head of stderr: cmocka's print_error
       * cuts long messages, and a sanitizer report can be kilobytes long. */
      print_error("case %s: %s (status %s %d, %.3f s, %ld KiB peak RSS)\n  expected: %s\n", field[0], problem,
                  WIFEXITED(r.status) ? "exit" : "signal",
                  WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.seconds, r.max_rss_kib,
                  field[2]);
      print_error("  stderr: %.300s\n", r.err);
    }
    free_result(&r);
  }
  free(text);
  free(manifest);
  free(dir);
  /* The manifest lists at least the nine inputs of issue 17's model part. */
  assert_true(n_cases >= 9);
  if (n_failed) fail_msg("%d of %d hostile cases were not refused as required", n_failed, n_cases);
}

/* The controls load, and report the parameter count of the tiny model,
 * counted by hand from its shapes (make_bad_inputs.py): embedding 4 x 8,
 * two norms of 8 per layer plus the final one, q and o 8 x 8, k and v 4 x 8,
 * gate, up and down 16 x 8: 32 + 3*8 + 2*64 + 2*32 + 3*128 = 632. */
static void test_controls_load(void **state) {
  (void)state;
  char *dir = bad_dir();
  const char *controls[] = {"ok-tiny.gguf.bin", "ok-tiny-hf"};
  for (int i = 0; i < 2; i++) {
    char *argv[] = {(char *)t_env("REFGEO_BIN"), "info", (char *)controls[i], "--json", NULL};
    run_result r = run_refgeo(dir, argv);
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) fail_msg("control %s: %s", controls[i], r.err);
    const char *problem = resource_problem(&r);
    if (problem) fail_msg("control %s: %s", controls[i], problem);
    cJSON *report = cJSON_Parse(r.out);
    const cJSON *n_params = cJSON_GetObjectItemCaseSensitive(report, "n_params");
    if (!cJSON_IsNumber(n_params) || n_params->valuedouble != 632)
      fail_msg("control %s: n_params is not 632 in\n%s", controls[i], r.out);
    cJSON_Delete(report);
    free_result(&r);
  }
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_controls_load), cmocka_unit_test(test_manifest_cases)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
