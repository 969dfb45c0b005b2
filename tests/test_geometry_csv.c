/* test_geometry_csv: migration rows and the three geometry tables, written
 * and read back through rg_csv_read. Expected values follow directly from
 * the inputs (hand-made candidates, a 30-degree rotation) and the column
 * definitions in docs/csv-formats.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/geometry_csv.h"
#include "geometry/migration.h"
#include "testlib.h"
#include "util/csv_table.h"
#include "util/error.h"

static rg_csv *read_back(const char *path) {
  rg_csv *t = rg_csv_read(path);
  if (!t) fail_msg("%s", rg_error_get());
  return t;
}

static const char *cell(const rg_csv *t, size_t row, const char *col) {
  int c = rg_csv_col(t, col);
  if (c < 0) fail_msg("%s: no column %s", t->path, col);
  return t->rows[row][c];
}

static void test_depth_labels(void **state) {
  rg_depth_thresholds t = rg_depth_thresholds_default();
  assert_string_equal(rg_depth_label(10.0 / 32, &t), "early");
  assert_string_equal(rg_depth_label(6.0 / 18, &t), "middle"); /* exactly 1/3 is not < 1/3 */
  assert_string_equal(rg_depth_label(21.0 / 32, &t), "middle");
  assert_string_equal(rg_depth_label(2.0 / 3, &t), "late"); /* >= 2/3 */
  assert_string_equal(rg_depth_label(NAN, &t), "none");
  t.early_below = 0.5;
  assert_string_equal(rg_depth_label(0.4, &t), "early");
}

static void test_tables(void **state) {
  /* Two steps over a 10-layer model with 2 positions; the cap is layer 8. */
  rg_candidate step0[] = {{-2, 7, -4.0, 1.0, 0.05, NAN}, {-1, 2, -3.0, 1.0, 0.05, NAN}, {-1, 9, -9.0, 1.0, 0.0, NAN}};
  rg_candidate step1[] = {{-2, 7, -1.0, 1.0, 0.5, NAN}, {-1, 2, -3.0, 1.0, 0.05, NAN}, {-1, 9, -9.0, 1.0, 0.0, NAN}};
  rg_selection_rules rules = rg_selection_rules_default();
  rg_selection sel0, sel1;
  assert_int_equal(rg_select(step0, 3, 10, &rules, &sel0), 0);
  assert_int_equal(rg_select(step1, 3, 10, &rules, &sel1), 0);

  /* carriers.csv */
  rg_carrier_row carriers[6];
  rg_carrier_rows_fill(carriers, 0, step0, &sel0);
  rg_carrier_rows_fill(carriers + 3, 50, step1, &sel1);
  char *path = t_tmp_path("carriers.csv");
  assert_int_equal(rg_write_carriers_csv(path, carriers, 6), 0);
  rg_csv *t = read_back(path);
  assert_int_equal(t->n_cols, 14);
  assert_int_equal(t->n_rows, 6);
  /* each filter on its own: the capped candidate passes KL and induce */
  assert_string_equal(cell(t, 2, "pass_layer"), "0");
  assert_string_equal(cell(t, 2, "pass_kl"), "1");
  assert_string_equal(cell(t, 2, "pass_induce"), "1");
  assert_string_equal(cell(t, 2, "pass_finite"), "1");
  assert_string_equal(cell(t, 3, "pass_kl"), "0");
  assert_string_equal(cell(t, 3, "pass_layer"), "1");
  assert_string_equal(cell(t, 0, "rank"), "1");
  assert_string_equal(cell(t, 1, "rank"), "2");
  assert_string_equal(cell(t, 2, "reject_reason"), "layer_cap");
  assert_string_equal(cell(t, 2, "admissible"), "0");
  assert_string_equal(cell(t, 2, "rank"), "");
  assert_string_equal(cell(t, 3, "step"), "50");
  assert_string_equal(cell(t, 3, "reject_reason"), "kl");
  assert_string_equal(cell(t, 4, "rank"), "1");
  assert_true(strtod(cell(t, 3, "kl"), NULL) == 0.5);
  rg_csv_free(t);
  free(path);

  /* migration.csv: step 0's best is (-2, 7); step 50's is (-1, 2). The
   * directions are 30 degrees apart as lines (one is negated). */
  double d0[2] = {1.0, 0.0}, d1[2] = {-cos(M_PI / 6), sin(M_PI / 6)};
  rg_depth_thresholds th = rg_depth_thresholds_default();
  rg_migration_row mig[3];
  rg_migration_row_fill(&mig[0], 0, step0, &sel0, 10, &th, d0, d0, 2);
  rg_migration_row_fill(&mig[1], 50, step1, &sel1, 10, &th, d1, d0, 2);
  rg_selection none = {.n_candidates = 0, .best = -1};
  rg_migration_row_fill(&mig[2], 100, step1, &none, 10, &th, NULL, d0, 2);
  for (int i = 0; i < 3; i++) {
    mig[i].spectrum = (rg_spectrum_measures){1.25, 1.03, 1.01};
    mig[i].matrix = "carrier: row-normalized eoi directions, best layer";
  }
  assert_int_equal(mig[0].best_layer, 7);
  assert_string_equal(mig[0].label, "late"); /* 0.7 >= 2/3 */
  assert_string_equal(mig[1].label, "early"); /* 0.2 < 1/3 */
  assert_true(fabs(mig[0].angle_vs_step0_deg) < 1e-12);
  /* the stable atan2 formula is accurate to a few ulps of the angle */
  assert_true(fabs(mig[1].angle_vs_step0_deg - 30.0) < 1e-12);
  path = t_tmp_path("migration.csv");
  assert_int_equal(rg_write_migration_csv(path, mig, 3), 0);
  t = read_back(path);
  assert_int_equal(t->n_cols, 39);
  assert_string_equal(t->header[13], "matrix");
  assert_string_equal(cell(t, 2, "status"), "");     /* set by the pipeline, not the selection */
  assert_string_equal(cell(t, 2, "layer_lo"), "nan"); /* not measured */
  assert_string_equal(cell(t, 1, "best_layer"), "2");
  assert_string_equal(cell(t, 1, "best_pos"), "-1");
  assert_true(strtod(cell(t, 1, "rel_depth"), NULL) == 0.2);
  assert_string_equal(cell(t, 2, "best_layer"), "");
  assert_string_equal(cell(t, 2, "label"), "none");
  assert_string_equal(cell(t, 2, "angle_vs_step0_deg"), "nan");
  assert_string_equal(cell(t, 2, "n_admissible"), "0");
  assert_string_equal(cell(t, 0, "matrix"), "carrier: row-normalized eoi directions, best layer"); /* quoted */
  rg_csv_free(t);
  free(path);

  /* geometry.csv */
  rg_geometry_row g = {.step = 50,
                       .checkpoint = "run/checkpoint-50",
                       .layer = 5,
                       .pos = -1,
                       .hook = "blocks.5.hook_resid_pre",
                       .n_harmful = 128,
                       .n_harmless = 120,
                       .dir_norm = 3.5,
                       .cos_step0 = NAN,
                       .angle_step0_deg = 0.0,
                       .cos_prev = 0.99,
                       .angle_prev_deg = 8.1,
                       .auroc = 0.97,
                       .spectrum = {40.0, 20.0, 10.0},
                       .matrix = "prompt_diff"};
  path = t_tmp_path("geometry.csv");
  assert_int_equal(rg_write_geometry_csv(path, &g, 1), 0);
  t = read_back(path);
  assert_int_equal(t->n_cols, 18);
  assert_string_equal(t->header[17], "prompts");
  assert_string_equal(cell(t, 0, "hook"), "blocks.5.hook_resid_pre");
  assert_string_equal(cell(t, 0, "n_harmless"), "120");
  assert_string_equal(cell(t, 0, "cos_step0"), "nan");
  assert_true(strtod(cell(t, 0, "participation_ratio"), NULL) == 10.0);
  rg_csv_free(t);
  free(path);

  assert_int_equal(rg_write_geometry_csv("/nonexistent-dir/geometry.csv", &g, 1), -1);
  assert_non_null(strstr(rg_error_get(), "/nonexistent-dir/geometry.csv"));
  rg_selection_free(&sel0);
  rg_selection_free(&sel1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depth_labels),
      cmocka_unit_test(test_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
