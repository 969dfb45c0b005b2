/* test_backend_grad.c: every gradient operation of backend.h against torch
 * autograd (tests/fixtures/grad/grad_ops.json, written by
 * tools/reference/make_grad_fixtures.py in float64 from float32 inputs), on
 * every backend (today the CPU backend in both weight modes).
 *
 * Every accumulating operation starts from gradient buffers filled with
 * PRE = 0.5 instead of zero, and must end at PRE + torch's gradient: that
 * checks the "adds into" contract of backend.h along with the values.
 *
 * Tolerance: relative to the largest reference magnitude, as in
 * test_backend.c. The C code accumulates in float32 over at most a few dozen
 * terms of magnitude ~1-10 (errors ~1e-6 relative); 1e-4 still catches any
 * wrong index, sign or missing term (errors of order 1e-1 and more).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "backend_cases.h"
#include "testlib.h"

static const double TOL = 1e-4;
static const float PRE = 0.5f;

static cJSON *cases;

static int setup(void **state) {
  cases = t_read_json_fixture("grad/grad_ops.json");
  return 0;
}
static int teardown(void **state) {
  cJSON_Delete(cases);
  return 0;
}

/* ---------------------------------------------------------------- fixture access */

static const cJSON *item(const cJSON *c, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(c, key);
  if (!v) fail_msg("grad_ops.json: missing '%s'", key);
  return v;
}
static int geti(const cJSON *c, const char *key) { return item(c, key)->valueint; }

/* A number array as malloc'd floats (f32 inputs) or doubles (references). */
static float *farr(const cJSON *c, const char *key, size_t *n) {
  const cJSON *a = item(c, key);
  size_t len = (size_t)cJSON_GetArraySize(a);
  float *v = malloc((len ? len : 1) * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < len; i++) v[i] = (float)cJSON_GetArrayItem(a, (int)i)->valuedouble;
  if (n) *n = len;
  return v;
}
static double *darr(const cJSON *c, const char *key, size_t *n) {
  const cJSON *a = item(c, key);
  size_t len = (size_t)cJSON_GetArraySize(a);
  double *v = malloc((len ? len : 1) * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < len; i++) v[i] = cJSON_GetArrayItem(a, (int)i)->valuedouble;
  if (n) *n = len;
  return v;
}
static int *iarr(const cJSON *c, const char *key) {
  const cJSON *a = item(c, key);
  int len = cJSON_GetArraySize(a);
  int *v = malloc((size_t)(len ? len : 1) * sizeof *v);
  assert_non_null(v);
  for (int i = 0; i < len; i++) v[i] = cJSON_GetArrayItem(a, i)->valueint;
  return v;
}

/* ---------------------------------------------------------------- buffers */

/* A gradient buffer pre-filled with PRE. */
static rg_buf *grad_buf(rg_backend *be, size_t n) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = PRE;
  rg_buf *b = upload(be, v, n);
  free(v);
  return b;
}

/* Downloads B and returns max |got - (pre + ref)| / max |ref|. */
static double err_vs(rg_backend *be, const rg_buf *b, const double *ref, size_t n, float pre) {
  float *got = malloc(n * sizeof *got);
  rg_buf_download(be, b, 0, got, n);
  double md = 0, mr = 1e-30;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (pre + ref[i]));
    if (!(d <= md)) md = d; /* NaN fails */
    if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
  }
  free(got);
  return md / mr;
}

static void expect_within(const char *op, const char *what, const char *backend, double e, double tol) {
  print_message("%-18s %-6s %-9s rel err %.2e\n", op, what, backend, e);
  if (!(e < tol)) fail_msg("%s %s on %s: rel err %.3e >= %.0e", op, what, backend, e, tol);
}
static void expect(const char *op, const char *what, const char *backend, double e) {
  expect_within(op, what, backend, e, TOL);
}

static rg_tensor f32_tensor(const char *name, float *data, int64_t cols, int64_t rows) {
  return (rg_tensor){.name = (char *)name, .type = RG_F32, .n_dims = rows > 1 ? 2 : 1, .ne = {cols, rows, 1, 1},
                     .data = data, .nbytes = (size_t)(cols * rows) * sizeof(float)};
}

/* ---------------------------------------------------------------- tests */

static void test_matmul_backward(void **state) {
  const cJSON *c = item(cases, "matmul");
  const int M = geti(c, "M"), K = geti(c, "K"), N = geti(c, "N");
  float *x = farr(c, "x", NULL), *w = farr(c, "w", NULL), *bias = farr(c, "bias", NULL), *dy = farr(c, "dy", NULL);
  double *dx = darr(c, "dx", NULL), *dw = darr(c, "dw", NULL), *db = darr(c, "dbias", NULL);
  rg_tensor wt = f32_tensor("w", w, K, N);
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_bweight *bw = case_weight(be, bi, &wt);
    assert_non_null(bw);
    rg_buf *xb = upload(be, x, (size_t)M * K), *dyb = upload(be, dy, (size_t)M * N);
    rg_buf *dxb = grad_buf(be, (size_t)M * K), *dwb = grad_buf(be, (size_t)N * K), *dbb = grad_buf(be, (size_t)N);
    rg_op_matmul_backward(be, dxb, dwb, dbb, dyb, xb, M, bw);
    expect("matmul_backward", "dx", BACKENDS[bi].name, err_vs(be, dxb, dx, (size_t)M * K, PRE));
    expect("matmul_backward", "dw", BACKENDS[bi].name, err_vs(be, dwb, dw, (size_t)N * K, PRE));
    expect("matmul_backward", "dbias", BACKENDS[bi].name, err_vs(be, dbb, db, (size_t)N, PRE));
    /* NULL outputs are skipped: dx alone */
    rg_buf_zero(be, dxb, 0, (size_t)M * K);
    rg_op_matmul_backward(be, dxb, NULL, NULL, dyb, xb, M, bw);
    expect("matmul_backward", "dx only", BACKENDS[bi].name, err_vs(be, dxb, dx, (size_t)M * K, 0));
    rg_buf *bufs[] = {xb, dyb, dxb, dwb, dbb};
    for (size_t i = 0; i < 5; i++) rg_buf_free(be, bufs[i]);
    rg_bweight_free(be, bw);
    rg_backend_free(be);
  }
  free(x), free(w), free(bias), free(dy), free(dx), free(dw), free(db);
}

/* dx through a bf16 weight: the tiled backend dequantizes shared row tiles
 * (here several, the weight being larger than one tile per thread) and must
 * agree with the f32 copy of the same weight, whose path torch checks
 * above. bf16 rounding happens once, in the weight, so both paths multiply
 * the same numbers; the tolerance is the float32 one. */
static void test_matmul_backward_tiled_bf16(void **state) {
  const int M = 3, K = 64, N = 40000; /* 2.56M floats > 2 threads x 1M-float tiles */
  uint16_t *wb = malloc((size_t)N * K * sizeof *wb);
  float *dy = malloc((size_t)M * N * sizeof *dy);
  uint64_t z = 12345;
  for (size_t i = 0; i < (size_t)N * K; i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    wb[i] = rg_fp32_to_bf16((float)((double)(z >> 40) / (1 << 24) - 0.5));
  }
  for (size_t i = 0; i < (size_t)M * N; i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    dy[i] = (float)((double)(z >> 40) / (1 << 24) - 0.5);
  }
  rg_tensor t = {.name = "w_bf16", .type = RG_BF16, .n_dims = 2, .ne = {K, N, 1, 1}, .data = wb,
                 .nbytes = (size_t)N * K * 2};
  float *got[N_BACKENDS];
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_bweight *bw = case_weight(be, bi, &t);
    assert_non_null(bw);
    rg_buf *dyb = upload(be, dy, (size_t)M * N), *dxb = rg_buf_new(be, (size_t)M * K);
    rg_op_matmul_backward(be, dxb, NULL, NULL, dyb, NULL, M, bw);
    got[bi] = malloc((size_t)M * K * sizeof(float));
    rg_buf_download(be, dxb, 0, got[bi], (size_t)M * K);
    rg_buf_free(be, dyb), rg_buf_free(be, dxb);
    rg_bweight_free(be, bw);
    rg_backend_free(be);
  }
  double md = 0, mr = 1e-30;
  for (int i = 0; i < M * K; i++) {
    md = fmax(md, fabs((double)got[0][i] - got[1][i]));
    mr = fmax(mr, fabs((double)got[1][i]));
  }
  /* sums of 40000 terms: float32 order effects ~ sqrt(N) 2^-24 relative;
   * a GPU's bf16 product rounds dy to bf16 as well (backend_cases.h) */
  expect_within("matmul_backward", "bf16 file form vs f32", BACKENDS[0].backend, md / mr, weight_tol(0, TOL));
  free(got[0]), free(got[1]), free(wb), free(dy);
}

static void test_rmsnorm_backward(void **state) {
  const cJSON *c = item(cases, "rmsnorm");
  const int rows = geti(c, "rows"), d = geti(c, "d");
  const float eps = (float)item(c, "eps")->valuedouble;
  float *x = farr(c, "x", NULL), *w = farr(c, "w", NULL), *dy = farr(c, "dy", NULL);
  double *dx = darr(c, "dx", NULL), *dw = darr(c, "dw", NULL);
  rg_tensor wt = f32_tensor("norm", w, d, 1);
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_bweight *bw = case_weight(be, bi, &wt);
    rg_buf *xb = upload(be, x, (size_t)rows * d), *dyb = upload(be, dy, (size_t)rows * d);
    rg_buf *dxb = grad_buf(be, (size_t)rows * d), *dwb = grad_buf(be, (size_t)d);
    rg_op_rmsnorm_backward(be, dxb, dwb, dyb, xb, bw, rows, d, eps);
    expect("rmsnorm_backward", "dx", BACKENDS[bi].name, err_vs(be, dxb, dx, (size_t)rows * d, PRE));
    expect("rmsnorm_backward", "dw", BACKENDS[bi].name, err_vs(be, dwb, dw, (size_t)d, PRE));
    rg_buf_free(be, xb), rg_buf_free(be, dyb), rg_buf_free(be, dxb), rg_buf_free(be, dwb);
    rg_bweight_free(be, bw);
    rg_backend_free(be);
  }
  free(x), free(w), free(dy), free(dx), free(dw);
}

static void test_rope_backward(void **state) {
  const cJSON *list = item(cases, "rope");
  for (int ci = 0; ci < cJSON_GetArraySize(list); ci++) {
    const cJSON *c = cJSON_GetArrayItem(list, ci);
    const int T = geti(c, "n_tokens"), nh = geti(c, "n_heads"), hd = geti(c, "head_dim");
    const bool adjacent = cJSON_IsTrue(item(c, "adjacent"));
    const size_t n = (size_t)T * nh * hd;
    int *pos = iarr(c, "pos");
    float *inv_freq = farr(c, "inv_freq", NULL), *x = farr(c, "x", NULL), *dy = farr(c, "dy", NULL);
    double *y = darr(c, "y", NULL), *dx = darr(c, "dx", NULL);
    const char *what = adjacent ? "adjacent" : "half";
    for (int bi = 0; bi < N_BACKENDS; bi++) {
      rg_backend *be = new_backend(bi);
      rg_buf *xb = upload(be, x, n), *gb = upload(be, dy, n), *ib = upload(be, inv_freq, (size_t)hd / 2);
      int *seq = calloc((size_t)T, sizeof *seq);
      rg_batch *bt = upload_batch(be, NULL, seq, pos, T);
      rg_op_rope(be, xb, bt, nh, hd, ib, adjacent);
      expect("rope (forward)", what, BACKENDS[bi].name, err_vs(be, xb, y, n, 0));
      rg_op_rope_backward(be, gb, bt, nh, hd, ib, adjacent);
      expect("rope_backward", what, BACKENDS[bi].name, err_vs(be, gb, dx, n, 0));
      rg_buf_free(be, xb), rg_buf_free(be, gb), rg_buf_free(be, ib);
      rg_batch_free(be, bt);
      free(seq);
      rg_backend_free(be);
    }
    free(pos), free(inv_freq), free(x), free(dy), free(y), free(dx);
  }
}

static void test_swiglu_backward(void **state) {
  const cJSON *c = item(cases, "swiglu");
  const size_t n = (size_t)geti(c, "n");
  float *g = farr(c, "gate", NULL), *u = farr(c, "up", NULL), *dy = farr(c, "dy", NULL);
  double *dg = darr(c, "dgate", NULL), *du = darr(c, "dup", NULL);
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *gb = upload(be, g, n), *ub = upload(be, u, n), *dyb = upload(be, dy, n);
    rg_buf *dgb = grad_buf(be, n), *dub = grad_buf(be, n);
    rg_op_swiglu_backward(be, dgb, dub, dyb, gb, ub, n);
    expect("swiglu_backward", "dgate", BACKENDS[bi].name, err_vs(be, dgb, dg, n, PRE));
    expect("swiglu_backward", "dup", BACKENDS[bi].name, err_vs(be, dub, du, n, PRE));
    rg_buf *bufs[] = {gb, ub, dyb, dgb, dub};
    for (size_t i = 0; i < 5; i++) rg_buf_free(be, bufs[i]);
    rg_backend_free(be);
  }
  free(g), free(u), free(dy), free(dg), free(du);
}

static void test_attention_backward(void **state) {
  const cJSON *list = item(cases, "attention");
  for (int ci = 0; ci < cJSON_GetArraySize(list); ci++) {
    const cJSON *c = cJSON_GetArrayItem(list, ci);
    const int nh = geti(c, "n_heads"), nkv = geti(c, "n_kv_heads"), hd = geti(c, "head_dim");
    const int T = cJSON_GetArraySize(item(c, "seq"));
    int *seq = iarr(c, "seq"), *pos = iarr(c, "pos");
    int max_ctx = 0, n_seqs = 0;
    for (int t = 0; t < T; t++) {
      if (pos[t] + 1 > max_ctx) max_ctx = pos[t] + 1;
      if (seq[t] + 1 > n_seqs) n_seqs = seq[t] + 1;
    }
    rg_attn_desc ad = {.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .window = geti(c, "window"),
                       .max_ctx = max_ctx};
    const size_t qn = (size_t)T * nh * hd, kn = (size_t)T * nkv * hd, cache = (size_t)n_seqs * max_ctx * nkv * hd;
    float *q = farr(c, "q", NULL), *k = farr(c, "k", NULL), *v = farr(c, "v", NULL), *dy = farr(c, "dy", NULL);
    double *y = darr(c, "y", NULL), *dq = darr(c, "dq", NULL), *dk = darr(c, "dk", NULL), *dv = darr(c, "dv", NULL);
    double *lse_ref = darr(c, "lse", NULL);
    char what[64];
    snprintf(what, sizeof what, "win %d, %d tokens", ad.window, T);
    for (int bi = 0; bi < N_BACKENDS; bi++) {
      rg_backend *be = new_backend(bi);
      rg_buf *qb = upload(be, q, qn), *kb = upload(be, k, kn), *vb = upload(be, v, kn), *dyb = upload(be, dy, qn);
      rg_buf *kc = rg_buf_new(be, cache), *vc = rg_buf_new(be, cache), *out = rg_buf_new(be, qn);
      rg_buf *lse = rg_buf_new(be, (size_t)T * nh);
      rg_buf *dkc = rg_buf_new(be, cache), *dvc = rg_buf_new(be, cache);
      rg_buf *dqb = grad_buf(be, qn), *dkb = grad_buf(be, kn), *dvb = grad_buf(be, kn);
      rg_batch *bt = upload_batch(be, NULL, seq, pos, T);
      ad.batch = bt;
      rg_op_kv_store(be, kc, vc, kb, vb, &ad);
      rg_op_attention(be, out, lse, qb, kc, vc, &ad);
      expect("attention (fwd)", what, BACKENDS[bi].name, err_vs(be, out, y, qn, 0));
      expect("attention (lse)", what, BACKENDS[bi].name, err_vs(be, lse, lse_ref, (size_t)T * nh, 0));
      rg_op_attention_backward(be, dqb, dkc, dvc, dyb, qb, out, lse, kc, vc, &ad);
      rg_op_kv_store_backward(be, dkb, dvb, dkc, dvc, &ad);
      expect("attention_backward", "dq", BACKENDS[bi].name, err_vs(be, dqb, dq, qn, PRE));
      expect("attention_backward", "dk", BACKENDS[bi].name, err_vs(be, dkb, dk, kn, PRE));
      expect("attention_backward", "dv", BACKENDS[bi].name, err_vs(be, dvb, dv, kn, PRE));
      /* kv_store_backward leaves the cache-shaped gradients zero (the
       * backward pass zeroes them once, not per layer) */
      float *left = malloc(2 * cache * sizeof *left);
      rg_buf_download(be, dkc, 0, left, cache);
      rg_buf_download(be, dvc, 0, left + cache, cache);
      for (size_t i = 0; i < 2 * cache; i++) assert_true(left[i] == 0.0f);
      free(left);
      rg_buf *bufs[] = {qb, kb, vb, dyb, kc, vc, out, lse, dkc, dvc, dqb, dkb, dvb};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
      rg_batch_free(be, bt);
      rg_backend_free(be);
    }
    free(seq), free(pos), free(q), free(k), free(v), free(dy), free(y), free(dq), free(dk), free(dv), free(lse_ref);
  }
}

/* The GPU backend against the CPU backend (itself checked against torch
 * above) on a batch long enough for several of the GPU's query blocks (16
 * tokens) and key tiles (up to 32 keys): two sequences of 45 and 70 tokens
 * interleaved in the batch, 6 query heads on 2 KV heads of 32, with and
 * without a window of 17. Both sum float32 products over at most 70 keys in
 * different orders: 1e-4 as above. On the CPU this compares the CPU with
 * itself, so it runs only on a GPU. */
static void test_attention_long_vs_cpu(void **state) {
  if (on_cpu()) return;
  enum { NH = 6, NKV = 2, HD = 32, A = 45, B = 70, T = A + B };
  const int qd = NH * HD, kvd = NKV * HD, max_ctx = B;
  int seq[T], pos[T];
  for (int t = 0, a = 0, b = 0; t < T; t++) { /* interleaved: a, b, b, a, b, b, ... until a runs out */
    const bool take_a = a < A && (t % 3 == 0 || b == B);
    seq[t] = take_a ? 1 : 0;
    pos[t] = take_a ? a++ : b++;
  }
  uint64_t z = 99;
  float *in = malloc((size_t)T * (2 * qd + 2 * kvd) * sizeof *in);
  for (size_t i = 0; i < (size_t)T * (2 * qd + 2 * kvd); i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((double)(z >> 40) / (1 << 23) - 1.0);
  }
  float *q = in, *dy = q + (size_t)T * qd, *k = dy + (size_t)T * qd, *v = k + (size_t)T * kvd;
  const size_t cache = (size_t)2 * max_ctx * kvd, qn = (size_t)T * qd, kn = (size_t)T * kvd;
  const int windows[] = {0, 17};
  for (int wi = 0; wi < 2; wi++) {
    float *res[2];
    for (int side = 0; side < 2; side++) { /* 0: the CPU, 1: this backend */
      rg_backend_opts o = {.name = side == 0 ? "cpu" : BACKENDS[1].backend, .threads = 2};
      rg_backend *be = rg_backend_new(&o);
      assert_non_null(be);
      rg_buf *qb = upload(be, q, qn), *kb = upload(be, k, kn), *vb = upload(be, v, kn), *dyb = upload(be, dy, qn);
      rg_buf *kc = rg_buf_new(be, cache), *vc = rg_buf_new(be, cache), *out = rg_buf_new(be, qn);
      rg_buf *lse = rg_buf_new(be, (size_t)T * NH), *dkc = rg_buf_new(be, cache), *dvc = rg_buf_new(be, cache);
      rg_buf *dqb = rg_buf_new(be, qn), *dkb = rg_buf_new(be, kn), *dvb = rg_buf_new(be, kn);
      rg_batch *bt = upload_batch(be, NULL, seq, pos, T);
      rg_attn_desc ad = {.batch = bt, .n_heads = NH, .n_kv_heads = NKV, .head_dim = HD, .window = windows[wi],
                         .max_ctx = max_ctx};
      rg_op_kv_store(be, kc, vc, kb, vb, &ad);
      rg_op_attention(be, out, lse, qb, kc, vc, &ad);
      rg_op_attention_backward(be, dqb, dkc, dvc, dyb, qb, out, lse, kc, vc, &ad);
      rg_op_kv_store_backward(be, dkb, dvb, dkc, dvc, &ad);
      res[side] = malloc((2 * qn + 2 * kn) * sizeof(float));
      rg_buf_download(be, out, 0, res[side], qn);
      rg_buf_download(be, dqb, 0, res[side] + qn, qn);
      rg_buf_download(be, dkb, 0, res[side] + 2 * qn, kn);
      assert_int_equal(rg_buf_download(be, dvb, 0, res[side] + 2 * qn + kn, kn), 0);
      rg_buf *bufs[] = {qb, kb, vb, dyb, kc, vc, out, lse, dkc, dvc, dqb, dkb, dvb};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rg_buf_free(be, bufs[i]);
      rg_batch_free(be, bt);
      rg_backend_free(be);
    }
    static const char *const NAMES[] = {"out", "dq", "dk", "dv"};
    const size_t at[] = {0, qn, 2 * qn, 2 * qn + kn, 2 * qn + 2 * kn};
    for (int part = 0; part < 4; part++) {
      double md = 0, mr = 1e-30;
      for (size_t i = at[part]; i < at[part + 1]; i++) {
        const double d = fabs((double)res[1][i] - res[0][i]);
        if (!(d <= md)) md = d;
        mr = fmax(mr, fabs((double)res[0][i]));
      }
      char what[48];
      snprintf(what, sizeof what, "%s, window %d, vs cpu", NAMES[part], windows[wi]);
      expect("attention 115 tok", what, BACKENDS[1].backend, md / mr);
    }
    free(res[0]), free(res[1]);
  }
  free(in);
}

static void test_embed_backward(void **state) {
  const cJSON *c = item(cases, "embed");
  const int vocab = geti(c, "vocab"), d = geti(c, "d"), n = cJSON_GetArraySize(item(c, "ids"));
  int *ids_i = iarr(c, "ids");
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  for (int i = 0; i < n; i++) ids[i] = ids_i[i];
  float *dy = farr(c, "dy", NULL);
  double *dw = darr(c, "dw", NULL);
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *dyb = upload(be, dy, (size_t)n * d), *dwb = grad_buf(be, (size_t)vocab * d);
    int *seq = calloc((size_t)n, sizeof *seq), *pos = calloc((size_t)n, sizeof *pos);
    rg_batch *bt = upload_batch(be, ids, seq, pos, n);
    rg_op_embed_backward(be, dwb, dyb, bt, d);
    rg_batch_free(be, bt);
    free(seq), free(pos);
    expect("embed_backward", "dw", BACKENDS[bi].name, err_vs(be, dwb, dw, (size_t)vocab * d, PRE));
    rg_buf_free(be, dyb), rg_buf_free(be, dwb);
    rg_backend_free(be);
  }
  free(ids_i), free(ids), free(dy), free(dw);
}

/* A per-row loss operation (cross entropy, or the away loss when
 * UNLIKELIHOOD) on case C: its losses and its added dlogits against the
 * reference. */
static void check_row_loss(const char *op, const cJSON *c, bool unlikelihood) {
  const int rows = geti(c, "rows"), vocab = geti(c, "vocab");
  const float log_p_min = unlikelihood ? (float)item(c, "log_p_min")->valuedouble : 0.0f;
  int *t_i = iarr(c, "targets");
  int32_t *targets = malloc((size_t)rows * sizeof *targets);
  for (int i = 0; i < rows; i++) targets[i] = t_i[i];
  float *logits = farr(c, "logits", NULL), *scale = farr(c, "scale", NULL);
  double *losses = darr(c, "losses", NULL), *dl = darr(c, "dlogits", NULL);
  for (int bi = 0; bi < N_BACKENDS; bi++) {
    rg_backend *be = new_backend(bi);
    rg_buf *lb = upload(be, logits, (size_t)rows * vocab), *lossb = rg_buf_new(be, (size_t)rows);
    rg_buf *dlb = grad_buf(be, (size_t)rows * vocab);
    if (unlikelihood)
      rg_op_unlikelihood(be, lossb, dlb, lb, targets, scale, rows, vocab, log_p_min);
    else
      rg_op_cross_entropy(be, lossb, dlb, lb, targets, scale, rows, vocab);
    expect(op, "losses", BACKENDS[bi].name, err_vs(be, lossb, losses, (size_t)rows, 0));
    expect(op, "dlogits", BACKENDS[bi].name, err_vs(be, dlb, dl, (size_t)rows * vocab, PRE));
    rg_buf_free(be, lb), rg_buf_free(be, lossb), rg_buf_free(be, dlb);
    rg_backend_free(be);
  }
  free(t_i), free(targets), free(logits), free(scale), free(losses), free(dl);
}

static void test_cross_entropy(void **state) { check_row_loss("cross_entropy", item(cases, "cross_entropy"), false); }

/* The away loss's operation, against HarmBench's log_1_minus_p_loss per row
 * (grad/unlikelihood.json from tools/reference/make_r2d2_loss_fixtures.py):
 * two rows below the threshold (loss 0, no gradient), one with p near 1,
 * one with scale 0. */
static void test_unlikelihood(void **state) {
  cJSON *c = t_read_json_fixture("grad/unlikelihood.json");
  check_row_loss("unlikelihood", c, true);
  cJSON_Delete(c);
}

int main(void) {
  select_backends();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_backward),   cmocka_unit_test(test_matmul_backward_tiled_bf16),
      cmocka_unit_test(test_rmsnorm_backward),  cmocka_unit_test(test_rope_backward),
      cmocka_unit_test(test_swiglu_backward),   cmocka_unit_test(test_attention_backward),
      cmocka_unit_test(test_attention_long_vs_cpu),
      cmocka_unit_test(test_embed_backward),    cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_unlikelihood),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
