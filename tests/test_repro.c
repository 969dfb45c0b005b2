/* test_repro: `refgeo repro` on synthetic measured curves against the
 * published Lan et al. 2026 numbers (data/published/lan2026_r2d2.csv).
 * Expected verdicts follow from the published values themselves: a curve
 * built from exactly those rates must reproduce, a rate of 0.5 where 0.000
 * was published must not (Wilson 95% for 20/40 is [0.352, 0.648]). */
#include <cjson/cJSON.h>
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
  expect_cannot_compare(pub, bad2, "", "repro_wrong_asr.csv: row 1: asr = 0.5 but successes/n gives 0.035");
  const char *nan_step = "step,attack,n,successes\nfifty,fixed_source,200,7\n";
  char *bad3 = t_write_tmp("repro_bad_step.csv", nan_step, strlen(nan_step));
  expect_cannot_compare(pub, bad3, "", "repro_bad_step.csv: row 1: step is not an integer: 'fifty'");
  const char *pct = "step,attack,asr\n50,fixed_source,3.5\n";
  char *bad4 = t_write_tmp("repro_pct.csv", pct, strlen(pct));
  expect_cannot_compare(bad4, meas, "", "asr 3.5 is not a fraction");
  expect_cannot_compare(pub, "/nonexistent/asr.csv", "", "/nonexistent/asr.csv");
  free(bad), free(bad2), free(bad3), free(bad4), free(other), free(meas), free(pub);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_consistent_curve_reproduces),
      cmocka_unit_test(test_half_asr_at_step_100_fails),
      cmocka_unit_test(test_differing_n_uses_measured),
      cmocka_unit_test(test_errors_are_one_line_exit_2),
      cmocka_unit_test(test_other_attack_on_common_steps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
