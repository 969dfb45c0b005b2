/* test_islands_outer: the outer step of training across islands and the
 * encodings of what islands exchange (src/adv_ft/islands_outer.h,
 * islands_quant.h), against tools/reference/make_islands_fixtures.py.
 *
 *  - Nesterov SGD (lr 0.7, momentum 0.9) and plain momentum, 5 steps, as
 *    the coordinator makes them (rg_outer_update, then rg_outer_apply),
 *    against torch.optim.SGD on float32: within 1e-6 in the relative L2
 *    norm, and each element within 1e-6 of max(|theta|, 1). Both compute
 *    in float32; they may differ in fused multiply-adds and in theta +
 *    (-lr) g (torch, one rounding) versus theta - (lr g) (here: the update
 *    is rounded on its own, because it is what the islands are sent), a
 *    few float32 ulps (1.2e-7 at 1) of updates of size ~1 over 5 steps. A
 *    buffer started at zero instead of b_1 = g_1 is off by 0.9 g_1 * 0.7
 *    at step 1, far above both.
 *  - The weighted mean of 3 pseudo-gradients against numpy's (float64,
 *    rounded once): equal to within one float32 ulp, both sum in double
 *    (1e-7 relative).
 *  - int8 and int4 with blocks of 32 and 7: decoded values equal numpy's
 *    (the same float32 operations, round half to even; numpy keeps the
 *    sign of a zero code, -0 == 0 here), every
 *    element within s/2 of its input (plus 1e-6 s for the rounding of x / s),
 *    and the byte counts the fixture's formula gives; bf16 equal to torch's
 *    float32 -> bfloat16 -> float32 bit for bit; f32 exact.
 *  - A non-finite input is refused with one line naming its index.
 *  - Edges: a float rounding to an infinite bf16 refused; a block of
 *    subnormal scale sent as zeros (the documented bound).
 *  - No fused multiply-adds: the update and the merge equal the same
 *    operations rounded one by one, bit for bit.
 */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/islands_outer.h"
#include "adv_ft/islands_quant.h"
#include "testlib.h"
#include "util/error.h"

static float *farr(const cJSON *a, int *n) {
  *n = cJSON_GetArraySize(a);
  float *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
  for (int i = 0; i < *n; i++) v[i] = (float)cJSON_GetArrayItem(a, i)->valuedouble;
  return v;
}

static void check_sgd(const cJSON *fx, const char *key, bool nesterov) {
  int n, m;
  float *theta = farr(cJSON_GetObjectItem(fx, "theta0"), &n);
  float *b = calloc((size_t)n, sizeof *b), *u = calloc((size_t)n, sizeof *u);
  const rg_outer_hparams h = {.lr = cJSON_GetObjectItem(fx, "lr")->valuedouble,
                              .momentum = cJSON_GetObjectItem(fx, "momentum")->valuedouble,
                              .nesterov = nesterov};
  const cJSON *grads = cJSON_GetObjectItem(fx, "grads"), *want = cJSON_GetObjectItem(fx, key);
  double worst = 0, worst_l2 = 0;
  for (int t = 0; t < cJSON_GetArraySize(grads); t++) {
    float *g = farr(cJSON_GetArrayItem(grads, t), &m), *ref = farr(cJSON_GetArrayItem(want, t), &m);
    assert_int_equal(m, n);
    rg_outer_update(&h, u, g, b, t == 0, (size_t)n);
    rg_outer_apply(theta, u, (size_t)n);
    double d2 = 0, r2 = 0;
    for (int i = 0; i < n; i++) {
      const double d = (double)theta[i] - ref[i];
      worst = fmax(worst, fabs(d) / fmax(fabs(ref[i]), 1.0));
      d2 += d * d, r2 += (double)ref[i] * ref[i];
    }
    worst_l2 = fmax(worst_l2, sqrt(d2 / r2));
    free(g), free(ref);
  }
  print_message("outer SGD %s: relative L2 error %.3g, worst element %.3g of max(|theta|, 1), against torch\n", key,
                worst_l2, worst);
  assert_true(worst_l2 <= 1e-6);
  assert_true(worst <= 1e-6);
  free(theta), free(b), free(u);
}

static void test_outer_sgd(void **state) {
  (void)state;
  cJSON *fx = t_read_json_fixture("islands/outer.json");
  check_sgd(fx, "nesterov", true);
  check_sgd(fx, "plain", false);
  cJSON_Delete(fx);
}

static void test_merge(void **state) {
  (void)state;
  cJSON *fx = t_read_json_fixture("islands/outer.json");
  const cJSON *ds = cJSON_GetObjectItem(fx, "deltas"), *ws = cJSON_GetObjectItem(fx, "weights");
  const int k = cJSON_GetArraySize(ds);
  float *d[3];
  double w[3];
  int n = 0;
  for (int j = 0; j < k; j++) d[j] = farr(cJSON_GetArrayItem(ds, j), &n), w[j] = cJSON_GetArrayItem(ws, j)->valuedouble;
  int m;
  float *want = farr(cJSON_GetObjectItem(fx, "mean"), &m), *mean = calloc((size_t)n, sizeof *mean);
  double *acc = calloc((size_t)n, sizeof *acc);
  rg_outer_merge(mean, (const float *const *)d, w, k, (size_t)n);
  for (int i = 0; i < n; i++) assert_true(fabs(mean[i] - want[i]) <= 1.2e-7 * fabs(want[i]) + 1e-12);
  for (int j = 0; j < k; j++) rg_outer_accumulate(acc, d[j], w[j], (size_t)n);
  rg_outer_mean(mean, acc, w[0] + w[1] + w[2], (size_t)n);
  for (int i = 0; i < n; i++) assert_true(fabs(mean[i] - want[i]) <= 1.2e-7 * fabs(want[i]) + 1e-12);
  for (int j = 0; j < k; j++) free(d[j]);
  free(want), free(mean), free(acc);
  cJSON_Delete(fx);
}

static void round_trip(rg_quant q, int block, const float *x, int n, float *y, size_t *bytes) {
  *bytes = rg_quant_bytes(q, (size_t)n, block);
  unsigned char *buf = malloc(*bytes + 1);
  assert_int_equal(rg_quant_encode(q, block, x, (size_t)n, buf), 0);
  rg_quant_decode(q, block, buf, (size_t)n, y);
  free(buf);
}

static void test_quant(void **state) {
  (void)state;
  cJSON *fx = t_read_json_fixture("islands/quant.json");
  int n, m;
  float *x = farr(cJSON_GetObjectItem(fx, "x"), &n), *y = malloc((size_t)n * sizeof *y);
  size_t bytes;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "cases")) {
    const int block = cJSON_GetObjectItem(c, "block")->valueint;
    for (int k = 0; k < 2; k++) {
      const char *name = k ? "int4" : "int8";
      char key[32];
      snprintf(key, sizeof key, "%s_bytes", name);
      const float levels = k ? 7.0f : 127.0f;
      float *want = farr(cJSON_GetObjectItem(c, name), &m);
      round_trip(k ? RG_QUANT_INT4 : RG_QUANT_INT8, block, x, n, y, &bytes);
      assert_int_equal(bytes, cJSON_GetObjectItem(c, key)->valueint);
      double worst = 0;
      for (int at = 0; at < n; at += block) {
        float amax = 0;
        for (int i = at; i < n && i < at + block; i++) amax = fmaxf(amax, fabsf(x[i]));
        const double s = amax / levels;
        for (int i = at; i < n && i < at + block; i++) {
          assert_true(fabs((double)x[i] - y[i]) <= s / 2 * (1 + 1e-6));
          if (s > 0) worst = fmax(worst, fabs((double)x[i] - y[i]) / s);
          if (y[i] != want[i]) fail_msg("%s block %d element %d: %.9g, numpy %.9g", name, block, i, y[i], want[i]);
        }
      }
      print_message("%s, blocks of %d: %zu bytes for %d floats, worst error %.4f of a scale step\n", name, block, bytes, n, worst);
      free(want);
    }
  }
  float *bf = farr(cJSON_GetObjectItem(fx, "bf16"), &m);
  round_trip(RG_QUANT_BF16, 1, x, n, y, &bytes);
  assert_int_equal(bytes, cJSON_GetObjectItem(fx, "bf16_bytes")->valueint);
  assert_memory_equal(y, bf, (size_t)n * sizeof *y);
  round_trip(RG_QUANT_F32, 1, x, n, y, &bytes);
  assert_int_equal(bytes, cJSON_GetObjectItem(fx, "f32_bytes")->valueint);
  assert_memory_equal(y, x, (size_t)n * sizeof *y);
  x[5] = NAN;
  unsigned char buf[4096];
  assert_int_equal(rg_quant_encode(RG_QUANT_INT8, 32, x, (size_t)n, buf), -1);
  assert_non_null(strstr(rg_error_get(), "element 5"));
  free(x), free(y), free(bf);
  cJSON_Delete(fx);
}

/* Every float operation of the outer step and the merge rounds on its own,
 * whatever the compiler or CPU: a coordinator restarted or replayed from
 * another build (ASan, REFGEO_NATIVE=OFF, another CPU) must make the same
 * bits. Here each product is stored through a volatile, so rounded before
 * the add; a build that contracts mu * b + g or acc + w * d into a fused
 * multiply-add (-march=native with FMA) differs in some of 4096 random
 * elements (each fused result differs from the two-rounding one in about
 * a third of random cases). Exact equality: the same operations. */
static void test_no_contraction(void **state) {
  (void)state;
  enum { M = 4096 };
  float *g = malloc(M * sizeof *g), *b = malloc(M * sizeof *b), *b0 = malloc(M * sizeof *b0), *u = malloc(M * sizeof *u);
  double *acc = malloc(M * sizeof *acc), *want_acc = malloc(M * sizeof *want_acc);
  uint64_t x = 46;
  for (int i = 0; i < M; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    g[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b0[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 3.0f;
    acc[i] = want_acc[i] = b0[i] / 7.0;
  }
  for (int nesterov = 0; nesterov <= 1; nesterov++) {
    const rg_outer_hparams h = {.lr = 0.7, .momentum = 0.9, .nesterov = nesterov};
    memcpy(b, b0, M * sizeof *b);
    rg_outer_update(&h, u, g, b, false, M);
    const float mu = 0.9f, lr = 0.7f;
    for (int i = 0; i < M; i++) {
      volatile float p = mu * b0[i];
      const float bi = p + g[i];
      volatile float q = mu * bi;
      const float step = nesterov ? g[i] + q : bi;
      const float want = lr * step;
      if (b[i] != bi || u[i] != want)
        fail_msg("nesterov %d, element %d: b %.9g u %.9g, rounded one by one %.9g %.9g", nesterov, i, b[i], u[i], bi, want);
    }
  }
  const double w = 0.37;
  rg_outer_accumulate(acc, g, w, M);
  for (int i = 0; i < M; i++) {
    volatile double p = w * (double)g[i];
    want_acc[i] += p;
    if (acc[i] != want_acc[i]) fail_msg("accumulate, element %d: %.17g, rounded one by one %.17g", i, acc[i], want_acc[i]);
  }
  free(g), free(b), free(b0), free(u), free(acc), free(want_acc);
}

/* Values at the edges of float32: a finite float that rounds to an
 * infinite bfloat16 (|x| >= 3.39618e38, half way between bf16's largest
 * finite 3.3895e38 and the next power of 2) is refused, like a non-finite
 * input; a block whose absmax / levels would be subnormal is sent as zeros
 * (scale 0: a subnormal scale keeps too few bits for |x - x'| <= s/2), so
 * each decoded value is 0 and |x - x'| <= absmax < levels * FLT_MIN; a
 * block of normal scale keeps its bound (s/2 plus 1e-6 s, test_quant). */
static void test_quant_edges(void **state) {
  (void)state;
  uint8_t buf[64];
  const float big[2] = {3.3961e38f, 3.3962e38f}; /* either side of the midpoint, 0x7f7f8000 */
  assert_int_equal(rg_quant_encode(RG_QUANT_BF16, 1, big, 1, buf), 0);
  assert_int_equal(rg_quant_encode(RG_QUANT_BF16, 1, big, 2, buf), -1);
  assert_non_null(strstr(rg_error_get(), "element 1"));
  const float small[8] = {1e-37f, -3e-38f, 5e-39f, 0, 1.4e-45f, -1e-37f, 2e-38f, 7e-38f};
  float back[8], tiny[8];
  for (int q = RG_QUANT_INT8; q <= RG_QUANT_INT4; q++) {
    const float levels = q == RG_QUANT_INT8 ? 127.0f : 7.0f;
    for (int i = 0; i < 8; i++) tiny[i] = q == RG_QUANT_INT8 ? small[i] : small[i] * 0.5f; /* absmax / 7 = 7e-39 */
    assert_int_equal(rg_quant_encode((rg_quant)q, 8, tiny, 8, buf), 0);
    rg_quant_decode((rg_quant)q, 8, buf, 8, back);
    for (int i = 0; i < 8; i++) {
      if (back[i] != 0) fail_msg("%s, element %d: %g decoded from a subnormal-scale block", rg_quant_name((rg_quant)q), i, (double)back[i]);
      assert_true(fabsf(tiny[i]) < levels * FLT_MIN);
    }
    float normal[8];
    for (int i = 0; i < 8; i++) normal[i] = small[i] * 1e3f; /* absmax 1e-34: s normal */
    assert_int_equal(rg_quant_encode((rg_quant)q, 8, normal, 8, buf), 0);
    rg_quant_decode((rg_quant)q, 8, buf, 8, back);
    const float s = 1e-34f / levels;
    for (int i = 0; i < 8; i++) assert_true(fabsf(normal[i] - back[i]) <= s * (0.5f + 1e-6f));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_outer_sgd), cmocka_unit_test(test_merge), cmocka_unit_test(test_quant),
                                     cmocka_unit_test(test_no_contraction), cmocka_unit_test(test_quant_edges)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
