/* test_split_matmul.c: the split products (cpu_matmul_split: float32
 * activations times block-quantized weights on AMX-BF16 tiles, the
 * activations cut into three bf16 parts), which every product of such a
 * weight takes on such CPUs, for every block format they cover.
 *
 * Per format and shape, against a double-precision product of x with the
 * weights rg_dequantize_row gives (bit-exact against gguf-py in
 * test_dequant):
 *  1. A worst-case bound. The parts are exact and so are their products
 *     with the integer weights, so the only errors are float32 roundings:
 *     the tile's sum of 3 G products per sub-block (at most 3 G roundings
 *     of a partial sum), and per sub-block the scale's and the bias's fused
 *     adds. Each rounding is at most 2^-24 of a partial sum bounded by
 *     sum_k |x_k| (|wd (u_k - o)| + |wm|) = sum_k |x_k| A_k, so
 *     |y - ref| <= 2^-24 (3 G + 2 K / G + 2) sum |x| A + 2^-24 |bias|.
 *     A wrong scale, offset, nibble or sub-block index errs by a sizable
 *     fraction of a term.
 *  2. Precision as float32's. The worst case cannot see a part lost (the
 *     low part is 2^-16 of x), so the root-mean-square error of the split
 *     product must stay within 3x that of the float32 sgemm on the same
 *     operands (a backend capped below AMX). Dropping the low part makes it
 *     over 10x (checked by mutation when this test was written), above all
 *     on the case with every term positive, where the loss adds up.
 *  3. Batch invariance: rows 37..76 of a 100-row product, multiplied alone,
 *     give the same bits.
 *  4. An optimizer's copy wins: once a weight's float32 copy is replaced
 *     (rg_bweight_upload), products read the copy, not the stale blocks.
 * Bias (beta 0) and rg_op_matmul_add (beta 1) are both checked by (1).
 * Without AMX-BF16 (or under REFGEO_MAX_ISA below amx) the products are
 * sgemm's: the test says so and (1) still runs; (3) does not (sgemm's
 * batch invariance is OpenBLAS's, and its AVX2 kernels do not have it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "tensor/dtype.h"
#include "block_products.h"
#include "testlib.h"

static rg_backend *backend_capped(const char *cap) {
  if (cap) assert_int_equal(setenv("REFGEO_MAX_ISA", cap, 1), 0);
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  unsetenv("REFGEO_MAX_ISA");
  assert_non_null(be);
  return be;
}

/* Where a format has a bias wm (q4_1's m, q4_K's dmin-based mins): the
 * weights with it zeroed, dequantized, so that A_k = |w0_k| + |w_k - w0_k|. */
static void magnitudes(int type, const uint8_t *bytes, int K, int N, const float *w, float *a) {
  const size_t rb = rg_dtype_row_bytes(type, K);
  uint8_t *copy = malloc(rb * (size_t)N);
  memcpy(copy, bytes, rb * (size_t)N);
  const size_t block = type == RG_Q4_1 ? 20 : type == RG_Q4_K ? 144 : 0;
  if (block)
    for (size_t at = 2; at < rb * (size_t)N; at += block) copy[at] = copy[at + 1] = 0; /* the f16 min / dmin */
  for (int r = 0; r < N; r++) {
    float *w0 = a + (size_t)r * K;
    assert_int_equal(rg_dequantize_row(type, copy + rb * r, w0, K), 0);
    for (int k = 0; k < K; k++) w0[k] = fabsf(w0[k]) + fabsf(w[(size_t)r * K + k] - w0[k]);
  }
  free(copy);
}

/* Checks (1) and (2) on one format and shape; POSITIVE: every weight and
 * activation above zero (q4_1 with a positive min). */
static void check_format(int type, int M, int K, int N, bool positive) {
  const char *name = rg_dtype_get(type)->name;
  const int group = type == RG_Q6_K ? 16 : 32;
  rng = 0x243F6A8885A308D3ull ^ (uint64_t)(type * 1000003 + M * 1009 + K * 17 + N);
  uint8_t *bytes = random_rows(type, K, N, -1);
  const size_t rb = rg_dtype_row_bytes(type, K);
  if (positive) /* q4_1: w = d u + m with m > 0 */
    for (size_t at = 2; at < rb * (size_t)N; at += 20) put_f16(bytes + at, 0.05 + 0.1 * fabs(urand()));
  const rg_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes, .nbytes = rb * N};
  float *w = malloc((size_t)N * K * sizeof *w), *a = malloc((size_t)N * K * sizeof *a);
  for (int r = 0; r < N; r++) assert_int_equal(rg_dequantize_row(type, bytes + rb * r, w + (size_t)r * K, K), 0);
  magnitudes(type, bytes, K, N, w, a);
  float *x = malloc((size_t)M * K * sizeof *x), *bias_v = malloc((size_t)N * sizeof *bias_v);
  for (int i = 0; i < M * K; i++)
    x[i] = positive ? (float)(1.5 + 0.5 * urand()) : (float)(urand() * (i % 97 == 0 ? 30.0 : 1.0));
  for (int n = 0; n < N; n++) bias_v[n] = (float)urand();
  const rg_tensor bt = {.name = "b", .type = RG_F32, .n_dims = 1, .ne = {N, 1, 1, 1}, .data = bias_v,
                        .nbytes = sizeof(float) * N};

  rg_backend *be = backend_capped(NULL), *blas = backend_capped("avx512");
  rg_bweight *ws = rg_backend_weight(be, &t, RG_FORM_F32), *wb = rg_backend_weight(blas, &t, RG_FORM_F32);
  rg_bweight *bs = rg_backend_weight(be, &bt, RG_FORM_F32);
  assert_non_null(ws);
  assert_non_null(wb);
  assert_false(wb->split);
  const bool engaged = ws->split;
  assert_int_equal(engaged, cpu(be)->split && cpu_split_supported(type, K));

  float *y = product(be, ws, x, M, K, N, bs, NULL), *yb = product(blas, wb, x, M, K, N, NULL, NULL);
  float *twice = product(be, ws, x, M, K, N, NULL, y); /* y + the product again */
  double worst = 0, sq_split = 0, sq_blas = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      const float *wn = w + (size_t)n * K, *an = a + (size_t)n * K, *xm = x + (size_t)m * K;
      double ref = 0, mag = 0;
      for (int k = 0; k < K; k++) ref += (double)xm[k] * wn[k], mag += fabs((double)xm[k]) * an[k];
      const size_t i = (size_t)m * N + n;
      const double tol = ldexp(1.0, -24) * ((3 * group + 2 * K / group + 2) * mag + fabs(bias_v[n])) + 1e-30;
      const double got = y[i] - (double)bias_v[n], e = fabs((double)y[i] - (ref + bias_v[n])) / tol;
      if (e > worst) worst = e;
      if (e > 1) fail_msg("%s M=%d K=%d row %d,%d: %.9g, want %.9g (bound %.3g)", name, M, K, m, n, y[i],
                          ref + bias_v[n], tol);
      /* beta 1: twice = y + product, the product's own error again */
      const double e2 = fabs((double)twice[i] - (y[i] + ref)) / (tol + ldexp(1.0, -24) * fabs(y[i] + ref));
      if (e2 > 1) fail_msg("%s matmul_add row %d,%d: %.9g, want %.9g", name, m, n, twice[i], y[i] + ref);
      const double scale = mag > 0 ? mag : 1;
      sq_split += (got - ref) * (got - ref) / (scale * scale);
      sq_blas += ((double)yb[i] - ref) * ((double)yb[i] - ref) / (scale * scale);
    }
  const double rms_split = sqrt(sq_split / (M * N)), rms_blas = sqrt(sq_blas / (M * N));
  print_message("%-5s %s M=%3d K=%4d N=%3d%s: worst %.2f of the bound; rms error %.2e (sgemm %.2e)\n", name,
                engaged ? "split" : "sgemm", M, K, N, positive ? " positive" : "", worst, rms_split, rms_blas);
  if (rms_split > 3 * rms_blas + 1e-12)
    fail_msg("%s: rms error %.3g against sgemm's %.3g: a part lost?", name, rms_split, rms_blas);
  free(y), free(yb), free(twice);
  rg_bweight_free(be, ws), rg_bweight_free(be, bs), rg_bweight_free(blas, wb);
  rg_backend_free(be), rg_backend_free(blas);
  free(bytes), free(w), free(a), free(x), free(bias_v);
}

/* Shapes: a ragged row count and a ragged output count (N = 45: the last
 * pair of 16-row panels half empty); 300 rows over two passes (a pass is
 * at most 256 rows); K = 1536 (fewer rows per pass) for the 32-row formats;
 * K = 4096 x 800 outputs, whose panels no longer fit a thread's 4 MiB
 * (SPLIT_KEEP_BYTES), so they are decoded again in each of two passes of
 * 32 rows. */
static void test_formats(void **state) {
  const int types[] = {RG_Q4_0, RG_Q4_1, RG_Q5_0, RG_Q8_0, RG_Q4_K, RG_Q6_K};
  const bool sanitized = getenv("REFGEO_SANITIZED") != NULL; /* the double reference is the slow part */
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    check_format(types[i], 33, 256, 45, false);
    check_format(types[i], sanitized ? 64 : 300, 512, 70, false);
  }
  check_format(RG_Q4_1, 40, 1536, 64, false);
  check_format(RG_Q4_0, 40, 1536, 32, false);
  check_format(RG_Q4_1, 40, 4096, 800, false);
  check_format(RG_Q4_1, 64, 512, 64, true);
}

static void test_batch_invariant(void **state) {
  const int M = 100, K = 512, N = 96, first = 37, rows = 40;
  uint8_t *bytes = random_rows(RG_Q4_1, K, N, -1);
  const size_t rb = rg_dtype_row_bytes(RG_Q4_1, K);
  const rg_tensor t = {.name = "w", .type = RG_Q4_1, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes, .nbytes = rb * N};
  float *x = malloc((size_t)M * K * sizeof *x);
  for (int i = 0; i < M * K; i++) x[i] = (float)urand();
  rg_backend *be = backend_capped(NULL);
  rg_bweight *w = rg_backend_weight(be, &t, RG_FORM_F32);
  /* Batch invariance is the split products' promise. Without AMX the
   * products are OpenBLAS's sgemm, whose blocking (so its float32 sums)
   * may depend on M (its AVX2 kernels on an AMD EPYC do): not refgeo's to
   * check. */
  if (w->split) check_rows_alone(be, w, x, M, K, N, first, rows);
  else print_message("no AMX-BF16 split products here: sgemm's batch invariance is not checked\n");
  free(x), free(bytes);
  rg_bweight_free(be, w);
  rg_backend_free(be);
}

static void test_replaced_copy(void **state) {
  const int M = 64, K = 256, N = 32;
  uint8_t *bytes = random_rows(RG_Q8_0, K, N, -1);
  const size_t rb = rg_dtype_row_bytes(RG_Q8_0, K);
  const rg_tensor t = {.name = "w", .type = RG_Q8_0, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes, .nbytes = rb * N};
  float *x = malloc((size_t)M * K * sizeof *x), *ones = malloc((size_t)N * K * sizeof *ones);
  for (int i = 0; i < M * K; i++) x[i] = (float)(i % 7) - 3.0f; /* small integers: exact sums */
  for (int i = 0; i < N * K; i++) ones[i] = 1.0f;
  rg_backend *be = backend_capped(NULL);
  rg_bweight *w = rg_backend_weight(be, &t, RG_FORM_F32);
  assert_int_equal(rg_bweight_upload(be, w, ones), 0);
  assert_false(w->split);
  float *y = product(be, w, x, M, K, N, NULL, NULL);
  for (int m = 0; m < M; m++) {
    double sum = 0;
    for (int k = 0; k < K; k++) sum += x[(size_t)m * K + k];
    for (int n = 0; n < N; n++)
      if (y[(size_t)m * N + n] != (float)sum) fail_msg("row %d,%d: %g, want the copy's %g", m, n, y[m * N + n], sum);
  }
  free(y), free(x), free(ones), free(bytes);
  rg_bweight_free(be, w);
  rg_backend_free(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_formats), cmocka_unit_test(test_batch_invariant),
                                     cmocka_unit_test(test_replaced_copy)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
