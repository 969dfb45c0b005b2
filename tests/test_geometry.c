/* test_geometry: refgeo's float64 geometry measures against numpy/scipy
 * values in tests/fixtures/geometry/geometry_cases.json (written by
 * tools/reference/make_geometry_fixtures.py; see its docstring).
 *
 * Tolerance: 1e-9 absolute everywhere. Both sides compute in float64 with
 * backward-stable LAPACK SVDs, so the values agree to a few hundred ulps
 * (~1e-13 for these O(1..100) quantities); 1e-9 leaves room for different
 * LAPACK builds and summation orders while still catching any formula slip
 * (a wrong normalization or an off-by-one changes results at the 1e-3 level
 * or more). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/auroc.h"
#include "geometry/diff_means.h"
#include "geometry/linalg.h"
#include "geometry/spectrum.h"
#include "geometry/subspace.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

#define TOL 1e-9

static cJSON *g_cases;
static double g_max_err; /* largest error seen, printed at the end */

static int setup(void **state) {
  char *path = t_fixture_path("geometry/geometry_cases.json");
  char *text = rg_read_file(path, NULL);
  if (!text) {
    fprintf(stderr, "%s\n", rg_error_get());
    free(path);
    return -1;
  }
  g_cases = cJSON_Parse(text);
  free(text);
  free(path);
  return g_cases ? 0 : -1;
}

static int teardown(void **state) {
  cJSON_Delete(g_cases);
  printf("max abs error vs numpy/scipy: %.3g\n", g_max_err);
  return 0;
}

static const cJSON *field(const cJSON *obj, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!f) fail_msg("fixture lacks field %s", name);
  return f;
}

/* null (NaN) or a number */
static double number(const cJSON *obj, const char *name) {
  const cJSON *f = field(obj, name);
  return cJSON_IsNull(f) ? NAN : f->valuedouble;
}

static int integer(const cJSON *obj, const char *name) { return field(obj, name)->valueint; }

/* A malloc'd copy of a numeric array field; *n gets its length. */
static double *array(const cJSON *obj, const char *name, int *n) {
  const cJSON *a = field(obj, name);
  int len = cJSON_GetArraySize(a);
  double *v = malloc((size_t)(len > 0 ? len : 1) * sizeof *v);
  assert_non_null(v);
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) v[i++] = cJSON_IsNull(it) ? NAN : it->valuedouble;
  if (n) *n = len;
  return v;
}

static void expect_close(double got, double want, const char *what, const char *name) {
  if (isnan(want)) {
    if (!isnan(got)) fail_msg("%s %s: got %.17g, want NaN", name, what, got);
    return;
  }
  double err = fabs(got - want);
  if (!(err <= TOL)) fail_msg("%s %s: got %.17g, want %.17g (error %.3g)", name, what, got, want, err);
  if (err > g_max_err) g_max_err = err;
}

static void test_spectra(void **state) {
  const cJSON *c;
  cJSON_ArrayForEach(c, field(g_cases, "spectra")) {
    const char *name = field(c, "name")->valuestring;
    int m = integer(c, "rows"), n = integer(c, "cols"), k = 0;
    double *a = array(c, "a", NULL);
    double *want = array(c, "singular_values", &k);
    double *s = malloc((size_t)k * sizeof *s);
    assert_non_null(s);
    assert_int_equal(rg_singular_values(a, m, n, s), 0);
    for (int i = 0; i < k; i++) expect_close(s[i], want[i], "singular value", name);
    rg_spectrum_measures sm;
    assert_int_equal(rg_matrix_spectrum_measures(a, m, n, &sm), 0);
    expect_close(sm.erank_sigma, number(c, "erank_sigma"), "erank_sigma", name);
    expect_close(sm.erank_sigma2, number(c, "erank_sigma2"), "erank_sigma2", name);
    expect_close(sm.participation_ratio, number(c, "participation_ratio"), "participation ratio", name);
    free(a);
    free(want);
    free(s);
  }
}

/* Worked examples of docs/refusal-geometry.md section 10.3 (published to 3
 * decimals there, so compared to half a unit of the last digit). */
static void test_doc_examples(void **state) {
  const double s1[] = {1.0, 0.06}, s2[] = {1.0, 0.25};
  assert_true(fabs(rg_erank_sigma(s1, 2) - 1.243) < 5e-4);
  assert_true(fabs(rg_erank_sigma2(s1, 2) - 1.024) < 5e-4);
  assert_true(fabs(rg_participation_ratio(s1, 2) - 1.007) < 5e-4);
  assert_true(fabs(rg_erank_sigma(s2, 2) - 1.649) < 5e-4);
  assert_true(fabs(rg_erank_sigma2(s2, 2) - 1.251) < 5e-4);
  assert_true(fabs(rg_participation_ratio(s2, 2) - 1.125) < 5e-4);
  /* Zero singular values contribute nothing; an all-zero spectrum is NaN. */
  const double padded[] = {1.0, 0.06, 0.0, 0.0}, zeros[] = {0.0, 0.0};
  assert_true(rg_erank_sigma(padded, 4) == rg_erank_sigma(s1, 2));
  assert_true(isnan(rg_erank_sigma(zeros, 2)) && isnan(rg_participation_ratio(zeros, 2)));
}

static void test_subspace_angles(void **state) {
  const cJSON *c;
  cJSON_ArrayForEach(c, field(g_cases, "angles")) {
    const char *name = field(c, "name")->valuestring;
    int d = integer(c, "d"), ka = integer(c, "ka"), kb = integer(c, "kb"), k = 0;
    double *a = array(c, "a", NULL), *b = array(c, "b", NULL);
    double *want = array(c, "angles", &k);
    double got[16];
    int n = rg_subspace_angles(a, ka, b, kb, d, got);
    if (n != k) fail_msg("%s: %d angles, scipy gives %d (%s)", name, n, k, rg_error_get());
    for (int i = 0; i < k; i++) expect_close(got[i], want[i], "angle", name);
    free(a);
    free(b);
    free(want);
  }
  /* A zero matrix spans nothing: no angles. */
  double zero[6] = {0}, one[3] = {1, 0, 0};
  double out[2];
  assert_int_equal(rg_subspace_angles(zero, 2, one, 1, 3, out), 0);
}

static void test_vector_angles(void **state) {
  const cJSON *c;
  cJSON_ArrayForEach(c, field(g_cases, "vector_pairs")) {
    const char *name = field(c, "name")->valuestring;
    int d = 0;
    double *a = array(c, "a", &d), *b = array(c, "b", NULL);
    expect_close(rg_vec_cos(a, b, d), number(c, "cos"), "cos", name);
    expect_close(rg_vec_angle(a, b, d), number(c, "angle"), "angle", name);
    expect_close(rg_line_angle(a, b, d), number(c, "line_angle"), "line angle", name);
    free(a);
    free(b);
  }
}

static void test_auroc(void **state) {
  const cJSON *c;
  cJSON_ArrayForEach(c, field(g_cases, "auroc")) {
    const char *name = field(c, "name")->valuestring;
    int n1 = 0, n2 = 0;
    double *pos = array(c, "harmful", &n1), *neg = array(c, "harmless", &n2);
    expect_close(rg_auroc(pos, n1, neg, n2), number(c, "auroc"), "auroc", name);
    free(pos);
    free(neg);
  }
  double x = 1.0;
  assert_true(isnan(rg_auroc(&x, 1, &x, 0)));
}

static void test_diff_means(void **state) {
  const cJSON *c = field(g_cases, "diff_means");
  int P = integer(c, "n_pos"), L = integer(c, "n_layers"), d = integer(c, "d_model");
  int n_harmful = 0, n_harmless = 0;
  double *harmful = array(c, "harmful", &n_harmful), *harmless = array(c, "harmless", &n_harmless);
  double *want = array(c, "directions", NULL), *norms = array(c, "norms", NULL);
  size_t per_prompt = (size_t)L * P * d;
  rg_diff_means *dm = rg_diff_means_new(P, L, d);
  assert_non_null(dm);
  float *acts = malloc(per_prompt * sizeof *acts);
  assert_non_null(acts);
  /* The fixture's values are float32 numbers, so the casts are exact. */
  for (int i = 0; i < n_harmful / (int)per_prompt; i++) {
    for (size_t j = 0; j < per_prompt; j++) acts[j] = (float)harmful[i * per_prompt + j];
    assert_int_equal(rg_diff_means_add_prompt(dm, RG_HARMFUL, acts), 0);
  }
  double *r = malloc((size_t)d * sizeof *r);
  assert_non_null(r);
  /* One class only: no direction yet. */
  assert_int_equal(rg_diff_means_direction(dm, 0, 0, r), -1);
  assert_non_null(strstr(rg_error_get(), "no harmless samples"));
  for (int i = 0; i < n_harmless / (int)per_prompt; i++) {
    for (size_t j = 0; j < per_prompt; j++) acts[j] = (float)harmless[i * per_prompt + j];
    assert_int_equal(rg_diff_means_add_prompt(dm, RG_HARMLESS, acts), 0);
  }
  for (int pi = 0; pi < P; pi++)
    for (int l = 0; l < L; l++) {
      assert_int_equal(rg_diff_means_direction(dm, pi, l, r), 0);
      for (int j = 0; j < d; j++) expect_close(r[j], want[((size_t)pi * L + l) * d + j], "direction", "diff_means");
      expect_close(rg_vec_norm(r, d), norms[pi * L + l], "norm", "diff_means");
    }

  /* Carrier matrix (row-normalized eoi directions at one layer). */
  double *C = malloc((size_t)P * d * sizeof *C);
  assert_non_null(C);
  assert_int_equal(rg_diff_means_carrier_matrix(dm, integer(c, "carrier_layer"), C), 0);
  rg_spectrum_measures sm;
  assert_int_equal(rg_matrix_spectrum_measures(C, P, d, &sm), 0);
  expect_close(sm.erank_sigma, number(c, "carrier_erank_sigma"), "carrier erank_sigma", "diff_means");
  expect_close(sm.erank_sigma2, number(c, "carrier_erank_sigma2"), "carrier erank_sigma2", "diff_means");

  /* Per-prompt difference matrix x_i - nu at position -1, carrier layer. */
  int layer = integer(c, "carrier_layer"), k = 0;
  double *want_s = array(c, "prompt_diff_singular_values", &k);
  int n_h = n_harmful / (int)per_prompt;
  double *X = malloc((size_t)n_h * d * sizeof *X), *nu = malloc((size_t)d * sizeof *nu), *s = malloc((size_t)k * sizeof *s);
  assert_true(X && nu && s);
  for (int i = 0; i < n_h; i++)
    for (int j = 0; j < d; j++) X[i * d + j] = (double)(float)harmful[i * per_prompt + ((size_t)layer * P + 1) * d + j];
  assert_int_equal(rg_diff_means_mean(dm, RG_HARMLESS, 1, layer, nu), 0);
  rg_matrix_subtract_row(X, n_h, d, nu);
  assert_int_equal(rg_singular_values(X, n_h, d, s), 0);
  for (int i = 0; i < k; i++) expect_close(s[i], want_s[i], "prompt-diff singular value", "diff_means");

  assert_int_equal(rg_diff_means_add(dm, RG_HARMFUL, P, 0, acts), -1); /* position index out of range */
  assert_null(rg_diff_means_new(0, 1, 1));
  free(X);
  free(nu);
  free(s);
  free(want_s);
  free(C);
  free(r);
  free(acts);
  free(harmful);
  free(harmless);
  free(want);
  free(norms);
  rg_diff_means_free(dm);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spectra),         cmocka_unit_test(test_doc_examples), cmocka_unit_test(test_subspace_angles),
      cmocka_unit_test(test_vector_angles),   cmocka_unit_test(test_auroc),        cmocka_unit_test(test_diff_means),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
