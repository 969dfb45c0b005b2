/* test_harmbench_stats: Wilson intervals and the exact binomial test against
 * Python (Wilson formula in float64, scipy.stats.binomtest). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "harmbench/asr_stats.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

/* Both sides evaluate the same closed form in float64 (Wilson) or sum <= 401
 * probabilities in [0, 1] whose relative rounding is ~1e-13 (binomial), so
 * 1e-12 absolute leaves a margin of 10x over the rounding yet catches any
 * formula or tie-rule difference (those move results by >= 1e-9). */
#define TOL 1e-12

static void test_against_python(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/stats.json");
  assert_true(cJSON_GetObjectItem(fx, "z")->valuedouble == RG_Z95);
  const cJSON *e;
  double max_w = 0, max_b = 0;
  int n_w = 0, n_b = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "wilson")) {
    long k = (long)cJSON_GetObjectItem(e, "k")->valuedouble, n = (long)cJSON_GetObjectItem(e, "n")->valuedouble;
    double lo, hi;
    assert_int_equal(rg_wilson_interval(k, n, RG_Z95, &lo, &hi), 0);
    max_w = fmax(max_w, fabs(lo - cJSON_GetObjectItem(e, "lo")->valuedouble));
    max_w = fmax(max_w, fabs(hi - cJSON_GetObjectItem(e, "hi")->valuedouble));
    n_w++;
  }
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "binomtest")) {
    long k = (long)cJSON_GetObjectItem(e, "k")->valuedouble, n = (long)cJSON_GetObjectItem(e, "n")->valuedouble;
    double p = cJSON_GetObjectItem(e, "p")->valuedouble;
    double got = rg_binom_test_two_sided(k, n, p), want = cJSON_GetObjectItem(e, "pvalue")->valuedouble;
    if (fabs(got - want) > TOL) fail_msg("binomtest(%ld, %ld, %g): %.17g, scipy %.17g", k, n, p, got, want);
    max_b = fmax(max_b, fabs(got - want));
    n_b++;
  }
  print_message("wilson: %d cases, max abs err %.3g; binomtest: %d cases, max abs err %.3g\n", n_w, max_w, n_b,
                max_b);
  assert_true(max_w <= TOL);
  assert_true(n_w > 50 && n_b > 200);
  cJSON_Delete(fx);
}

static void test_bad_arguments(void **state) {
  double lo, hi;
  assert_int_equal(rg_wilson_interval(1, 0, RG_Z95, &lo, &hi), -1);
  assert_int_equal(rg_wilson_interval(5, 4, RG_Z95, &lo, &hi), -1);
  assert_true(rg_binom_test_two_sided(-1, 4, 0.5) < 0);
  assert_true(rg_binom_test_two_sided(1, 4, 1.5) < 0);
  assert_true(rg_binom_test_two_sided(1, 4, NAN) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_python),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
