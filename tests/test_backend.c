/* test_backend.c: every backend operation against a naive double-precision
 * reference on random data (the idea of ggml's test-backend-ops). Each test
 * runs every backend (today: the CPU backend, in both weight modes where the
 * mode matters). Quantized weights are built by hand as ggml blocks; the
 * reference weight matrix is their rg_dequantize_row expansion (dequant.c
 * is tested bit-exactly against the gguf package by test_dequant).
 *
 * Tolerances are relative to the largest reference magnitude and differ by
 * kind of operation:
 *  - reductions (matmul, matmul_add, attention): float32 accumulation over K terms errs
 *    by about sqrt(K) * 2^-24 * |terms|, i.e. < 1e-5 for the sizes here;
 *    TOL leaves room for blocked sgemm orders and libm's expf (a few ulp)
 *    while a wrong index or a missing term gives errors of order 1;
 *  - elementwise operations (rmsnorm, swiglu, add, ablate, add_scaled,
 *    scale, rope) round each output a handful of times (each 2^-24 = 6e-8) or call
 *    libm once: TOL_ELEMENTWISE is 1e-6, so a slightly wrong formula, such
 *    as RMSNorm's eps added outside the square root (which moves the rows
 *    kept at a small scale below by several percent), fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "util/error.h"
#include "backend_cases.h"
#include "testlib.h"

static const double TOL = 1e-4, TOL_ELEMENTWISE = 1e-6;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* splitmix64 -> [-1, 1) */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}
static float *rand_f32(size_t n, double scale) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = (float)(urand() * scale);
  return v;
}

/* max |got - ref| / max(|ref|, tiny) */
static double rel_err(const float *got, const double *ref, size_t n) {
  double md = 0, mr = 1e-30;
  for (size_t i = 0; i < n; i++) {
    double d = fabs(got[i] - ref[i]);
    if (!(d <= md)) md = d; /* NaN propagates as a failure */
    if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
  }
  return md / mr;
}

static float *download(rg_backend *be, const rg_buf *b, size_t n) {
  float *v = malloc(n * sizeof *v);
  rg_buf_download(be, b, 0, v, n);
  return v;
}

/* ---------------------------------------------------------------- weights by hand */

typedef struct {
  rg_tensor t;
  void *bytes;
  float *ref; /* dequantized [rows, cols] */
} hand_weight;

static void put_f16(uint8_t *p, float f) {
  uint16_t h = rg_fp32_to_fp16(f);
  memcpy(p, &h, 2);
}

static hand_weight make_weight(int type, int64_t cols, int64_t rows) {
  hand_weight w = {0};
  size_t rb = rg_dtype_row_bytes(type, cols);
  assert_true(rb > 0);
  uint8_t *b = malloc(rb * rows);
  for (int64_t r = 0; r < rows; r++) {
    uint8_t *row = b + rb * r;
    switch (type) {
      case RG_F32:
        for (int64_t i = 0; i < cols; i++) ((float *)row)[i] = (float)urand();
        break;
      case RG_F16:
        for (int64_t i = 0; i < cols; i++) put_f16(row + 2 * i, (float)urand());
        break;
      case RG_BF16:
        for (int64_t i = 0; i < cols; i++) {
          uint16_t h = rg_fp32_to_bf16((float)urand());
          memcpy(row + 2 * i, &h, 2);
        }
        break;
      case RG_Q8_0: /* {f16 d, int8 qs[32]} */
        for (int64_t blk = 0; blk < cols / 32; blk++) {
          uint8_t *p = row + 34 * blk;
          put_f16(p, (float)(0.01 + 0.01 * fabs(urand())));
          for (int i = 0; i < 32; i++) p[2 + i] = (uint8_t)(int8_t)(urand() * 127);
        }
        break;
      case RG_Q4_0: /* {f16 d, u8 qs[16]} */
      case RG_Q4_1: /* {f16 d, f16 m, u8 qs[16]} */
        for (int64_t blk = 0; blk < cols / 32; blk++) {
          int hdr = type == RG_Q4_0 ? 2 : 4;
          uint8_t *p = row + (hdr + 16) * blk;
          put_f16(p, (float)(0.1 * fabs(urand()) + 0.01));
          if (type == RG_Q4_1) put_f16(p + 2, (float)(-0.8 * fabs(urand())));
          for (int i = 0; i < 16; i++) p[hdr + i] = (uint8_t)(urand() * 128 + 128);
        }
        break;
      default:
        fail_msg("no hand-made blocks for dtype %d", type);
    }
  }
  w.bytes = b;
  w.t = (rg_tensor){.name = "w", .type = type, .n_dims = 2, .ne = {cols, rows, 1, 1}, .data = b, .nbytes = rb * rows};
  w.ref = malloc((size_t)cols * rows * sizeof(float));
  for (int64_t r = 0; r < rows; r++) assert_int_equal(rg_dequantize_row(type, b + rb * r, w.ref + r * cols, cols), 0);
  return w;
}
static void free_weight(hand_weight *w) {
  free(w->bytes);
  free(w->ref);
}

/* ---------------------------------------------------------------- tests */

static void check_matmul(int type, int M, int64_t K, int64_t N, bool with_bias) {
  hand_weight w = make_weight(type, K, N);
  hand_weight b = make_weight(RG_F32, N, 1);
  float *x = rand_f32((size_t)M * K, 1.0);
  double *ref = malloc((size_t)M * N * sizeof *ref);
  for (int m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = with_bias ? b.ref[n] : 0;
      for (int64_t k = 0; k < K; k++) acc += (double)x[m * K + k] * w.ref[n * K + k];
      ref[m * N + n] = acc;
    }
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_bweight *bw = case_weight(be, bi, &w.t), *bb = with_bias ? case_weight(be, bi, &b.t) : NULL;
    assert_non_null(bw);
    rg_buf *xb = upload(be, x, (size_t)M * K), *yb = rg_buf_new(be, (size_t)M * N);
    rg_op_matmul(be, yb, xb, M, bw, bb);
    float *y = download(be, yb, (size_t)M * N);
    double e = rel_err(y, ref, (size_t)M * N);
    print_message("matmul %-5s %-9s M=%d K=%lld N=%lld: rel err %.2e\n", rg_dtype_get(type)->name,
                  BACKENDS[bi].name, M, (long long)K, (long long)N, e);
    assert_true(e < weight_tol(bi, TOL));
    free(y);
    /* rg_op_matmul_add (LoRA's y += u B^T) adds the same product again */
    double *twice = malloc((size_t)M * N * sizeof *twice);
    for (int m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) twice[m * N + n] = 2 * ref[m * N + n] - (with_bias ? b.ref[n] : 0);
    rg_op_matmul_add(be, yb, xb, M, bw);
    y = download(be, yb, (size_t)M * N);
    e = rel_err(y, twice, (size_t)M * N);
    print_message("matmul_add %-5s %-9s: rel err %.2e\n", rg_dtype_get(type)->name, BACKENDS[bi].name, e);
    assert_true(e < weight_tol(bi, TOL));
    free(y);
    free(twice);
    rg_buf_free(be, xb);
    rg_buf_free(be, yb);
    rg_bweight_free(be, bw);
    rg_bweight_free(be, bb);
    rg_backend_free(be);
  }
  free(x);
  free(ref);
  free_weight(&w);
  free_weight(&b);
}

static void test_matmul_all_dtypes(void **state) {
  const int types[] = {RG_F32, RG_F16, RG_BF16, RG_Q8_0, RG_Q4_0, RG_Q4_1};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    check_matmul(types[i], 5, 96, 37, false);
    check_matmul(types[i], 1, 64, 130, true); /* decode shape, with bias */
  }
}

/* The matmul path changes with the number of activation rows on a weight
 * in its file dtype: up to SKINNY_MAX_M (16) rows it is backend/cpu/skinny.c,
 * then backend/cpu/panel.c up to PANEL_MAX_M (512), above it dequantized
 * tiles and sgemm. Each side of both switches, a width with a tail of 8
 * (f16, 40 columns) and a ragged last block of rows. */
static void test_matmul_skinny_and_tiles(void **state) {
  check_matmul(RG_F16, 3, 40, 21, true);
  check_matmul(RG_Q4_1, 16, 64, 37, false);
  check_matmul(RG_Q4_1, 17, 64, 37, true);
  check_matmul(RG_Q4_1, 512, 64, 37, false);
  check_matmul(RG_Q4_1, 513, 64, 37, true);
}

/* A row's product does not depend on the other rows of its call: each of 16
 * rows multiplied alone (a decode step of one sequence) gives bitwise the
 * row of the 16-row product (a step of 16 sequences), on the file-dtype
 * path that decode steps take. */
static void test_matmul_batch_invariant(void **state) {
  if (!on_cpu()) { /* a GPU's BLAS may pick another algorithm for another row count */
    print_message("batch invariance: a CPU property, not checked on %s\n", BACKENDS[0].backend);
    return;
  }
  const int M = 16, K = 96, N = 45;
  hand_weight w = make_weight(RG_Q4_1, K, N);
  float *x = rand_f32((size_t)M * K, 1.0);
  rg_backend *be = new_backend(0);
  assert_int_equal(BACKENDS[0].form, RG_FORM_FILE);
  rg_bweight *bw = case_weight(be, 0, &w.t);
  rg_buf *xb = upload(be, x, (size_t)M * K), *yb = rg_buf_new(be, (size_t)M * N), *x1 = rg_buf_new(be, K),
         *y1 = rg_buf_new(be, N);
  rg_op_matmul(be, yb, xb, M, bw, NULL);
  float *all = download(be, yb, (size_t)M * N);
  for (int m = 0; m < M; m++) {
    rg_buf_upload(be, x1, 0, x + (size_t)m * K, K);
    rg_op_matmul(be, y1, x1, 1, bw, NULL);
    float *one = download(be, y1, N);
    if (memcmp(one, all + (size_t)m * N, N * sizeof *one) != 0) fail_msg("row %d alone differs from its batch", m);
    free(one);
  }
  free(all);
  free(x);
  rg_buf_free(be, xb);
  rg_buf_free(be, yb);
  rg_buf_free(be, x1);
  rg_buf_free(be, y1);
  rg_bweight_free(be, bw);
  rg_backend_free(be);
  free_weight(&w);
}

/* More rows than one 4M-float dequantization tile: several tiles + a ragged last one. */
static void test_matmul_many_tiles(void **state) { check_matmul(RG_Q4_1, 2, 64, 70001, false); }

static void test_embed(void **state) {
  const int types[] = {RG_F32, RG_Q8_0, RG_BF16};
  const int32_t ids[] = {3, 0, 17, 3, 9};
  const int n = 5, d = 64, vocab = 20;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    hand_weight w = make_weight(types[ti], d, vocab);
    double ref[5 * 64];
    for (int i = 0; i < n; i++)
      for (int j = 0; j < d; j++) ref[i * d + j] = w.ref[ids[i] * d + j];
    for (int bi = 0; bi < N_BACKENDS; bi++) {
      rg_backend *be = new_backend(bi);
      rg_bweight *bw = case_weight(be, bi, &w.t);
      rg_buf *o = rg_buf_new(be, (size_t)n * d);
      const int seq[5] = {0}, pos[5] = {0};
      rg_batch *bt = upload_batch(be, ids, seq, pos, n);
      rg_op_embed(be, o, bw, bt);
      rg_batch_free(be, bt);
      float *got = download(be, o, (size_t)n * d);
      assert_true(rel_err(got, ref, (size_t)n * d) == 0); /* a copy: exact */
      free(got);
      rg_buf_free(be, o);
      rg_bweight_free(be, bw);
      rg_backend_free(be);
    }
    free_weight(&w);
  }
}

static void test_rmsnorm_swiglu_add(void **state) {
  const int rows = 7, d = 96;
  const size_t n = (size_t)rows * d;
  const float eps = 1e-5f;
  hand_weight g = make_weight(RG_F32, d, 1);
  float *x = rand_f32(n, 3.0), *u = rand_f32(n, 2.0);
  /* Odd rows at a small scale, where mean(x^2) ~ 3e-6 is below eps: where
   * eps goes matters there. */
  for (int r = 1; r < rows; r += 2)
    for (int i = 0; i < d; i++) x[r * d + i] *= 1e-3f;
  double *r_norm = malloc(n * sizeof(double)), *r_sw = malloc(n * sizeof(double)), *r_add = malloc(n * sizeof(double));
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
    for (int i = 0; i < d; i++) r_norm[r * d + i] = x[r * d + i] / sqrt(ss / d + eps) * g.ref[i];
  }
  for (size_t i = 0; i < n; i++) {
    r_sw[i] = x[i] / (1 + exp(-(double)x[i])) * u[i];
    r_add[i] = (double)x[i] + u[i];
  }
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_bweight *gw = case_weight(be, bi, &g.t);
    rg_buf *xb = upload(be, x, n), *ub = upload(be, u, n), *y = rg_buf_new(be, n);
    rg_op_rmsnorm(be, y, xb, gw, rows, d, eps);
    float *got = download(be, y, n);
    const double e_norm = rel_err(got, r_norm, n);
    free(got);
    rg_op_swiglu(be, y, xb, ub, n);
    got = download(be, y, n);
    const double e_sw = rel_err(got, r_sw, n);
    free(got);
    rg_op_add(be, xb, xb, ub, n); /* in place */
    got = download(be, xb, n);
    const double e_add = rel_err(got, r_add, n);
    print_message("%s: rmsnorm %.2e, swiglu %.2e, add %.2e\n", BACKENDS[bi].name, e_norm, e_sw, e_add);
    assert_true(e_norm < TOL_ELEMENTWISE);
    assert_true(e_sw < TOL_ELEMENTWISE);
    assert_true(e_add < TOL_ELEMENTWISE);
    free(got);
    rg_buf_free(be, xb);
    rg_buf_free(be, ub);
    rg_buf_free(be, y);
    rg_bweight_free(be, gw);
    rg_backend_free(be);
  }
  free(x);
  free(u);
  free(r_norm);
  free(r_sw);
  free(r_add);
  free_weight(&g);
}

static void test_ablate_add_scaled(void **state) {
  const int rows = 6, d = 80;
  const size_t n = (size_t)rows * d;
  float *x = rand_f32(n, 2.0), *v = rand_f32(d, 1.0);
  double nn = 0;
  for (int i = 0; i < d; i++) nn += (double)v[i] * v[i];
  float *unit = malloc(d * sizeof *unit);
  for (int i = 0; i < d; i++) unit[i] = (float)(v[i] / sqrt(nn));
  double *r_abl = malloc(n * sizeof(double)), *r_add = malloc(n * sizeof(double));
  const float c = -1.5f;
  for (int r = 0; r < rows; r++) {
    double dot = 0;
    for (int i = 0; i < d; i++) dot += (double)x[r * d + i] * unit[i];
    for (int i = 0; i < d; i++) {
      r_abl[r * d + i] = x[r * d + i] - dot * unit[i];
      r_add[r * d + i] = x[r * d + i] + (double)c * v[i];
    }
  }
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *xb = upload(be, x, n), *ub = upload(be, unit, d), *vb = upload(be, v, d);
    rg_op_ablate(be, xb, rows, d, ub);
    float *got = download(be, xb, n);
    const double e_abl = rel_err(got, r_abl, n);
    print_message("%s: ablate %.2e\n", BACKENDS[bi].name, e_abl);
    assert_true(e_abl < TOL_ELEMENTWISE);
    /* and the result is orthogonal to the direction */
    for (int r = 0; r < rows; r++) {
      double dot = 0;
      for (int i = 0; i < d; i++) dot += (double)got[r * d + i] * unit[i];
      assert_true(fabs(dot) < 1e-5);
    }
    free(got);
    rg_buf_upload(be, xb, 0, x, n);
    rg_op_add_scaled(be, xb, rows, d, vb, c);
    got = download(be, xb, n);
    assert_true(rel_err(got, r_add, n) < TOL_ELEMENTWISE);
    free(got);
    /* rg_op_scale: x *= c, one rounding per element */
    double *r_scale = malloc(n * sizeof *r_scale);
    for (size_t i = 0; i < n; i++) r_scale[i] = (double)c * x[i];
    rg_buf_upload(be, xb, 0, x, n);
    rg_op_scale(be, xb, n, c);
    got = download(be, xb, n);
    assert_true(rel_err(got, r_scale, n) < TOL_ELEMENTWISE);
    free(got);
    free(r_scale);
    rg_buf_free(be, xb);
    rg_buf_free(be, ub);
    rg_buf_free(be, vb);
    rg_backend_free(be);
  }
  free(x);
  free(v);
  free(unit);
  free(r_abl);
  free(r_add);
}

static void test_rope(void **state) {
  const int nt = 5, nh = 3, hd = 16, half = hd / 2;
  const int pos[] = {0, 1, 7, 100, 3000};
  float inv[8];
  for (int i = 0; i < half; i++) inv[i] = (float)pow(10000.0, -2.0 * i / hd);
  const size_t n = (size_t)nt * nh * hd;
  float *x = rand_f32(n, 1.0);
  for (int adjacent = 0; adjacent < 2; adjacent++) {
    double *ref = malloc(n * sizeof *ref);
    for (int t = 0; t < nt; t++)
      for (int h = 0; h < nh; h++)
        for (int i = 0; i < half; i++) {
          size_t base = ((size_t)t * nh + h) * hd;
          size_t a = base + (adjacent ? 2 * i : i), b = base + (adjacent ? 2 * i + 1 : i + half);
          double ang = (double)((float)pos[t] * inv[i]); /* the angle in float, as transformers */
          ref[a] = x[a] * cos(ang) - x[b] * sin(ang);
          ref[b] = x[b] * cos(ang) + x[a] * sin(ang);
        }
    for (int bi = 0; bi < N_BACKENDS; bi++) {
      rg_backend *be = new_backend(bi);
      rg_buf *xb = upload(be, x, n), *ib = upload(be, inv, (size_t)half);
      const int seq[5] = {0};
      rg_batch *bt = upload_batch(be, NULL, seq, pos, nt);
      rg_op_rope(be, xb, bt, nh, hd, ib, adjacent);
      float *got = download(be, xb, n);
      const double e = rel_err(got, ref, n);
      print_message("rope %s %s: rel err %.2e\n", adjacent ? "adjacent" : "half", BACKENDS[bi].name, e);
      assert_true(e < TOL_ELEMENTWISE);
      free(got);
      rg_batch_free(be, bt);
      rg_buf_free(be, ib);
      rg_buf_free(be, xb);
      rg_backend_free(be);
    }
    free(ref);
  }
  free(x);
}

/* Ragged batch of two sequences (one continuing an earlier call), GQA with
 * 4 query heads on 2 kv heads, with and without a sliding window. */
static void test_attention(void **state) {
  enum { NH = 4, NKV = 2, HD = 8, MAXC = 12, NSEQ = 3 };
  const int kvd = NKV * HD, qd = NH * HD;
  /* call 1: seq 2 gets positions 0..3; call 2: seq 0 gets 0..4, seq 2 gets 4..6 (interleaved) */
  const int seq1[] = {2, 2, 2, 2}, pos1[] = {0, 1, 2, 3};
  const int seq2[] = {0, 2, 0, 0, 2, 0, 2, 0}, pos2[] = {0, 4, 1, 2, 5, 3, 6, 4};
  const int n1 = 4, n2 = 8;
  float *k1 = rand_f32((size_t)n1 * kvd, 1.0), *v1 = rand_f32((size_t)n1 * kvd, 1.0);
  float *k2 = rand_f32((size_t)n2 * kvd, 1.0), *v2 = rand_f32((size_t)n2 * kvd, 1.0);
  float *q2 = rand_f32((size_t)n2 * qd, 2.0);
  /* host copy of the cache for the reference */
  static float kc[NSEQ][MAXC][NKV * HD], vc[NSEQ][MAXC][NKV * HD];
  for (int t = 0; t < n1; t++) {
    memcpy(kc[seq1[t]][pos1[t]], k1 + t * kvd, kvd * sizeof(float));
    memcpy(vc[seq1[t]][pos1[t]], v1 + t * kvd, kvd * sizeof(float));
  }
  for (int t = 0; t < n2; t++) {
    memcpy(kc[seq2[t]][pos2[t]], k2 + t * kvd, kvd * sizeof(float));
    memcpy(vc[seq2[t]][pos2[t]], v2 + t * kvd, kvd * sizeof(float));
  }
  const int windows[] = {0, 3};
  for (int wi = 0; wi < 2; wi++) {
    const int W = windows[wi];
    double *ref = calloc((size_t)n2 * qd, sizeof *ref), ref_lse[8 * NH];
    for (int t = 0; t < n2; t++)
      for (int h = 0; h < NH; h++) {
        int s = seq2[t], p = pos2[t], g = h / (NH / NKV);
        double sc[MAXC], mx = -1e300, sum = 0;
        for (int j = 0; j <= p; j++) {
          bool visible = W == 0 || j > p - W;
          double dot = 0;
          for (int i = 0; i < HD; i++) dot += (double)q2[t * qd + h * HD + i] * kc[s][j][g * HD + i];
          sc[j] = visible ? dot / sqrt(HD) : -INFINITY;
          if (sc[j] > mx) mx = sc[j];
        }
        for (int j = 0; j <= p; j++) sum += sc[j] = exp(sc[j] - mx);
        ref_lse[t * NH + h] = mx + log(sum);
        for (int j = 0; j <= p; j++)
          for (int i = 0; i < HD; i++) ref[t * qd + h * HD + i] += sc[j] / sum * vc[s][j][g * HD + i];
      }
    for (int bi = 0; bi < N_BACKENDS; bi++) {
      rg_backend *be = new_backend(bi);
      rg_buf *kcb = rg_buf_new(be, (size_t)NSEQ * MAXC * kvd), *vcb = rg_buf_new(be, (size_t)NSEQ * MAXC * kvd);
      rg_buf *kb = upload(be, k1, (size_t)n1 * kvd), *vb = upload(be, v1, (size_t)n1 * kvd);
      rg_batch *b1 = upload_batch(be, NULL, seq1, pos1, n1), *b2 = upload_batch(be, NULL, seq2, pos2, n2);
      rg_attn_desc a1 = {b1, NH, NKV, HD, W, MAXC};
      rg_op_kv_store(be, kcb, vcb, kb, vb, &a1);
      rg_buf_free(be, kb);
      rg_buf_free(be, vb);
      kb = upload(be, k2, (size_t)n2 * kvd);
      vb = upload(be, v2, (size_t)n2 * kvd);
      rg_attn_desc a2 = {b2, NH, NKV, HD, W, MAXC};
      rg_op_kv_store(be, kcb, vcb, kb, vb, &a2);
      rg_buf *qb = upload(be, q2, (size_t)n2 * qd), *ob = rg_buf_new(be, (size_t)n2 * qd);
      rg_buf *lb = rg_buf_new(be, (size_t)n2 * NH);
      rg_op_attention(be, ob, lb, qb, kcb, vcb, &a2);
      float *got = download(be, ob, (size_t)n2 * qd), *got_lse = download(be, lb, (size_t)n2 * NH);
      double e = rel_err(got, ref, (size_t)n2 * qd), e_lse = rel_err(got_lse, ref_lse, (size_t)n2 * NH);
      print_message("attention window %d %s: rel err %.2e, log-sum-exp %.2e\n", W, BACKENDS[bi].name, e, e_lse);
      assert_true(e < TOL);
      assert_true(e_lse < TOL);
      free(got);
      free(got_lse);
      rg_buf *bufs[] = {kcb, vcb, kb, vb, qb, ob, lb};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
      rg_batch_free(be, b1);
      rg_batch_free(be, b2);
      rg_backend_free(be);
    }
    free(ref);
  }
  free(k1);
  free(v1);
  free(k2);
  free(v2);
  free(q2);
}

static void test_gather_rows(void **state) {
  const int w = 10, rows[] = {4, 0, 4, 2};
  float *x = rand_f32(5 * 10, 1.0);
  double ref[40];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < w; j++) ref[i * w + j] = x[rows[i] * w + j];
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *src = upload(be, x, 50), *dst = rg_buf_new(be, 40);
    rg_buf_gather_rows(be, dst, src, rows, 4, w);
    float *got = download(be, dst, 40);
    assert_true(rel_err(got, ref, 40) == 0);
    free(got);
    rg_buf_free(be, src);
    rg_buf_free(be, dst);
    rg_backend_free(be);
  }
  free(x);
}

/* A column block of a [6, 10] matrix (columns 3..6) into a packed [6, 4]
 * buffer at offset 5, and back into columns 1..4 of a zeroed [6, 8]: the
 * copies Ulysses packs head blocks with (sp_attention.c). */
static void test_buf_copy_rows(void **state) {
  float *x = rand_f32(60, 1.0);
  double packed_ref[5 + 24] = {0}, back_ref[48] = {0};
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) packed_ref[5 + i * 4 + j] = back_ref[i * 8 + 1 + j] = x[i * 10 + 3 + j];
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *src = upload(be, x, 60), *packed = rg_buf_new(be, 29), *back = rg_buf_new(be, 48);
    rg_buf_copy_rows(be, packed, 5, 4, src, 3, 10, 6, 4);
    rg_buf_copy_rows(be, back, 1, 8, packed, 5, 4, 6, 4);
    float *got = download(be, packed, 29), *got_back = download(be, back, 48);
    assert_true(rel_err(got, packed_ref, 29) == 0);
    assert_true(rel_err(got_back, back_ref, 48) == 0);
    free(got), free(got_back);
    rg_buf_free(be, src), rg_buf_free(be, packed), rg_buf_free(be, back);
    rg_backend_free(be);
  }
  free(x);
}

static void test_weight_errors(void **state) {
  const int bi = 0;
  rg_backend *be = new_backend(bi);
  uint8_t bytes[64] = {0};
  rg_tensor short_t = {.name = "short", .type = RG_F32, .n_dims = 2, .ne = {8, 4, 1, 1}, .data = bytes, .nbytes = 64};
  assert_null(case_weight(be, bi, &short_t)); /* 128 bytes needed */
  assert_non_null(strstr(rg_error_get(), "short"));
  rg_tensor bad_type = {.name = "odd", .type = 37, .n_dims = 1, .ne = {8, 1, 1, 1}, .data = bytes, .nbytes = 64};
  assert_null(case_weight(be, bi, &bad_type));
  rg_tensor partial = {.name = "q", .type = RG_Q8_0, .n_dims = 1, .ne = {20, 1, 1, 1}, .data = bytes, .nbytes = 64};
  assert_null(case_weight(be, bi, &partial)); /* 20 is not a whole number of 32-blocks */
  rg_backend_free(be);
}

int main(void) {
  select_backends();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_all_dtypes), cmocka_unit_test(test_matmul_many_tiles),
      cmocka_unit_test(test_matmul_skinny_and_tiles), cmocka_unit_test(test_matmul_batch_invariant),
      cmocka_unit_test(test_embed),             cmocka_unit_test(test_rmsnorm_swiglu_add),
      cmocka_unit_test(test_ablate_add_scaled), cmocka_unit_test(test_rope),
      cmocka_unit_test(test_attention),         cmocka_unit_test(test_gather_rows),
      cmocka_unit_test(test_buf_copy_rows),     cmocka_unit_test(test_weight_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
