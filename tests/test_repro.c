/* test_repro: `refgeo repro` on synthetic measured curves against the
 * published Lan et al. 2026 numbers (data/published/lan2026_r2d2.csv).
 * Expected verdicts follow from the published values themselves: a curve
 * built from exactly those rates must reproduce, a rate of 0.5 where 0.000
 * was published must not (Wilson 95% for 20/40 is [0.352, 0.648]).
 *
 * Measured curves typed from a paper or a spreadsheet round asr and the
 * Wilson bounds; their full-precision values come from the Python reference
 * tests/fixtures/harmbench/stats.json (tools/reference/make_harmbench_fixtures.py),
 * asr = successes/n from the counts themselves. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/asr_curve.h"
#include "testlib.h"
#include "util/error.h"

static char *published_path(const char *name) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s/../../data/published/%s", t_env("REFGEO_FIXTURES"), name);
  return strdup(buf);
}

/* Writes a measured asr.csv with rg_asr_curve_write (so the writer's output
 * is also what the reader and the CLI accept). */
static char *write_measured(const char *name, const char *attack, const long *steps, const long *n,
                            const long *successes, int count) {
  rg_asr_point pts[8];
  for (int i = 0; i < count; i++)
    pts[i] = (rg_asr_point){.step = steps[i], .attack = (char *)attack, .classifier = "harmbench_cls",
                            .n = n[i], .successes = successes[i]};
  rg_asr_curve c = {.n = (size_t)count, .items = pts};
  char *path = t_tmp_path(name);
  if (rg_asr_curve_write(path, &c) != 0) fail_msg("%s", rg_error_get());
  return path;
}

static int run(const char *published, const char *measured, const char *extra, char **out, char **err) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "repro --published '%s' --measured '%s' %s", published, measured, extra);
  return t_run_cli(cmd, out, err);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static const long STEPS[] = {50, 100, 250, 500};
static const long N200[] = {200, 200, 200, 200};

static void test_consistent_curve_reproduces(void **state) {
  char *pub = published_path("lan2026_r2d2.csv");
  /* 0/200, 0/200, 7/200 = 0.035, 50/200 = 0.250: the published rates. */
  const long succ[] = {0, 0, 7, 50};
  char *meas = write_measured("repro_ok.csv", "fixed_source", STEPS, N200, succ, 4);
  char *out, *err;
  assert_int_equal(run(pub, meas, "", &out, &err), 0);
  assert_non_null(strstr(out, "verdict: reproduced (4/4"));
  free(out), free(err);
  assert_int_equal(run(pub, meas, "--test binomial --alpha 0.05 --method R2D2", &out, &err), 0);
  free(out), free(err);

  assert_int_equal(run(pub, meas, "--json", &out, &err), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "reproduced")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "points")), 4);
  cJSON_Delete(j);
  free(out), free(err);

  /* Adaptive GCG: 83/200 = 0.415, 123/200 = 0.615 ~ 0.613; step 50 has no number. */
  const long steps2[] = {250, 500}, n2[] = {200, 200}, succ2[] = {83, 123};
  char *meas2 = write_measured("repro_gcg.csv", "adaptive_gcg", steps2, n2, succ2, 2);
  assert_int_equal(run(pub, meas2, "--attack adaptive_gcg", &out, &err), 0);
  assert_non_null(strstr(out, "1 published rows have no step or no ASR"));
  free(out), free(err);
  free(meas2);
  free(meas);
  free(pub);
}

static void test_half_asr_at_step_100_fails(void **state) {
  char *pub = published_path("lan2026_r2d2.csv");
  const long steps[] = {50, 100}, n[] = {40, 40}, succ[] = {0, 20};
  char *meas = write_measured("repro_bad.csv", "fixed_source", steps, n, succ, 2);
  /* Only the published steps 50 and 100, so that no step is missing. */
  const char *two = "step,attack,asr,n\n50,fixed_source,0.000,\n100,fixed_source,0.000,\n";
  char *p2 = t_write_tmp("repro_pub_two_steps.csv", two, strlen(two));
  char *out, *err;
  assert_int_equal(run(p2, meas, "", &out, &err), 1);
  assert_non_null(strstr(out, "NOT reproduced"));
  assert_non_null(strstr(out, "verdict: NOT reproduced (1/2"));
  free(out), free(err);
  assert_int_equal(run(p2, meas, "--test binomial", &out, &err), 1);
  free(out), free(err);
  free(p2), free(meas), free(pub);
}

static void test_differing_n_uses_measured(void **state) {
  const char *text = "source,step,attack,asr,n\npaper,50,fixed_source,0.000,320\npaper,100,fixed_source,0.000,200\n";
  char *pub = t_write_tmp("repro_pub_n.csv", text, strlen(text));
  const long steps[] = {50, 100}, n[] = {200, 200}, succ[] = {0, 0};
  char *meas = write_measured("repro_n.csv", "fixed_source", steps, n, succ, 2);
  char *out, *err;
  assert_int_equal(run(pub, meas, "", &out, &err), 0);
  assert_non_null(strstr(out, "step 50 fixed_source: published n=320 differs from measured n=200; the test uses the measured n"));
  assert_null(strstr(out, "step 100 fixed_source: published n"));
  free(out), free(err);
  free(meas), free(pub);
}

static void expect_cannot_compare(const char *published, const char *measured, const char *extra, const char *needle) {
  char *out, *err;
  int rc = run(published, measured, extra, &out, &err);
  if (rc != 2 || !strstr(err, needle) || count_lines(err) != 1)
    fail_msg("exit %d, stderr '%s' (want exit 2 and one line with '%s')", rc, err, needle);
  free(out), free(err);
}

/* A DirectRequest curve of steps 50 and 100 only, compared with the
 * published fixed-source points: 0/40 has Wilson 95% [0, 0.088], which holds
 * the published 0.000 at both steps, so the loosened comparison reproduces;
 * the notes say which rules were loosened. */
static void test_other_attack_on_common_steps(void **state) {
  char *pub = published_path("lan2026_r2d2.csv");
  const long steps[] = {50, 100}, n[] = {40, 40}, succ[] = {0, 0};
  char *meas = write_measured("repro_direct.csv", "DirectRequest", steps, n, succ, 2);
  const char *loose = "--attack fixed_source --measured-attack DirectRequest --common-steps --method R2D2";
  char *out, *err;
  assert_int_equal(run(pub, meas, loose, &out, &err), 0);
  assert_non_null(strstr(out, "note: measured attack DirectRequest compared with published attack fixed_source"));
  assert_non_null(strstr(out, "note: 2 published steps have no measured row and are skipped"));
  assert_non_null(strstr(out, "verdict: reproduced (2/2"));
  free(out), free(err);

  char json_flags[256];
  snprintf(json_flags, sizeof json_flags, "%s --json", loose);
  assert_int_equal(run(pub, meas, json_flags, &out, &err), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "same_protocol")));
  assert_int_equal(cJSON_GetObjectItem(j, "skipped_published_steps")->valueint, 2);
  cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "points"), 0);
  assert_string_equal(cJSON_GetObjectItem(p0, "measured_attack")->valuestring, "DirectRequest");
  cJSON_Delete(j);
  free(out), free(err);

  expect_cannot_compare(pub, meas, "--attack fixed_source --measured-attack DirectRequest",
                        "missing step: published step 250 of attack fixed_source");
  expect_cannot_compare(pub, meas, "--measured-attack DirectRequest", "--measured-attack needs --attack");
  expect_cannot_compare(pub, meas, "--attack fixed_source --measured-attack GCG", "unknown attack 'GCG' in the measured");
  free(meas), free(pub);
}

static void test_errors_are_one_line_exit_2(void **state) {
  char *pub = published_path("lan2026_r2d2.csv");
  const long succ[] = {0, 0, 7};
  char *meas = write_measured("repro_missing.csv", "fixed_source", STEPS, N200, succ, 3);
  expect_cannot_compare(pub, meas, "", "missing step: published step 500 of attack fixed_source");
  expect_cannot_compare(pub, meas, "--attack nope", "unknown attack 'nope' in the published curve");
  const long succ4[] = {0, 0, 7, 50};
  char *other = write_measured("repro_other_attack.csv", "pair", STEPS, N200, succ4, 4);
  expect_cannot_compare(pub, other, "", "unknown attack 'pair' in the published curve");
  expect_cannot_compare(pub, meas, "--test exact", "--test must be wilson or binomial");
  expect_cannot_compare(pub, meas, "--alpha 0.1", "--alpha");

  const char *ragged = "step,attack,classifier,n,successes\n50,fixed_source,cls,200\n";
  char *bad = t_write_tmp("repro_ragged.csv", ragged, strlen(ragged));
  expect_cannot_compare(pub, bad, "", "repro_ragged.csv: line 2: row has 4 fields, header has 5");
  const char *wrong = "step,attack,classifier,n,successes,asr\n50,fixed_source,cls,200,7,0.5\n";
  char *bad2 = t_write_tmp("repro_wrong_asr.csv", wrong, strlen(wrong));
  expect_cannot_compare(pub, bad2, "",
                        "repro_wrong_asr.csv: row 1 (step 50, attack fixed_source): asr = 0.5 contradicts "
                        "successes/n = 7/200 = 0.035 beyond its printed precision (difference 0.465 > tolerance 0.05");
  const char *nan_step = "step,attack,n,successes\nfifty,fixed_source,200,7\n";
  char *bad3 = t_write_tmp("repro_bad_step.csv", nan_step, strlen(nan_step));
  expect_cannot_compare(pub, bad3, "", "repro_bad_step.csv: row 1: step is not an integer: 'fifty'");
  const char *pct = "step,attack,asr\n50,fixed_source,3.5\n";
  char *bad4 = t_write_tmp("repro_pct.csv", pct, strlen(pct));
  expect_cannot_compare(bad4, meas, "", "asr 3.5 is not a fraction");
  expect_cannot_compare(pub, "/nonexistent/asr.csv", "", "/nonexistent/asr.csv");
  free(bad), free(bad2), free(bad3), free(bad4), free(other), free(meas), free(pub);
}

/* The Python reference's Wilson 95% bounds of K of N (stats.json). */
static void reference_wilson(const cJSON *fx, long k, long n, double *lo, double *hi) {
  const cJSON *e;
  *lo = *hi = NAN; /* fail_msg below does not return, but the compiler cannot know */
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "wilson")) {
    if ((long)cJSON_GetObjectItem(e, "k")->valuedouble == k && (long)cJSON_GetObjectItem(e, "n")->valuedouble == n) {
      *lo = cJSON_GetObjectItem(e, "lo")->valuedouble;
      *hi = cJSON_GetObjectItem(e, "hi")->valuedouble;
      return;
    }
  }
  fail_msg("stats.json has no Wilson interval for %ld of %ld", k, n);
}

/* Steps 50..500 with 0, 1, 50 and 199 successes of 200: Wilson bounds that
 * are exactly 0, small (0.00088), mid-range and near 1, so rounding touches
 * every kind of cell. */
static const long ROUNDED_SUCC[] = {0, 1, 50, 199};

/* A measured asr.csv whose asr and Wilson cells are the reference values
 * printed with FMT ("%.17g" is full precision). */
static char *write_printed_curve(const cJSON *fx, const char *name, const char *fmt) {
  char text[2048], cell[3][64];
  size_t len = (size_t)snprintf(text, sizeof text, "step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi\n");
  for (int i = 0; i < 4; i++) {
    double lo, hi;
    reference_wilson(fx, ROUNDED_SUCC[i], 200, &lo, &hi);
    snprintf(cell[0], sizeof cell[0], fmt, (double)ROUNDED_SUCC[i] / 200.0);
    snprintf(cell[1], sizeof cell[1], fmt, lo);
    snprintf(cell[2], sizeof cell[2], fmt, hi);
    len += (size_t)snprintf(text + len, sizeof text - len, "%ld,fixed_source,harmbench_cls,200,%ld,%s,%s,%s\n",
                            STEPS[i], ROUNDED_SUCC[i], cell[0], cell[1], cell[2]);
  }
  return t_write_tmp(name, text, len);
}

/* Acceptance 5 of issue 12: 3- and 4-decimal columns, a spreadsheet's 3
 * significant digits ("0.0188", "0") and an exponent form give exactly the
 * output and exit code of the full-precision curve, both for a published
 * curve that is reproduced and for one that is not (Lan et al.'s 0.000 at
 * step 100 lies below the Wilson interval [0.00088, 0.0278] of 1/200). */
static void test_rounded_curve_same_verdict(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/stats.json");
  /* Inside [0, 0.0188], [0.00088, 0.0278], [0.195, 0.314], [0.972, 0.9991]. */
  const char *inside = "step,attack,asr\n50,fixed_source,0.000\n100,fixed_source,0.005\n"
                       "250,fixed_source,0.250\n500,fixed_source,0.995\n";
  char *pub_ok = t_write_tmp("repro_pub_inside.csv", inside, strlen(inside));
  char *pub_lan = published_path("lan2026_r2d2.csv");
  char *full = write_printed_curve(fx, "repro_full.csv", "%.17g");
  static const char *const formats[] = {"%.3f", "%.4f", "%.3g", "%.2e"};
  static const char *const modes[] = {"", "--test binomial", "--json"};
  const char *pubs[] = {pub_ok, pub_lan};
  const int want_exit[] = {0, 1};
  for (int p = 0; p < 2; p++)
    for (int m = 0; m < 3; m++) {
      char *want_out, *err;
      int want = run(pubs[p], full, modes[m], &want_out, &err);
      /* --test binomial: 0.000 against 1/200 has p = 0 as well. */
      if (want != want_exit[p]) fail_msg("full precision vs %s %s: exit %d, stderr %s", pubs[p], modes[m], want, err);
      free(err);
      for (int f = 0; f < 4; f++) {
        char name[64], *out;
        snprintf(name, sizeof name, "repro_rounded_%d.csv", f);
        char *rounded = write_printed_curve(fx, name, formats[f]);
        int rc = run(pubs[p], rounded, modes[m], &out, &err);
        if (rc != want || strcmp(out, want_out) != 0)
          fail_msg("%s cells, %s %s: exit %d (full precision %d), stderr '%s'", formats[f], pubs[p], modes[m], rc,
                   want, err);
        free(out), free(err), free(rounded);
      }
      free(want_out);
    }
  free(full), free(pub_lan), free(pub_ok);
  cJSON_Delete(fx);
}

typedef struct {
  long successes; /* of 200 */
  const char *column, *text;
  int accepted;
} printed_cell;

/* Single cells against the reader. The reference values they are judged
 * against: 7/200 = 0.035, 50/200 = 0.25, 51/200 = 0.255, and the Wilson
 * upper bound of 0/200, 0.0188453 (stats.json). Each accepted cell lies
 * within half a unit of its last digit of the reference; each refused one
 * lies beyond it. */
static void test_rounded_cells(void **state) {
  static const printed_cell cells[] = {
      {0, "asr", "0", 1},       {0, "asr", "0.0", 1},     {0, "asr", "0.000", 1},   {200, "asr", "1", 1},
      {200, "asr", "1.0", 1},   {200, "asr", "1.000", 1},
      {50, "asr", "0", 1},      /* an integer means +-0.5, so 0 holds 0.25 */
      {50, "asr", "1", 0},      /* but 1 does not (0.75 away) */
      {7, "asr", "0.0", 1},     {7, "asr", "0.00", 0},    /* 0.035 > 0.005 */
      {7, "asr", "0.04", 1},    {7, "asr", "0.03", 1},    /* exactly half a unit either way */
      {7, "asr", "0.036", 0},   {7, "asr", "0.0350", 1},  {7, "asr", "3.5e-2", 1},  {7, "asr", "3.6e-2", 0},
      {50, "asr", "0.2500", 1}, {51, "asr", "0.2500", 0}, /* trailing zeros are precision: 0.005 > 5e-5 */
      {51, "asr", "0.25", 1},   {51, "asr", "0.26", 1},   {51, "asr", "0.254", 0},
      {0, "wilson95_hi", "0.0188", 1},   {0, "wilson95_hi", "1.88e-2", 1}, {0, "wilson95_hi", "188E-4", 1},
      {0, "wilson95_hi", "0.019", 1},    {0, "wilson95_hi", "0.02", 1},
      {0, "wilson95_hi", "0.0189", 0},   /* 5.5e-5 > 5e-5 */
      {0, "wilson95_hi", "1.89e-2", 0},  {0, "wilson95_hi", "0.01884", 0}, /* 5.3e-6 > 5e-6 */
      {0, "wilson95_lo", "0", 1},        {0, "wilson95_lo", "0e0", 1},     {0, "wilson95_lo", "-0", 1},
      {0, "wilson95_lo", "0.001", 0},    {7, "wilson95_lo", "0", 1},       {200, "wilson95_hi", "1", 1},
  };
  for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
    const printed_cell *c = &cells[i];
    char text[256];
    int len = snprintf(text, sizeof text, "step,attack,n,successes,%s\n50,fixed_source,200,%ld,%s\n", c->column,
                       c->successes, c->text);
    char *path = t_write_tmp("repro_cell.csv", text, (size_t)len);
    rg_asr_curve curve;
    int rc = rg_asr_curve_read(path, &curve);
    if (rc == 0) rg_asr_curve_free(&curve);
    if ((rc == 0) != c->accepted)
      fail_msg("%s = %s for %ld/200: %s (%s)", c->column, c->text, c->successes, rc == 0 ? "accepted" : "refused",
               rc == 0 ? "want refused" : rg_error_get());
    if (rc != 0 && (!strstr(rg_error_get(), "row 1 (step 50, attack fixed_source)") ||
                    !strstr(rg_error_get(), c->column) || !strstr(rg_error_get(), "beyond its printed precision")))
      fail_msg("%s = %s: message '%s'", c->column, c->text, rg_error_get());
    free(path);
  }
}

/* A curve whose asr contradicts successes/n beyond its printed precision is
 * still refused by the CLI, with one line naming the file, the row, the
 * column, both values and the tolerance; so is a cell that is no number. */
static void test_contradicting_rounded_asr_refused(void **state) {
  char *pub = published_path("lan2026_r2d2.csv");
  const char *text = "step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi\n"
                     "50,fixed_source,cls,200,0,0.000,0.0000,0.0188\n"
                     "100,fixed_source,cls,200,7,0.036,0.0171,0.0705\n";
  char *bad = t_write_tmp("repro_rounded_contradiction.csv", text, strlen(text));
  expect_cannot_compare(pub, bad, "",
                        "repro_rounded_contradiction.csv: row 2 (step 100, attack fixed_source): asr = 0.036 "
                        "contradicts successes/n = 7/200 = 0.035 beyond its printed precision (difference 0.001 > "
                        "tolerance 0.0005");
  const char *hex = "step,attack,n,successes,wilson95_lo\n50,fixed_source,200,0,0x0\n";
  char *bad2 = t_write_tmp("repro_hex_cell.csv", hex, strlen(hex));
  expect_cannot_compare(pub, bad2, "", "repro_hex_cell.csv: row 1: wilson95_lo: '0x0' is not a decimal number");
  free(bad2), free(bad), free(pub);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_consistent_curve_reproduces),
      cmocka_unit_test(test_half_asr_at_step_100_fails),
      cmocka_unit_test(test_differing_n_uses_measured),
      cmocka_unit_test(test_errors_are_one_line_exit_2),
      cmocka_unit_test(test_other_attack_on_common_steps),
      cmocka_unit_test(test_rounded_curve_same_verdict),
      cmocka_unit_test(test_rounded_cells),
      cmocka_unit_test(test_contradicting_rounded_asr_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
