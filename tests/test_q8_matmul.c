/* test_q8_matmul.c: the 8-bit decode products (RG_FORM_FILE_Q8,
 * backend/cpu/q8/q8.c) for every block format they cover, on random blocks,
 * and on float matrices through their q8_0 copy (test_float_weights).
 *
 * Three independent checks per format and shape:
 *  1. The formula. The reference quantizes x here, by the documented rule
 *     (blocks of 32, dx = max|x| / 127, q = round-half-even(x / dx)), takes
 *     the weights from rg_dequantize_row (bit-exact against gguf-py in
 *     test_dequant) and sums w_k * dx * q_k in double. The kernel rounds
 *     each sub-block's scale product and its one or two fused adds: at most
 *     3 roundings of 2^-24 per sub-block, each relative to a partial sum
 *     bounded by sum |w_k dx q_k|, so TOL_FORMULA = 4 * 2^-24 per sub-block
 *     of that sum. A wrong offset, scale, nibble order or sub-block index
 *     errs by a sizable fraction of a term.
 *  2. The exact product. |x_k - dx q_k| <= dx / 2 (round to nearest; the
 *     float rounding of x / dx adds a relative 2^-24 of dx), so the result
 *     is within sum_k |w_k| dx_b(k) (1/2 + 1e-6) of the float32 product
 *     (the RG_FORM_FILE path), plus 1e-5 of sum |w_k x_k| for the
 *     float32 sums on both sides.
 *  3. Batch invariance: each row of x alone gives bitwise its row of the
 *     product of all (16 rows for a decode step, up to 300 for a prompt).
 * Bias (beta 0) and rg_op_matmul_add (beta 1) are checked with (1).
 *
 * Each check runs on every instruction set's kernels this CPU has
 * (REFGEO_MAX_ISA=amx, avx512, then avx2), and their products must be the
 * same bits. The AMX kernels hand products of fewer than 4 rows to the
 * AVX-512 ones, so the checks with 1 or 3 rows run those twice. On a CPU with neither, the form falls back to the float32 path;
 * (1) is then skipped and said so, (2) and (3) still run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/q8/q8_internal.h"
#include "tensor/dtype.h"
#include "block_products.h"
#include "testlib.h"
#include "util/error.h"

/* The documented activation rule, written out here independently. */
static void quantize_ref(const float *x, int K, int8_t *q, float *dx) {
  for (int b = 0; b < K / 32; b++) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
    const float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; i++) q[32 * b + i] = (int8_t)nearbyintf(x[32 * b + i] * inv);
    dx[b] = d;
  }
}

/* A CPU backend started under REFGEO_MAX_ISA=CAP; *RUNS is the name of
 * the 8-bit kernels it chose ("amx", "avx512", "avx2"), or NULL. */
static rg_backend *backend_capped(const char *cap, const char **runs) {
  assert_int_equal(setenv("REFGEO_MAX_ISA", cap, 1), 0);
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  unsetenv("REFGEO_MAX_ISA");
  assert_non_null(be);
  *runs = cpu(be)->q8 ? cpu(be)->q8->name : NULL;
  return be;
}

/* The checks on one instruction set's kernels (CAP); returns the product
 * (caller frees), or NULL where this CPU does not run them. EXTREME: every
 * weight byte FILL and every activation 1 (q = 127), the largest integer
 * sums the kernels meet (the AVX2 kernels' int16 pair sums, for one). */
static float *check_isa(const char *cap, int type, int M, int K, int N, int fill) {
  const char *name = rg_dtype_get(type)->name, *runs;
  rg_backend *be = backend_capped(cap, &runs);
  if (runs && strcmp(runs, cap) != 0) { /* a lesser set: checked under its own name */
    print_message("%-5s: no %s kernels on this CPU\n", name, cap);
    rg_backend_free(be);
    return NULL;
  }
  const int group = type == RG_Q6_K ? 16 : 32;
  rng = 0x243F6A8885A308D3ull ^ (uint64_t)(type * 1000003 + M * 1009 + K * 17 + N); /* the same operands per ISA */
  uint8_t *bytes = random_rows(type, K, N, fill);
  const size_t rb = rg_dtype_row_bytes(type, K);
  const rg_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes, .nbytes = rb * N};
  float *wf = malloc((size_t)N * K * sizeof *wf);
  for (int r = 0; r < N; r++) assert_int_equal(rg_dequantize_row(type, bytes + rb * r, wf + (size_t)r * K, K), 0);
  /* activations: mixed magnitudes, one all-zero block (dx = 0) */
  float *x = malloc((size_t)M * K * sizeof *x), bias_v[512];
  for (int i = 0; i < M * K; i++) x[i] = fill >= 0 ? 1.0f : (float)(urand() * (i % 97 == 0 ? 30.0 : 1.0));
  memset(x + 32, 0, 32 * sizeof *x);
  for (int n = 0; n < N; n++) bias_v[n] = (float)urand();
  const rg_tensor bt = {.name = "b", .type = RG_F32, .n_dims = 1, .ne = {N, 1, 1, 1}, .data = bias_v, .nbytes = sizeof(float) * N};

  rg_bweight *wq = rg_backend_weight(be, &t, RG_FORM_FILE_Q8), *we = rg_backend_weight(be, &t, RG_FORM_FILE);
  rg_bweight *bw = rg_backend_weight(be, &bt, RG_FORM_F32);
  assert_non_null(wq);
  assert_non_null(we);
  const bool engaged = wq->q8;
  assert_int_equal(engaged, cpu_q8_supported(cpu(be)->q8, type, K));

  float *y = product(be, wq, x, M, K, N, bw, NULL), *exact = product(be, we, x, M, K, N, NULL, NULL);
  int8_t *q = malloc((size_t)K);
  float *dx = malloc((size_t)K / 32 * sizeof *dx);
  double worst_formula = 0, worst_exact = 0; /* each as a fraction of its bound */
  for (int m = 0; m < M; m++) {
    quantize_ref(x + (size_t)m * K, K, q, dx);
    for (int n = 0; n < N; n++) {
      const float *w = wf + (size_t)n * K, *xm = x + (size_t)m * K;
      double ref = 0, abs_terms = 0, round_bound = 0, abs_wx = 0;
      for (int k = 0; k < K; k++) {
        const double term = (double)w[k] * dx[k / 32] * q[k];
        ref += term;
        abs_terms += fabs(term);
        round_bound += fabs(w[k]) * dx[k / 32] * (0.5 + 1e-6);
        abs_wx += fabs((double)w[k] * xm[k]);
      }
      const double got = (double)y[(size_t)m * N + n] - bias_v[n];
      if (engaged) {
        const double tol = 4.0 * (K / group) * ldexp(1.0, -24) * (abs_terms + fabs(bias_v[n])) + 1e-30;
        const double e = fabs(got - ref) / tol;
        if (e > worst_formula) worst_formula = e;
        if (e > 1) fail_msg("%s M=%d K=%d row %d,%d: %.9g against the formula's %.9g", name, M, K, m, n, got, ref);
      }
      const double tol = round_bound + 1e-5 * abs_wx + 1e-30;
      const double e = fabs(got - exact[(size_t)m * N + n]) / tol;
      if (e > worst_exact) worst_exact = e;
      if (e > 1) fail_msg("%s M=%d row %d,%d: %.9g, exact %.9g", name, M, m, n, got, exact[(size_t)m * N + n]);
    }
  }
  if (engaged)
    print_message("%-5s %-6s M=%2d K=%d N=%d: formula err %.2f of its bound, exact-product err %.2f of its bound\n",
                  name, runs, M, K, N, worst_formula, worst_exact);
  else
    print_message("%-5s: no 8-bit kernel on this CPU (float32 path), exact-product check only\n", name);

  /* beta 1: y + the product again */
  if (engaged) {
    rg_buf *xb = rg_buf_new(be, (size_t)M * K), *yb = rg_buf_new(be, (size_t)M * N);
    rg_buf_upload(be, xb, 0, x, (size_t)M * K);
    rg_buf_upload(be, yb, 0, y, (size_t)M * N);
    rg_op_matmul_add(be, yb, xb, M, wq);
    float *twice = malloc((size_t)M * N * sizeof *twice);
    assert_int_equal(rg_buf_download(be, yb, 0, twice, (size_t)M * N), 0);
    for (int i = 0; i < M * N; i++) {
      const double once = (double)y[i] - bias_v[i % N];
      if (fabs(twice[i] - (y[i] + once)) > 1e-5 * (fabs(y[i]) + fabs(once)) + 1e-30)
        fail_msg("%s matmul_add element %d: %g, want %g", name, i, twice[i], y[i] + once);
    }
    free(twice);
    rg_buf_free(be, xb);
    rg_buf_free(be, yb);
  }
  /* each row alone */
  for (int m = 0; m < M; m++) {
    float *one = product(be, wq, x + (size_t)m * K, 1, K, N, bw, NULL);
    if (memcmp(one, y + (size_t)m * N, (size_t)N * sizeof *one) != 0) fail_msg("%s: row %d alone differs", name, m);
    free(one);
  }
  free(q);
  free(dx);
  free(exact);
  rg_bweight_free(be, wq);
  rg_bweight_free(be, we);
  rg_bweight_free(be, bw);
  rg_backend_free(be);
  free(x);
  free(wf);
  free(bytes);
  return y;
}

/* Every instruction set's kernels pass the checks, and give the same bits:
 * their sums are exact and their float operations the same, in order. */
static void check_filled(int type, int M, int K, int N, int fill) {
  static const char *const isas[] = {"amx", "avx512", "avx2"};
  float *y[3];
  for (int i = 0; i < 3; i++) y[i] = check_isa(isas[i], type, M, K, N, fill);
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (y[i] && y[j] && memcmp(y[i], y[j], (size_t)M * N * sizeof *y[i]) != 0)
        fail_msg("%s M=%d: the %s kernels' product differs from %s's", rg_dtype_get(type)->name, M, isas[j], isas[i]);
  for (int i = 0; i < 3; i++) free(y[i]);
}

static void check(int type, int M, int K, int N) { check_filled(type, M, K, N, -1); }

/* N = 37: two full panels of 16 rows and a ragged one of 5. */
static void test_block32_formats(void **state) {
  const int types[] = {RG_Q4_0, RG_Q4_1, RG_Q5_0, RG_Q8_0};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    check(types[i], 1, 192, 37);
    check(types[i], 16, 320, 37);
  }
}

static void test_k_formats(void **state) {
  check(RG_Q4_K, 1, 512, 37);
  check(RG_Q4_K, 5, 256, 21);
  check(RG_Q6_K, 1, 512, 37);
  check(RG_Q6_K, 16, 256, 19);
}

/* A prompt: more rows than one panel's accumulators (16: 40 rows) and than
 * one pass over the weights (256: 300 rows). */
static void test_many_rows(void **state) {
  check(RG_Q6_K, 40, 256, 19);
  check(RG_Q4_1, 300, 128, 37);
}

/* The largest unpacked bytes of each format (0xFF everywhere; q8_0's
 * largest magnitude is 0x80, -128) times q = 127; 3 rows for the VNNI
 * kernels, 5 for AMX's tiles. */
static void test_extremes(void **state) {
  const int types[] = {RG_Q4_0, RG_Q4_1, RG_Q5_0, RG_Q4_K, RG_Q6_K};
  for (int M = 3; M <= 5; M += 2) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_filled(types[i], M, 256, 21, 0xFF);
    check_filled(RG_Q8_0, M, 256, 21, 0xFF);
    check_filled(RG_Q8_0, M, 256, 21, 0x80);
    check_filled(RG_Q8_0, M, 256, 21, 0x7F);
  }
}

/* Widths that are not a multiple of 64 columns, and every width under
 * REFGEO_MAX_ISA=none, keep the float32 path: the same bits as
 * RG_FORM_FILE. */
static void fallback(const char *cap, int K) {
  const int N = 9, M = 2;
  uint8_t *bytes = random_rows(RG_Q4_1, K, N, -1);
  const rg_tensor t = {.name = "w", .type = RG_Q4_1, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes,
                       .nbytes = rg_dtype_row_bytes(RG_Q4_1, K) * N};
  const char *runs;
  rg_backend *be = backend_capped(cap, &runs);
  rg_bweight *wq = rg_backend_weight(be, &t, RG_FORM_FILE_Q8), *we = rg_backend_weight(be, &t, RG_FORM_FILE);
  assert_false(wq->q8);
  float x[2 * 128];
  for (int i = 0; i < M * K; i++) x[i] = (float)urand();
  float *a = product(be, wq, x, M, K, N, NULL, NULL), *b = product(be, we, x, M, K, N, NULL, NULL);
  assert_memory_equal(a, b, (size_t)M * N * sizeof *a);
  free(a);
  free(b);
  rg_bweight_free(be, wq);
  rg_bweight_free(be, we);
  rg_backend_free(be);
  free(bytes);
}

static void test_fallback(void **state) {
  fallback("avx512", 96);
  fallback("none", 128);
}

/* Float32, f16 and bf16 matrices in RG_FORM_FILE_Q8 are quantized to q8_0
 * once (rg_quantize_row_q8_0, byte-exact against gguf-py in test_dequant):
 * their products are bitwise those of the q8_0 tensor of the same values,
 * which the checks above verify against the formula. The weight's bytes
 * grow by the copy; made float32 (an optimizer's copy), it leaves the 8-bit
 * path, since the copy would go stale: then bitwise the float32 product. */
static void test_float_weights(void **state) {
  enum { M = 5, K = 192, N = 37 };
  const int types[] = {RG_F32, RG_F16, RG_BF16};
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  assert_non_null(be);
  const bool kernels = cpu(be)->q8 != NULL;
  float *wf = malloc((size_t)N * K * sizeof *wf), x[M * K];
  for (int i = 0; i < M * K; i++) x[i] = (float)urand();
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    const int type = types[ti];
    const size_t rb = rg_dtype_row_bytes(type, K), qb = rg_dtype_row_bytes(RG_Q8_0, K);
    uint8_t *bytes = malloc(rb * N), *blocks = malloc(qb * N);
    for (int i = 0; i < N * K; i++) {
      const float v = (float)(urand() * (i % 61 == 0 ? 8.0 : 0.1));
      const uint16_t h = type == RG_F16 ? rg_fp32_to_fp16(v) : rg_fp32_to_bf16(v);
      if (type == RG_F32) memcpy(bytes + 4 * (size_t)i, &v, 4);
      else memcpy(bytes + 2 * (size_t)i, &h, 2);
    }
    for (int r = 0; r < N; r++) {
      assert_int_equal(rg_dequantize_row(type, bytes + rb * r, wf + (size_t)r * K, K), 0);
      rg_quantize_row_q8_0(wf + (size_t)r * K, blocks + qb * r, K);
    }
    const rg_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = bytes, .nbytes = rb * N};
    const rg_tensor tq = {.name = "wq", .type = RG_Q8_0, .n_dims = 2, .ne = {K, N, 1, 1}, .data = blocks,
                          .nbytes = qb * N};
    rg_bweight *wq = rg_backend_weight(be, &t, RG_FORM_FILE_Q8), *w8 = rg_backend_weight(be, &tq, RG_FORM_FILE_Q8),
               *we = rg_backend_weight(be, &t, RG_FORM_F32);
    assert_non_null(wq);
    assert_non_null(w8);
    assert_int_equal(wq->q8, kernels);
    float *got = product(be, wq, x, M, K, N, NULL, NULL), *want = product(be, w8, x, M, K, N, NULL, NULL);
    float *exact = product(be, we, x, M, K, N, NULL, NULL);
    if (kernels) {
      assert_memory_equal(got, want, (size_t)M * N * sizeof *got);
      assert_true(rg_bweight_bytes(be, wq) >= qb * N);
    } else {
      assert_memory_equal(got, exact, (size_t)M * N * sizeof *got);
    }
    double worst = 0;
    for (int i = 0; i < M * N; i++) worst = fmax(worst, fabs(got[i] - exact[i]));
    print_message("%-4s as q8_0: bitwise the q8_0 tensor's product; largest difference from float32 %.2e\n",
                  rg_dtype_get(type)->name, worst);
    free(got);
    assert_int_equal(rg_bweight_make_f32(be, wq), 0);
    assert_false(wq->q8);
    got = product(be, wq, x, M, K, N, NULL, NULL);
    assert_memory_equal(got, exact, (size_t)M * N * sizeof *got);
    free(got), free(want), free(exact);
    rg_bweight_free(be, wq);
    rg_bweight_free(be, w8);
    rg_bweight_free(be, we);
    free(bytes), free(blocks);
  }
  free(wf);
  rg_backend_free(be);
}

/* An unknown cap stops the backend with one line that names it. */
static void test_unknown_cap(void **state) {
  assert_int_equal(setenv("REFGEO_MAX_ISA", "avx9", 1), 0);
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  unsetenv("REFGEO_MAX_ISA");
  assert_null(be);
  assert_non_null(strstr(rg_error_get(), "REFGEO_MAX_ISA: unknown value 'avx9'"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_block32_formats), cmocka_unit_test(test_k_formats),
                                     cmocka_unit_test(test_many_rows), cmocka_unit_test(test_extremes),
                                     cmocka_unit_test(test_fallback), cmocka_unit_test(test_float_weights),
                                     cmocka_unit_test(test_unknown_cap)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
