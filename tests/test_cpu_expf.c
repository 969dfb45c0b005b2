/* test_cpu_expf: the CPU backend's vectorizable e^x (backend/cpu/cpu_types.h),
 * which the softmax of attention and SiLU (forward and gradient) run on,
 * against libm's double-precision exp as the reference.
 *
 * Bound: 1.2e-7 relative, two float ulps (2^-23 = 1.19e-7) at the worst.
 * The polynomial's own error is about 1e-7 (Cephes) and the reduction adds
 * rounding; glibc's expf, which it replaced, is within one ulp. An error of
 * this size is below the forward fixtures' tolerances by three orders, so
 * a regression to, say, a degree-5 polynomial (about 3e-6) fails here
 * before it blurs those. Every 101st float of the unclamped range is checked,
 * 22 million of them (every 9973rd under the sanitizers, which run it 20x
 * slower). */
#include "testlib.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_types.h"

static float from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static void test_relative_error(void **state) {
  const uint32_t stride = getenv("REFGEO_SANITIZED") ? 9973 : 101;
  /* the floats in [0, 88] and in [-87, -0], as bit patterns, which are in
   * order within each sign */
  const struct {
    uint32_t first, last;
  } ranges[] = {{0x00000000u, 0x42B00000u /* 88 */}, {0x80000000u, 0xC2AE0000u /* -87 */}};
  double worst = 0.0;
  float worst_x = 0.0f;
  long checked = 0;
  for (int r = 0; r < 2; r++)
    for (uint32_t u = ranges[r].first; u <= ranges[r].last; u += stride) {
      const float x = from_bits(u);
      const double ref = exp((double)x), rel = fabs((double)cpu_expf(x) - ref) / ref;
      if (rel > worst) {
        worst = rel;
        worst_x = x;
      }
      checked++;
    }
  print_message("%ld arguments, worst relative error %.3g at x = %.9g\n", checked, worst, worst_x);
  if (worst > 1.2e-7) fail_msg("cpu_expf: relative error %.3g at x = %.9g", worst, worst_x);
}

/* Outside [-87, 88] the argument is clamped (see its comment): finite,
 * positive, and what SiLU and the softmax need at the extremes. */
static void test_clamped_ends(void **state) {
  assert_true(cpu_expf(-1000.0f) > 0.0f && cpu_expf(-1000.0f) < 1e-37f);
  assert_true(isfinite(cpu_expf(1000.0f)) && cpu_expf(1000.0f) > 1e38f);
  assert_true(cpu_expf(0.0f) == 1.0f);
  const float g = -200.0f; /* SiLU of a very negative input is 0 to float precision */
  assert_true(fabsf(g / (1.0f + cpu_expf(-g))) < 1e-35f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relative_error),
      cmocka_unit_test(test_clamped_ends),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
