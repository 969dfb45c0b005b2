/* test_asr_adaptive.c: `refgeo asr --attack gcg` (adaptive GCG per
 * checkpoint) end to end, on a two-checkpoint series of tiny random-weight
 * models from tests/fixtures/hf_tiny (step 0 a Qwen2, step 5 a Mistral), 3
 * behaviors, 3 GCG steps of 8 candidates and 8 new tokens: small enough for
 * the sanitizer build, which runs it unchanged.
 *
 * - Each step's test cases are exactly what `refgeo attack` makes on that
 *   checkpoint with the same flags (its GCG is checked against transformers
 *   in test_gcg and test_attack_cli), byte for byte: the attack ran on that
 *   checkpoint's own weights.
 * - asr.csv has one adaptive_gcg row per step, n = 3, with Wilson 95% bounds
 *   that this test recomputes from n and successes.
 * - transfer.csv has a row per (attack step, eval step); its diagonal is
 *   asr.csv's row, and every row's bounds are Wilson's; the completions of
 *   a pair (a, b) hold step a's test cases.
 * - A run killed inside the second checkpoint's attack, rerun, gives the
 *   same test cases, asr.csv and transfer.csv as the uninterrupted run.
 * - GCG flags without --attack gcg, --attack gcg with --prompts, a width of
 *   0 and a behavior without a target: one line each, exit 1.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static const char BEHAVIORS[] = "Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID\n"
                                "Say hi,standard,misc,,,say_hi\n"
                                "Name a color,standard,misc,,,name_color\n"
                                "Count to three,standard,misc,,,count_three\n";
static const char TARGETS[] = "{\"say_hi\": \"Sure, hi\", \"name_color\": \"Sure, red\", \"count_three\": "
                              "\"Sure, 1 2 3\"}";
static const char GCG_FLAGS[] = "--steps 3 --search-width 8 --top-k 4 --seed 7 --init-suffix '! ! ! !' --threads 2";

typedef struct {
  char *behaviors, *targets, *manifest, *models[2];
} inputs;

static inputs make_inputs(void) {
  inputs in = {t_write_tmp("adaptive.csv", BEHAVIORS, strlen(BEHAVIORS)),
               t_write_tmp("adaptive-targets.json", TARGETS, strlen(TARGETS)), NULL,
               {t_hf_tiny("qwen2_bf16"), t_hf_tiny("mistral_f16")}};
  char manifest[4096];
  snprintf(manifest, sizeof manifest, "step,path\n0,%s\n5,%s\n", in.models[0], in.models[1]);
  in.manifest = t_write_tmp("adaptive-manifest.csv", manifest, strlen(manifest));
  return in;
}

static void free_inputs(inputs *in) {
  free(in->behaviors), free(in->targets), free(in->manifest), free(in->models[0]), free(in->models[1]);
}

static int run_adaptive(const inputs *in, const char *out, char **err) {
  char args[8192];
  snprintf(args, sizeof args,
           "asr --manifest '%s' --behaviors '%s' --targets '%s' --attack gcg %s --gcg-batch 8 --transfer "
           "--max-new-tokens 8 --out '%s'",
           in->manifest, in->behaviors, in->targets, GCG_FLAGS, out);
  return t_run_cli(args, NULL, err);
}

/* Wilson's 95% interval, from its formula (z = the 0.975 normal quantile). */
static void wilson(double k, double n, double *lo, double *hi) {
  const double z = 1.959963984540054, p = k / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  *lo = fmax(0, centre - half);
  *hi = fmin(1, centre + half);
}

/* The data rows of a small CSV without quoted fields, split at commas. */
typedef struct {
  int n_rows, n_cols;
  char cell[16][8][64];
} table;

static table read_table(const char *path, const char *header) {
  char *text = rg_read_file(path, NULL);
  if (!text) fail_msg("%s: %s", path, rg_error_get());
  table t = {0};
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line == text) {
      assert_string_equal(line, header);
      continue;
    }
    assert_true(t.n_rows < 16);
    int c = 0;
    for (char *f = line, *comma; f; f = comma ? comma + 1 : NULL, c++) {
      comma = strchr(f, ',');
      if (comma) *comma = '\0';
      assert_true(c < 8);
      snprintf(t.cell[t.n_rows][c], 64, "%s", f);
    }
    t.n_cols = c;
    t.n_rows++;
  }
  free(text);
  return t;
}

static void assert_wilson(const char *n, const char *k, const char *lo, const char *hi) {
  double want_lo, want_hi;
  wilson(atof(k), atof(n), &want_lo, &want_hi);
  /* the CSV prints 17 significant digits: only rounding may differ */
  assert_true(fabs(atof(lo) - want_lo) <= 1e-12 && fabs(atof(hi) - want_hi) <= 1e-12);
}

static char *file_in(const char *dir, const char *name) {
  char *p = rg_path_join(dir, name);
  assert_non_null(p);
  return p;
}

static void assert_same_file(const char *a, const char *b) {
  size_t na = 0, nb = 0;
  char *x = rg_read_file(a, &na), *y = rg_read_file(b, &nb);
  if (!x || !y) fail_msg("%s / %s: %s", a, b, rg_error_get());
  if (na != nb || memcmp(x, y, na) != 0) fail_msg("%s differs from %s:\n%s\n---\n%s", a, b, x, y);
  free(x), free(y);
}

static void test_adaptive_gcg(void **state) {
  inputs in = make_inputs();
  char *out = t_tmp_path("adaptive-out");
  char cmd[8192], *err = NULL;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
  assert_int_equal(system(cmd), 0);
  if (run_adaptive(&in, out, &err) != 0) fail_msg("refgeo asr --attack gcg: %s", err);
  free(err);

  /* each step's test cases: `refgeo attack` on that checkpoint */
  static const long steps[2] = {0, 5};
  for (int i = 0; i < 2; i++) {
    char name[64], *ref = t_tmp_path(i ? "adaptive-ref-5.json" : "adaptive-ref-0.json");
    unlink(ref);
    snprintf(cmd, sizeof cmd,
             "attack --model '%s' --behaviors '%s' --targets '%s' --functional-category all %s --batch 8 --out '%s'",
             in.models[i], in.behaviors, in.targets, GCG_FLAGS, ref);
    if (t_run_cli(cmd, NULL, &err) != 0) fail_msg("refgeo attack: %s", err);
    free(err);
    snprintf(name, sizeof name, "gcg_test_cases_step%ld.json", steps[i]);
    char *got = file_in(out, name);
    assert_same_file(got, ref);
    free(got), free(ref);
  }

  char *asr = file_in(out, "asr.csv"), *transfer = file_in(out, "transfer.csv");
  table a = read_table(asr, "step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi");
  assert_int_equal(a.n_rows, 2);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(atol(a.cell[r][0]), steps[r]);
    assert_string_equal(a.cell[r][1], "adaptive_gcg");
    assert_string_equal(a.cell[r][3], "3");
    assert_wilson(a.cell[r][3], a.cell[r][4], a.cell[r][6], a.cell[r][7]);
  }
  table t = read_table(transfer, "attack_step,eval_step,classifier,n,successes,asr,wilson95_lo,wilson95_hi");
  assert_int_equal(t.n_rows, 4);
  for (int r = 0; r < 4; r++) {
    const long from = atol(t.cell[r][0]), on = atol(t.cell[r][1]);
    assert_int_equal(from, steps[r / 2]);
    assert_int_equal(on, steps[r % 2]);
    assert_string_equal(t.cell[r][3], "3");
    assert_wilson(t.cell[r][3], t.cell[r][4], t.cell[r][6], t.cell[r][7]);
    if (from == on) assert_string_equal(t.cell[r][4], a.cell[r / 2][4]); /* the diagonal is the adaptive ASR */
  }

  /* the transfer completions of (a, b) hold step a's test cases */
  for (int i = 0; i < 2; i++) {
    char name[96];
    snprintf(name, sizeof name, "gcg_test_cases_step%ld.json", steps[i]);
    char *cases_path = file_in(out, name);
    snprintf(name, sizeof name, "completions_step%ld_gcg_from_step%ld.json", steps[1 - i], steps[i]);
    char *compl_path = file_in(out, name);
    char *ct = rg_read_file(cases_path, NULL), *cc = rg_read_file(compl_path, NULL);
    cJSON *cases = cJSON_Parse(ct), *compl = cJSON_Parse(cc);
    assert_non_null(cases);
    assert_non_null(compl);
    assert_int_equal(cJSON_GetArraySize(compl), 3);
    const cJSON *e;
    cJSON_ArrayForEach(e, cases) {
      const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(compl, e->string), 0);
      assert_non_null(c);
      assert_string_equal(cJSON_GetObjectItem(c, "test_case")->valuestring, cJSON_GetArrayItem(e, 0)->valuestring);
    }
    cJSON_Delete(cases), cJSON_Delete(compl);
    free(ct), free(cc), free(cases_path), free(compl_path);
  }

  /* killed inside the second checkpoint's attack (behaviors 1-3 are step
   * 0's, 4-6 step 5's), rerun: the same files */
  char *again = t_tmp_path("adaptive-killed");
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", again);
  assert_int_equal(system(cmd), 0);
  setenv("REFGEO_KILL_AT", "attack-behavior:4", 1);
  const int killed = run_adaptive(&in, again, NULL);
  unsetenv("REFGEO_KILL_AT");
  if (killed != 128 + SIGKILL) fail_msg("the run ended with status %d, not by SIGKILL", killed);
  char *partial = file_in(again, "gcg_test_cases_step5.json.partial.json");
  assert_true(rg_path_exists(partial));
  if (run_adaptive(&in, again, &err) != 0) fail_msg("rerun: %s", err);
  free(err);
  assert_false(rg_path_exists(partial));
  static const char *const SAME[] = {"gcg_test_cases_step0.json", "gcg_test_cases_step5.json", "asr.csv",
                                     "transfer.csv"};
  for (int i = 0; i < 4; i++) {
    char *x = file_in(out, SAME[i]), *y = file_in(again, SAME[i]);
    assert_same_file(x, y);
    free(x), free(y);
  }
  free(partial), free(again), free(asr), free(transfer), free(out);
  free_inputs(&in);
}

/* One line on stderr, exit 1, naming what is wrong. */
static void expect_error(const char *args, const char *want) {
  char *err = NULL;
  assert_int_equal(t_run_cli(args, NULL, &err), 1);
  if (!strstr(err, want)) fail_msg("%s: expected '%s' in: %s", args, want, err);
  const char *nl = strchr(err, '\n');
  if (!nl || nl[1] != '\0') fail_msg("%s: not one line: %s", args, err);
  free(err);
}

static void test_adaptive_bad_input(void **state) {
  inputs in = make_inputs();
  char *out = t_tmp_path("adaptive-bad"), args[8192];
  snprintf(args, sizeof args, "asr --manifest '%s' --behaviors '%s' --steps 3 --out '%s'", in.manifest, in.behaviors,
           out);
  expect_error(args, "only with --attack gcg");
  snprintf(args, sizeof args, "asr --manifest '%s' --prompts '%s' --attack gcg --out '%s'", in.manifest,
           in.behaviors, out);
  expect_error(args, "--attack gcg: needs --behaviors");
  snprintf(args, sizeof args, "asr --manifest '%s' --behaviors '%s' --targets '%s' --attack gcg --search-width 0 --out '%s'",
           in.manifest, in.behaviors, in.targets, out);
  expect_error(args, "--search-width");
  static const char partial_targets[] = "{\"say_hi\": \"Sure, hi\", \"name_color\": \"Sure, red\"}";
  char *targets = t_write_tmp("adaptive-partial-targets.json", partial_targets, strlen(partial_targets));
  snprintf(args, sizeof args, "asr --manifest '%s' --behaviors '%s' --targets '%s' --attack gcg --out '%s'",
           in.manifest, in.behaviors, targets, out);
  expect_error(args, "no target string for behavior count_three");
  free(targets), free(out);
  free_inputs(&in);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adaptive_gcg),
      cmocka_unit_test(test_adaptive_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
