/* test_dequant: rg_dequantize_row and the half-precision helpers against the
 * gguf Python package (fixtures from tools/reference/make_dequant_fixtures.py).
 *
 * Tolerance: none. Dequantization is a handful of exactly specified float
 * operations per element (f16->f32 is exact, then one or two IEEE multiplies
 * and adds in the same order as ggml and gguf-py), so any correct
 * implementation gives the same bits; comparing bit patterns also catches
 * -0.0 vs 0.0 and NaN payloads. The same holds for round-to-nearest-even
 * f32->bf16 (torch) and f32->f16 (numpy).
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "formats/gguf.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static const char *jstr(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  assert_true(cJSON_IsString(v));
  return v->valuestring;
}

static int jint(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  assert_true(cJSON_IsNumber(v));
  return v->valueint;
}

static float *read_expected(const char *file, size_t want) {
  char name[256];
  snprintf(name, sizeof name, "dequant/%s", file);
  size_t n = 0;
  float *f = t_read_f32(name, &n);
  assert_int_equal(n, want);
  return f;
}

/* Number of elements whose bits differ; prints the first few. */
static int count_bit_mismatches(const char *what, const float *got, const float *want, size_t n) {
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    if (bad++ < 5) print_error("%s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
  }
  return bad;
}

static void test_type_table(void **state) {
  (void)state;
  /* Block sizes from ggml-common.h (static_asserts on the block structs). */
  const struct { int type; const char *name; int elems, bytes; } want[] = {
      {RG_F32, "f32", 1, 4},       {RG_F16, "f16", 1, 2},        {RG_Q4_0, "q4_0", 32, 18},
      {RG_Q4_1, "q4_1", 32, 20},   {RG_Q5_0, "q5_0", 32, 22},    {RG_Q5_1, "q5_1", 32, 24},
      {RG_Q8_0, "q8_0", 32, 34},   {RG_Q8_1, "q8_1", 32, 36},    {RG_Q2_K, "q2_K", 256, 84},
      {RG_Q3_K, "q3_K", 256, 110}, {RG_Q4_K, "q4_K", 256, 144},  {RG_Q5_K, "q5_K", 256, 176},
      {RG_Q6_K, "q6_K", 256, 210}, {RG_Q8_K, "q8_K", 256, 292},  {RG_I8, "i8", 1, 1},
      {RG_I16, "i16", 1, 2},       {RG_I32, "i32", 1, 4},        {RG_I64, "i64", 1, 8},
      {RG_F64, "f64", 1, 8},       {RG_BF16, "bf16", 1, 2},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const rg_dtype_info *d = rg_dtype_get(want[i].type);
    assert_non_null(d);
    assert_string_equal(d->name, want[i].name);
    assert_int_equal(d->block_elems, want[i].elems);
    assert_int_equal(d->block_bytes, want[i].bytes);
  }
  assert_null(rg_dtype_get(4)); /* ggml's removed q4_2 */
  assert_null(rg_dtype_get(99));
  assert_null(rg_dtype_get(-1));
  assert_int_equal(rg_dtype_row_bytes(RG_Q4_1, 576), 18 * 20);
  assert_int_equal(rg_dtype_row_bytes(RG_Q4_1, 577), 0);
  assert_int_equal(rg_dtype_row_bytes(RG_Q6_K, 512), 2 * 210);
  float out[32];
  const uint8_t zeros[8] = {0};
  assert_int_equal(rg_dequantize_row(RG_I32, zeros, out, 2), -1);
  assert_non_null(strstr(rg_error_get(), "i32"));
  assert_int_equal(rg_dequantize_row(99, zeros, out, 1), -1);
}

/* Every supported block format on gguf-py's quantize() output or random
 * blocks with sane scales (k-quants, which gguf-py cannot quantize). */
static void test_synthetic_blocks(void **state) {
  (void)state;
  cJSON *man = t_read_json_fixture("dequant/manifest.json");
  const cJSON *e;
  int n_types = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(man, "synthetic")) {
    const int type = jint(e, "type_id"), n = jint(e, "n");
    char raw_name[256];
    snprintf(raw_name, sizeof raw_name, "dequant/%s", jstr(e, "raw"));
    char *path = t_fixture_path(raw_name);
    size_t len = 0;
    char *raw = rg_read_file(path, &len);
    if (!raw) fail_msg("%s", rg_error_get());
    assert_int_equal(len, rg_dtype_row_bytes(type, n));
    float *want = read_expected(jstr(e, "expected"), (size_t)n);
    float *got = malloc(sizeof *got * (size_t)n);
    assert_non_null(got);
    if (rg_dequantize_row(type, raw, got, n) != 0) fail_msg("%s", rg_error_get());
    int bad = count_bit_mismatches(jstr(e, "type"), got, want, (size_t)n);
    if (bad) fail_msg("%s: %d of %d values differ from gguf-py", jstr(e, "type"), bad, n);
    n_types++;
    free(got);
    free(want);
    free(raw);
    free(path);
  }
  assert_int_equal(n_types, 13);
  cJSON_Delete(man);
}

/* Rows of every tensor type in the SmolLM2 file (Q8_0, Q4_1, F32). */
static void test_real_rows(void **state) {
  (void)state;
  cJSON *man = t_read_json_fixture("dequant/manifest.json");
  rg_gguf *g = rg_gguf_open(t_env("REFGEO_MODEL"));
  if (!g) fail_msg("%s", rg_error_get());
  const cJSON *e;
  int n_rows = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(man, "real")) {
    const rg_tensor *t = rg_gguf_find_tensor(g, jstr(e, "tensor"));
    assert_non_null(t);
    assert_string_equal(rg_dtype_get(t->type)->name, jstr(e, "type") /* gguf-py's lower-cased name */);
    const int n = jint(e, "n");
    assert_int_equal(t->ne[0], n);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(e, "rows");
    float *want = read_expected(jstr(e, "expected"), (size_t)n * (size_t)cJSON_GetArraySize(rows));
    float *got = malloc(sizeof *got * (size_t)n);
    assert_non_null(got);
    const size_t row_bytes = rg_dtype_row_bytes(t->type, n);
    int k = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
      assert_true(r->valueint < rg_tensor_nrows(t));
      const uint8_t *src = (const uint8_t *)t->data + (size_t)r->valueint * row_bytes;
      assert_int_equal(rg_dequantize_row(t->type, src, got, n), 0);
      char what[128];
      snprintf(what, sizeof what, "%s row %d", t->name, r->valueint);
      int bad = count_bit_mismatches(what, got, want + (size_t)k * (size_t)n, (size_t)n);
      if (bad) fail_msg("%s: %d of %d values differ from gguf-py", what, bad, n);
      k++;
      n_rows++;
    }
    free(got);
    free(want);
  }
  assert_int_equal(n_rows, 13);
  rg_gguf_close(g);
  cJSON_Delete(man);
}

static uint16_t *read_u16(const char *file, size_t want) {
  char name[256];
  snprintf(name, sizeof name, "dequant/%s", file);
  char *path = t_fixture_path(name);
  size_t len = 0;
  char *data = rg_read_file(path, &len);
  if (!data) fail_msg("%s", rg_error_get());
  assert_int_equal(len, want * 2);
  uint16_t *u = malloc(len);
  assert_non_null(u);
  memcpy(u, data, len);
  free(data);
  free(path);
  return u;
}

/* f32 -> bf16 against torch and f32 -> f16 against numpy, including exact
 * ties, overflow to infinity and subnormal results; then the round trips. */
static void test_half_conversions(void **state) {
  (void)state;
  cJSON *man = t_read_json_fixture("dequant/manifest.json");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(man, "half");
  size_t n = 0;
  char name[256];
  snprintf(name, sizeof name, "dequant/%s", jstr(h, "input"));
  float *x = t_read_f32(name, &n);
  uint16_t *bf = read_u16(jstr(h, "bf16"), n), *hf = read_u16(jstr(h, "f16"), n);
  int bad_bf = 0, bad_hf = 0;
  for (size_t i = 0; i < n; i++) {
    if (rg_fp32_to_bf16(x[i]) != bf[i] && bad_bf++ < 5)
      print_error("bf16(%.9g): got 0x%04x, want 0x%04x\n", x[i], rg_fp32_to_bf16(x[i]), bf[i]);
    if (rg_fp32_to_fp16(x[i]) != hf[i] && bad_hf++ < 5)
      print_error("f16(%.9g): got 0x%04x, want 0x%04x\n", x[i], rg_fp32_to_fp16(x[i]), hf[i]);
  }
  assert_int_equal(bad_bf, 0);
  assert_int_equal(bad_hf, 0);
  /* Every finite half value survives half -> f32 -> half unchanged. */
  for (uint32_t u = 0; u < 0x10000; u++) {
    if ((u & 0x7C00) == 0x7C00 && (u & 0x3FF)) continue; /* NaN */
    assert_int_equal(rg_fp32_to_fp16(rg_fp16_to_fp32((uint16_t)u)), u);
    assert_int_equal(rg_fp32_to_bf16(rg_bf16_to_fp32((uint16_t)u)), u);
  }
  /* NaN stays NaN (truncating the mantissa of 0x7f800001 would give +inf). */
  uint32_t snan_bits = 0x7F800001u;
  float snan;
  memcpy(&snan, &snan_bits, 4);
  assert_true(isnan(rg_bf16_to_fp32(rg_fp32_to_bf16(snan))));
  assert_true(isnan(rg_fp16_to_fp32(rg_fp32_to_fp16(snan))));
  free(x);
  free(bf);
  free(hf);
  cJSON_Delete(man);
}

/* rg_quantize_row_q8_0 against gguf-py's q8_0 blocks of the same rows,
 * byte for byte (scales and values): weight-like blocks of every
 * magnitude, an all-zero block, a block whose values are all ties (d = 1,
 * x = k + 0.5: rounded away from zero, as gguf-py's np_roundf) and one
 * holding 1e-30. */
static void test_quantize_q8_0(void **state) {
  (void)state;
  cJSON *man = t_read_json_fixture("dequant/manifest.json");
  const cJSON *q = cJSON_GetObjectItemCaseSensitive(man, "quantize_q8_0");
  char name[256];
  size_t n = 0, n_bytes = 0;
  snprintf(name, sizeof name, "dequant/%s", jstr(q, "input"));
  float *x = t_read_f32(name, &n);
  snprintf(name, sizeof name, "dequant/%s", jstr(q, "blocks"));
  char *path = t_fixture_path(name);
  uint8_t *want = (uint8_t *)rg_read_file(path, &n_bytes);
  if (!want) fail_msg("%s", rg_error_get());
  free(path);
  assert_int_equal(n, cJSON_GetObjectItemCaseSensitive(q, "n")->valueint);
  assert_int_equal(n_bytes, n / 32 * 34);
  uint8_t *got = malloc(n_bytes);
  rg_quantize_row_q8_0(x, got, (int64_t)n);
  int bad = 0;
  for (size_t b = 0; b < n / 32; b++)
    if (memcmp(got + b * 34, want + b * 34, 34) != 0 && bad++ < 3)
      print_error("q8_0 block %zu differs from gguf-py's\n", b);
  assert_int_equal(bad, 0);
  free(got), free(want), free(x);
  cJSON_Delete(man);
}

/* The SIMD decoders rg_dequantize_row picks at run time (dequant_avx2.c)
 * give the portable decoders' bits on random blocks: random bytes cover
 * every nibble, high bit and 6-bit scale pattern, and f16 scales of every
 * exponent, subnormals and infinities included. (On a CPU without AVX2 both
 * calls run the portable code and the test is vacuous; it says so.) */
static void test_simd_equals_portable(void **state) {
  (void)state;
  uint64_t z = 0x2545F4914F6CDD1Dull;
  int checked = 0;
  for (int type = 0; type < RG_DTYPE_COUNT; type++) {
    const rg_dtype_info *info = rg_dtype_get(type);
    if (!info || !info->can_dequantize) continue;
    const int64_t n = 64 * (int64_t)info->block_elems;
    const size_t bytes = rg_dtype_row_bytes(type, n);
    uint8_t *raw = malloc(bytes);
    float *fast = malloc(sizeof *fast * (size_t)n), *portable = malloc(sizeof *portable * (size_t)n);
    for (int trial = 0; trial < 8; trial++) {
      for (size_t i = 0; i < bytes; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17; /* xorshift64 */
        raw[i] = (uint8_t)z;
      }
      assert_int_equal(rg_dequantize_row(type, raw, fast, n), 0);
      assert_int_equal(rg_dequantize_row_portable(type, raw, portable, n), 0);
      /* NaN scales: any NaN is a match (a quiet bit may differ by path) */
      for (int64_t i = 0; i < n; i++)
        if (isnan(fast[i]) && isnan(portable[i])) fast[i] = portable[i];
      int bad = count_bit_mismatches(info->name, fast, portable, (size_t)n);
      if (bad) fail_msg("%s: %d of %lld values differ between the SIMD and portable decoders", info->name, bad,
                        (long long)n);
    }
    checked++;
    free(raw);
    free(fast);
    free(portable);
  }
  print_message("%d types: SIMD decoders %s\n", checked,
                __builtin_cpu_supports("avx2") ? "(AVX2) equal the portable ones" : "absent on this CPU (vacuous)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simd_equals_portable),
      cmocka_unit_test(test_type_table),
      cmocka_unit_test(test_synthetic_blocks),
      cmocka_unit_test(test_real_rows),
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_quantize_q8_0),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
