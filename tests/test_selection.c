/* test_selection: carrier selection against refusal_direction's published
 * runs. For each reference model the fixture IS the upstream data in
 * $REFGEO_DATA/refusal_direction/reference_runs/<model>/: rg_select on
 * direction_evaluations.json must reproduce direction_metadata.json (the
 * chosen pos, layer) and direction_evaluations_filtered.json (the survivors,
 * in order) exactly. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/selection.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

typedef struct {
  const char *model;
  int n_layers;    /* from docs/refusal-geometry.md section 4 */
  int n_survivors; /* section 6.4 */
} reference_run;

static const reference_run RUNS[] = {
    {"gemma-2b-it", 18, 13},        {"llama-2-7b-chat-hf", 32, 5}, {"meta-llama-3-8b-instruct", 32, 25},
    {"qwen-1_8b-chat", 24, 12},     {"yi-6b-chat", 32, 7},
};

static char *run_file(const char *model, const char *name) {
  char buf[512];
  snprintf(buf, sizeof buf, "refusal_direction/reference_runs/%s/%s", model, name);
  return t_data_path(buf);
}

static rg_candidate *read_candidates(const char *model, const char *name, int *n) {
  char *path = run_file(model, name);
  rg_candidate *c = rg_candidates_read_json(path, n);
  if (!c) fail_msg("%s", rg_error_get());
  free(path);
  return c;
}

static void check_run(const reference_run *run) {
  int n = 0, n_filtered = 0;
  rg_candidate *c = read_candidates(run->model, "direction_evaluations.json", &n);
  rg_candidate *filtered = read_candidates(run->model, "direction_evaluations_filtered.json", &n_filtered);

  /* L is not stored upstream: max layer + 1 of the full candidate grid. */
  int n_layers = 0;
  for (int i = 0; i < n; i++)
    if (c[i].layer + 1 > n_layers) n_layers = c[i].layer + 1;
  assert_int_equal(n_layers, run->n_layers);

  rg_selection_rules rules = rg_selection_rules_default();
  rg_selection sel;
  assert_int_equal(rg_select(c, n, n_layers, &rules, &sel), 0);
  assert_int_equal(sel.n_admissible, run->n_survivors);
  assert_int_equal(sel.n_admissible, n_filtered);
  for (int r = 0; r < n_filtered; r++) {
    const rg_candidate *got = &c[sel.order[r]];
    if (got->pos != filtered[r].pos || got->layer != filtered[r].layer)
      fail_msg("%s: survivor %d is (%d, %d), upstream (%d, %d)", run->model, r, got->pos, got->layer, filtered[r].pos,
               filtered[r].layer);
    /* Same JSON numbers parsed the same way: the scores must be identical. */
    assert_true(got->bypass == filtered[r].bypass);
  }

  char *meta_path = run_file(run->model, "direction_metadata.json");
  char *meta_text = rg_read_file(meta_path, NULL);
  assert_non_null(meta_text);
  cJSON *meta = cJSON_Parse(meta_text);
  assert_non_null(meta);
  assert_true(sel.best >= 0);
  assert_int_equal(c[sel.best].pos, cJSON_GetObjectItem(meta, "pos")->valueint);
  assert_int_equal(c[sel.best].layer, cJSON_GetObjectItem(meta, "layer")->valueint);
  printf("%s: L=%d, %d candidates, %d admissible, best (%d, %d) bypass %.4f\n", run->model, n_layers, n,
         sel.n_admissible, c[sel.best].pos, c[sel.best].layer, c[sel.best].bypass);

  cJSON_Delete(meta);
  free(meta_text);
  free(meta_path);
  rg_selection_free(&sel);
  free(c);
  free(filtered);
}

static void test_reference_runs(void **state) {
  for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++) check_run(&RUNS[i]);
}

/* Each rule on its own, with hand-made candidates whose verdicts follow
 * directly from the thresholds' documented inclusive/exclusive sides. */
static void test_rules_and_reasons(void **state) {
  rg_candidate c[] = {
      {-1, 0, -1.0, 0.5, 0.1, NAN},   /* KL == kl_max: kept (KL <= 0.1) */
      {-1, 1, -2.0, 0.0, 0.05, NAN},  /* induce == 0: kept (induce >= 0) */
      {-1, 7, -9.0, 1.0, 0.0, NAN},   /* layer 7 >= floor(0.8 * 9) = 7: capped */
      {-1, 2, -5.0, 1.0, 0.11, NAN},  /* KL too large */
      {-1, 3, -5.0, -0.01, 0.0, NAN}, /* induce too small */
      {-1, 4, NAN, 1.0, 0.0, NAN},    /* non-finite */
      {-2, 5, -1.0, 1.0, 0.0, NAN},   /* ties with candidate 0 on bypass; pos -2 comes first in RD's loop */
      {-1, 6, INFINITY, 1.0, 0.0, NAN},
  };
  int n = (int)(sizeof c / sizeof c[0]);
  rg_selection_rules rules = rg_selection_rules_default();
  rg_selection sel;
  assert_int_equal(rg_select(c, n, 9, &rules, &sel), 0);
  assert_int_equal(sel.layer_limit, 7);
  const rg_reject_reason want[] = {RG_REJECT_NONE, RG_REJECT_NONE, RG_REJECT_LAYER, RG_REJECT_KL, RG_REJECT_INDUCE,
                                   RG_REJECT_NONFINITE, RG_REJECT_NONE, RG_REJECT_NONFINITE};
  for (int i = 0; i < n; i++) assert_int_equal(sel.reason[i], want[i]);
  assert_int_equal(sel.n_admissible, 3);
  assert_int_equal(sel.order[0], 1);
  assert_int_equal(sel.order[1], 6);
  assert_int_equal(sel.order[2], 0);
  assert_int_equal(sel.best, 1);
  assert_string_equal(rg_reject_reason_name(sel.reason[2]), "layer_cap");
  /* Every filter on its own (carriers.csv's pass_* columns): a NaN fails
   * every comparison it enters, a finite score only its own thresholds. */
  const unsigned want_fails[] = {0, 0, RG_FAIL_LAYER, RG_FAIL_KL, RG_FAIL_INDUCE, RG_FAIL_NONFINITE, 0,
                                 RG_FAIL_NONFINITE};
  for (int i = 0; i < n; i++) assert_int_equal(sel.fails[i], want_fails[i]);
  rg_selection_free(&sel);

  /* The normalized induce rule: gap share (induce - base_l) / (base_h -
   * base_l) >= 0.5 with base_h 3, base_l -5: induce 0.5 gives 0.6875, -1.5
   * gives 0.4375 (rejected), and a zero gap gives NaN (not finite). */
  rg_candidate g[] = {{-1, 0, -1.0, 0.5, 0.0, rg_induce_normalized(0.5, 3, -5)},
                      {-1, 1, -2.0, -1.5, 0.0, rg_induce_normalized(-1.5, 3, -5)},
                      {-1, 2, -3.0, 9.0, 0.0, rg_induce_normalized(9.0, 3, 3)}};
  assert_true(fabs(g[0].induce_norm - 0.6875) < 1e-15);
  assert_true(fabs(g[1].induce_norm - 0.4375) < 1e-15);
  assert_true(isnan(g[2].induce_norm));
  rg_selection_rules norm = rg_selection_rules_default();
  norm.induce_rule = RG_INDUCE_NORMALIZED;
  assert_int_equal(rg_select(g, 3, 9, &norm, &sel), 0);
  assert_int_equal(sel.fails[0], 0);
  assert_int_equal(sel.fails[1], RG_FAIL_INDUCE);
  assert_int_equal(sel.fails[2], RG_FAIL_NONFINITE | RG_FAIL_INDUCE);
  assert_int_equal(sel.best, 0);
  rg_selection_free(&sel);

  /* Without the cap, layer 7's much lower bypass wins. */
  rules.layer_cap = false;
  assert_int_equal(rg_select(c, n, 9, &rules, &sel), 0);
  assert_int_equal(sel.best, 2);
  rg_selection_free(&sel);

  /* Nothing admissible is not an error. */
  rules.kl_max = -1.0;
  assert_int_equal(rg_select(c, n, 9, &rules, &sel), 0);
  assert_int_equal(sel.n_admissible, 0);
  assert_int_equal(sel.best, -1);
  rg_selection_free(&sel);

  /* A layer outside the model is bad input. */
  assert_int_equal(rg_select(c, n, 5, &rules, &sel), -1);
  assert_non_null(strstr(rg_error_get(), "layer 7"));
}

static void test_bad_json(void **state) {
  int n = -1;
  const char text[] = "[{\"position\": -1, \"layer\": \"x\", \"refusal_score\": 1, \"steering_score\": 1, \"kl_div_score\": 0}]";
  char *path = t_write_tmp("selection-bad.json", text, sizeof text - 1);
  assert_null(rg_candidates_read_json(path, &n));
  assert_non_null(strstr(rg_error_get(), path));
  free(path);
  const char notjson[] = "{\"position\": ";
  path = t_write_tmp("selection-bad2.json", notjson, sizeof notjson - 1);
  assert_null(rg_candidates_read_json(path, &n));
  assert_non_null(strstr(rg_error_get(), "not valid JSON at byte 12")); /* cut short: its last byte */
  free(path);
  const char object[] = "{\"position\": -1}";
  path = t_write_tmp("selection-bad3.json", object, sizeof object - 1);
  assert_null(rg_candidates_read_json(path, &n));
  assert_non_null(strstr(rg_error_get(), "expected a JSON array"));
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_runs),
      cmocka_unit_test(test_rules_and_reasons),
      cmocka_unit_test(test_bad_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
