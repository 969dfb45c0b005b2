/* test_panel_matmul.c: the panel products (cpu_matmul_panel: 17 to
 * PANEL_MAX_M rows of x times a weight kept in its file dtype, decoded a
 * block of rows at a time), which prompts of `generate` and `asr` and
 * frozen LoRA bases take on a CPU without AMX, for f16 and the block
 * formats.
 *
 * Per form and shape, against a double-precision product of x with the
 * weights rg_dequantize_row gives (bit-exact against gguf-py in
 * test_dequant):
 *  1. A worst-case bound. Each output is chains of at most KC (64) FMAs
 *     summed in order, so at most KC + K / KC + 1 float32 roundings, each at
 *     most 2^-24 of a partial sum bounded by sum_k |x_k w_k|, plus the
 *     bias's add:  |y - ref| <= 2^-24 ((KC + K / KC + 2) sum |x w| + |bias|).
 *     A wrong row, column, block or scale errs by a sizable fraction of a
 *     term. Bias (beta 0) and rg_op_matmul_add (beta 1) are both checked.
 *  2. The chains. With every term positive the error of one chain over all
 *     of K grows as sqrt(K) roundings; the products must be at least 2x
 *     more accurate (root-mean-square) than that chain computed here on the
 *     same operands (K = 4096: about 5x; one chain, KC >= K, fails).
 *  3. Batch invariance: rows 37..76 of a 100-row product, multiplied alone,
 *     give the same bits.
 * On a CPU with AMX-BF16 a block format takes the split products instead
 * (test_split_matmul); REFGEO_MAX_ISA=avx512 keeps them off here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "tensor/dtype.h"
#include "block_products.h"
#include "testlib.h"

enum { KC = 64 }; /* backend/cpu/panel.c's chain */

static rg_backend *backend_no_amx(void) {
  assert_int_equal(setenv("REFGEO_MAX_ISA", "avx512", 1), 0);
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  unsetenv("REFGEO_MAX_ISA");
  assert_non_null(be);
  return be;
}

/* A weight of TYPE (RG_F16: random halves) as a tensor, and its values. */
typedef struct {
  rg_tensor t;
  uint8_t *bytes;
  float *w;
} test_weight;

static test_weight make_weight(int type, int K, int N, bool positive) {
  test_weight tw = {.w = malloc((size_t)N * K * sizeof(float))};
  const size_t rb = rg_dtype_row_bytes(type, K);
  if (type == RG_F16) {
    tw.bytes = malloc(rb * (size_t)N);
    for (size_t i = 0; i < (size_t)N * K; i++)
      put_f16(tw.bytes + 2 * i, positive ? 0.5 + 0.5 * fabs(urand()) : urand());
  } else {
    tw.bytes = random_rows(type, K, N, -1);
  }
  for (int r = 0; r < N; r++) assert_int_equal(rg_dequantize_row(type, tw.bytes + rb * r, tw.w + (size_t)r * K, K), 0);
  tw.t = (rg_tensor){.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = tw.bytes, .nbytes = rb * N};
  return tw;
}

static void check_bound(int type, int M, int K, int N) {
  const char *name = rg_dtype_get(type)->name;
  rng = 0x243F6A8885A308D3ull ^ (uint64_t)(type * 1000003 + M * 1009 + K * 17 + N);
  test_weight tw = make_weight(type, K, N, false);
  float *x = malloc((size_t)M * K * sizeof *x), *bias_v = malloc((size_t)N * sizeof *bias_v);
  for (int i = 0; i < M * K; i++) x[i] = (float)(urand() * (i % 97 == 0 ? 30.0 : 1.0));
  for (int n = 0; n < N; n++) bias_v[n] = (float)urand();
  const rg_tensor bt = {.name = "b", .type = RG_F32, .n_dims = 1, .ne = {N, 1, 1, 1}, .data = bias_v,
                        .nbytes = sizeof(float) * N};
  rg_backend *be = backend_no_amx();
  rg_bweight *w = rg_backend_weight(be, &tw.t, RG_FORM_FILE), *b = rg_backend_weight(be, &bt, RG_FORM_F32);
  assert_non_null(w);
  assert_true(!w->f32 && !w->split && !w->q8); /* the panel products' operand */
  float *y = product(be, w, x, M, K, N, b, NULL), *twice = product(be, w, x, M, K, N, NULL, y);
  double worst = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      const float *wn = tw.w + (size_t)n * K, *xm = x + (size_t)m * K;
      double ref = 0, mag = 0;
      for (int k = 0; k < K; k++) ref += (double)xm[k] * wn[k], mag += fabs((double)xm[k] * wn[k]);
      const size_t i = (size_t)m * N + n;
      const double bound = ldexp(1.0, -24) * ((KC + K / KC + 2) * mag + fabs(bias_v[n])) + 1e-30;
      const double e = fabs((double)y[i] - (ref + bias_v[n])) / bound;
      if (e > worst) worst = e;
      if (e > 1) fail_msg("%s M=%d K=%d N=%d row %d,%d: %.9g, want %.9g (bound %.3g)", name, M, K, N, m, n, y[i],
                          ref + bias_v[n], bound);
      /* beta 1: twice = y + the product, its own error again */
      const double e2 = fabs((double)twice[i] - (y[i] + ref)) / (bound + ldexp(1.0, -24) * fabs(y[i] + ref));
      if (e2 > 1) fail_msg("%s matmul_add row %d,%d: %.9g, want %.9g", name, m, n, twice[i], y[i] + ref);
    }
  print_message("%-4s M=%3d K=%4d N=%3d: worst %.3f of the bound\n", name, M, K, N, worst);
  free(y), free(twice), free(x), free(bias_v), free(tw.bytes), free(tw.w);
  rg_bweight_free(be, w), rg_bweight_free(be, b);
  rg_backend_free(be);
}

/* Shapes: the fewest rows (17), a ragged block of x rows (33, 100) and of
 * weight rows (N = 45, 70), PANEL_MAX_M rows, K with a ragged chain (100)
 * and SmolLM2's widths. */
static void test_bound(void **state) {
  const bool sanitized = getenv("REFGEO_SANITIZED") != NULL; /* the double reference is the slow part */
  check_bound(RG_F16, 17, 576, 45);
  check_bound(RG_F16, 100, 100, 70);
  check_bound(RG_F16, sanitized ? 64 : PANEL_MAX_M, 576, 64);
  check_bound(RG_Q4_1, 33, 1536, 45);
  check_bound(RG_Q5_0, 100, 576, 70);
  check_bound(RG_Q6_K, 40, 512, 37);
}

static void test_chains(void **state) {
  const int M = 64, K = 4096, N = 24;
  rng = 0x13198A2E03707344ull;
  test_weight tw = make_weight(RG_F16, K, N, true);
  float *x = malloc((size_t)M * K * sizeof *x);
  for (int i = 0; i < M * K; i++) x[i] = (float)(0.5 + 0.5 * fabs(urand()));
  rg_backend *be = backend_no_amx();
  rg_bweight *w = rg_backend_weight(be, &tw.t, RG_FORM_FILE);
  float *y = product(be, w, x, M, K, N, NULL, NULL);
  double sq = 0, sq_chain = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      const float *wn = tw.w + (size_t)n * K, *xm = x + (size_t)m * K;
      double ref = 0;
      float chain = 0;
      for (int k = 0; k < K; k++) ref += (double)xm[k] * wn[k], chain = fmaf(xm[k], wn[k], chain);
      const double e = (y[(size_t)m * N + n] - ref) / ref, ec = (chain - ref) / ref;
      sq += e * e, sq_chain += ec * ec;
    }
  const double rms = sqrt(sq / (M * N)), rms_chain = sqrt(sq_chain / (M * N));
  print_message("K=%d, every term positive: rms relative error %.2e, one chain %.2e\n", K, rms, rms_chain);
  if (!(rms * 2 <= rms_chain)) fail_msg("rms error %.3g, one chain's %.3g: are the chains restarted?", rms, rms_chain);
  free(y), free(x), free(tw.bytes), free(tw.w);
  rg_bweight_free(be, w);
  rg_backend_free(be);
}

static void test_batch_invariant(void **state) {
  const int M = 100, K = 512, N = 96, first = 37, rows = 40;
  test_weight tw = make_weight(RG_Q4_1, K, N, false);
  float *x = malloc((size_t)M * K * sizeof *x);
  for (int i = 0; i < M * K; i++) x[i] = (float)urand();
  rg_backend *be = backend_no_amx();
  rg_bweight *w = rg_backend_weight(be, &tw.t, RG_FORM_FILE);
  check_rows_alone(be, w, x, M, K, N, first, rows);
  free(x), free(tw.bytes), free(tw.w);
  rg_bweight_free(be, w);
  rg_backend_free(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bound), cmocka_unit_test(test_chains),
                                     cmocka_unit_test(test_batch_invariant)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
