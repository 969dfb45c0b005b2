/* test_safetensors: the safetensors reader's validation, its values against
 * files written by the reference safetensors library / transformers, and the
 * writers (single file byte-identical to the reference; sharded split equal
 * to transformers' save_pretrained and loadable by the HF loader).
 * References: tests/fixtures/hf_tiny (tools/reference/make_hf_tiny.py):
 * roundtrip.safetensors.hex (the bytes of a 274-byte file the safetensors
 * library wrote, kept as hex text so that no .safetensors file is committed;
 * written back to a scratch file here), and save_pretrained's
 * index of mistral_f16 in mistral_f16.expected.json. */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "model/model.h"
#include "model/model_source.h"
#include "formats/safetensors.h"
#include "formats/safetensors_write.h"
#include "util/error.h"
#include "util/fileio.h"

/* ---------------------------------------------------------------- helpers */

/* A file of: u64 LEN (as given, maybe a lie), HEADER text, DATA_LEN zero bytes. */
static char *write_raw(const char *name, uint64_t len, const char *header, size_t data_len) {
  size_t hl = strlen(header), n = 8 + hl + data_len;
  unsigned char *buf = calloc(1, n);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(len >> (8 * i));
  memcpy(buf + 8, header, hl);
  char *path = t_write_tmp(name, buf, n);
  free(buf);
  return path;
}

/* A file whose length field matches HEADER. */
static char *write_header(const char *name, const char *header, size_t data_len) {
  return write_raw(name, strlen(header), header, data_len);
}

/* Opening PATH must fail with an error starting with PATH and containing WANT. */
static void expect_open_error(char *path, const char *want) {
  rg_error_clear();
  rg_safetensors *st = rg_safetensors_open(path);
  assert_null(st);
  const char *e = rg_error_get();
  if (strncmp(e, path, strlen(path)) != 0 || !strstr(e, want))
    fail_msg("error '%s' should name %s and contain '%s'", e, path, want);
  free(path);
}

static float to_f32(int type, const void *data, int64_t i) {
  float f;
  assert_int_equal(rg_dequantize_row(type, (const char *)data + i * rg_dtype_get(type)->block_bytes, &f, 1), 0);
  return f;
}

/* ---------------------------------------------------------------- bad files */

static void test_header_length_past_end(void **state) {
  (void)state;
  expect_open_error(write_raw("st_len_huge.safetensors", UINT64_MAX, "{}", 0),
                    "header length 18446744073709551615 exceeds file size 10");
  expect_open_error(write_raw("st_len_long.safetensors", 3, "{}", 0), "header length 3 exceeds file size 10");
}

static void test_header_length_zero(void **state) {
  (void)state;
  expect_open_error(write_raw("st_len_zero.safetensors", 0, "{}", 0), "header length 0 is too small");
}

static void test_file_too_short(void **state) {
  (void)state;
  expect_open_error(t_write_tmp("st_short.safetensors", "\x02\0\0", 3), "too short for the 8-byte header length");
}

static void test_header_truncated(void **state) {
  (void)state;
  /* The length field claims the full header but the JSON stops early. */
  const char *full = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  char cut[64];
  snprintf(cut, sizeof cut, "%.30s", full);
  expect_open_error(write_raw("st_trunc.safetensors", 30, cut, 0), "header is not valid JSON (near byte");
}

static void test_bad_json(void **state) {
  (void)state;
  /* Python's json.loads reports this error at char 6 (the 'n' of "nope"),
   * which is file byte 8 + 6. */
  expect_open_error(write_header("st_badjson.safetensors", "{\"a\": nope}", 0), "header is not valid JSON (near byte 14)");
  expect_open_error(write_header("st_garbage.safetensors", "{}  xy", 0), "trailing bytes");
}

static void test_not_object(void **state) {
  (void)state;
  expect_open_error(write_header("st_array.safetensors", "[1, 2]", 0), "header is not a JSON object");
  expect_open_error(write_header("st_entry.safetensors", "{\"a\": 3}", 0), "tensor 'a' entry is not a JSON object");
}

static void test_unknown_dtype(void **state) {
  (void)state;
  expect_open_error(write_header("st_dtype.safetensors", "{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16),
                    "tensor 'ids' has dtype I64");
}

static void test_offsets_past_end(void **state) {
  (void)state;
  expect_open_error(write_header("st_past.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 20),
                    "tensor 'w' data_offsets [8,24] extend past the data area (20 bytes)");
  expect_open_error(write_header("st_neg.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 20),
                    "tensor 'w' data_offsets must be [begin, end]");
}

static void test_shape_offset_mismatch(void **state) {
  (void)state;
  expect_open_error(write_header("st_mismatch.safetensors", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,8]}}", 8),
                    "tensor 'w' data_offsets [0,8] do not match dtype BF16 shape [2, 3]");
  /* 2^40 * 2^40 elements overflow 64 bits. */
  expect_open_error(write_header("st_overflow.safetensors",
                                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8),
                    "shape overflows");
}

/* Issue 17, defect 4: an empty tensor (a zero dimension) whose other
 * dimensions multiply past INT64_MAX was accepted, and rg_tensor_nelems /
 * rg_tensor_nrows then overflowed int64 (undefined behaviour, reported by
 * UBSan). Shapes are now bounded where they are read, zeros aside. 2^53 is
 * the largest integer a JSON double keeps exactly. An empty tensor of a sane
 * shape stays valid (the format allows it). */
static void test_zero_dim_with_huge_dims(void **state) {
  (void)state;
  expect_open_error(write_header("st_zero_huge.safetensors",
                                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,9007199254740992,9007199254740992],"
                                 "\"data_offsets\":[0,0]}}", 0),
                    "tensor 'w' shape overflows: [0, 9007199254740992, 9007199254740992] has more than 2^63 elements");
  expect_open_error(write_header("st_huge_zero.safetensors",
                                 "{\"w\":{\"dtype\":\"BF16\",\"shape\":[9007199254740992,1024,0],"
                                 "\"data_offsets\":[0,0]}}", 0),
                    "tensor 'w' shape overflows");
  char *path = write_header("st_empty.safetensors",
                            "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,9007199254740992],\"data_offsets\":[0,0]}}", 0);
  rg_safetensors *st = rg_safetensors_open(path);
  if (!st) fail_msg("%s", rg_error_get());
  const rg_tensor *t = rg_safetensors_find(st, "w");
  assert_int_equal(rg_tensor_nelems(t), 0);
  assert_int_equal(rg_tensor_nrows(t), 0);
  assert_int_equal(t->nbytes, 0);
  rg_safetensors_close(st);
  free(path);
}

/* A header length of 2^63 - 1 is refused before anything is allocated, and
 * data past the end of the file are reported with the file byte where they
 * end: 8 length bytes + 55 header bytes + 24 = byte 87 of an 83-byte file. */
static void test_hostile_lengths(void **state) {
  (void)state;
  expect_open_error(write_raw("st_len_2p63.safetensors", INT64_MAX, "{}", 0),
                    "header length 9223372036854775807 exceeds file size 10");
  expect_open_error(write_header("st_past_byte.safetensors",
                                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 20),
                    "extend past the data area (20 bytes), to file byte 87 (the file has 83 bytes)");
}

static void test_overlap_and_duplicates(void **state) {
  (void)state;
  expect_open_error(write_header("st_overlap.safetensors",
                                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12),
                    "tensors 'a' and 'b' overlap");
  expect_open_error(write_header("st_dup.safetensors",
                                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8),
                    "tensor 'a' appears twice");
}

/* ---------------------------------------------------------------- reading */

/* The reference library's file, decoded from its hex fixture into a
 * scratch file; returns the malloc'd path. */
static char *reference_file(void) {
  char *hex_path = t_fixture_path("hf_tiny/roundtrip.safetensors.hex");
  char *hex = rg_read_file(hex_path, NULL);
  if (!hex) fail_msg("%s", rg_error_get());
  size_t n = 0;
  unsigned char *bytes = malloc(strlen(hex) / 2 + 1);
  assert_non_null(bytes);
  for (const char *p = hex; *p;) {
    unsigned v;
    if (*p == '\n') {
      p++;
      continue;
    }
    if (sscanf(p, "%2x", &v) != 1) fail_msg("%s: not hex at offset %ld", hex_path, (long)(p - hex));
    bytes[n++] = (unsigned char)v;
    p += 2;
  }
  char *path = t_write_tmp("roundtrip.safetensors", bytes, n);
  free(bytes), free(hex), free(hex_path);
  return path;
}

/* The reference library's file: shapes reversed into ggml order, values equal
 * to torch's (exact: the fixture stores the very values torch wrote,
 * widened to float32, which is lossless for f16/bf16). */
static void test_read_reference_file(void **state) {
  (void)state;
  char *path = reference_file();
  rg_safetensors *st = rg_safetensors_open(path);
  if (!st) fail_msg("%s", rg_error_get());
  cJSON *want = t_read_json_fixture("hf_tiny/roundtrip.json");
  assert_int_equal(rg_safetensors_n_tensors(st), cJSON_GetArraySize(want));
  assert_string_equal(rg_safetensors_metadata(st, "format"), "pt");
  assert_null(rg_safetensors_metadata(st, "absent"));
  for (const cJSON *w = want->child; w; w = w->next) {
    const rg_tensor *t = rg_safetensors_find(st, w->string);
    assert_non_null(t);
    const cJSON *shape = cJSON_GetObjectItem(w, "shape");
    int rank = cJSON_GetArraySize(shape);
    assert_int_equal(t->n_dims, rank);
    for (int d = 0; d < rank; d++) assert_int_equal(t->ne[d], cJSON_GetArrayItem(shape, rank - 1 - d)->valueint);
    assert_int_equal((uintptr_t)t->data % 2, 0);
    int64_t i = 0;
    for (const cJSON *v = cJSON_GetObjectItem(w, "values")->child; v; v = v->next, i++)
      assert_true(to_f32(t->type, t->data, i) == (float)v->valuedouble);
    assert_int_equal(i, rg_tensor_nelems(t));
  }
  assert_null(rg_safetensors_find(st, "nope"));
  assert_null(rg_safetensors_tensor(st, 3));
  cJSON_Delete(want);
  rg_safetensors_close(st);
  free(path);
}

/* ---------------------------------------------------------------- writing */

/* Reading the reference file and writing its tensors back must reproduce it
 * byte for byte: same key order, offsets, space padding to 8 bytes. */
static void test_writer_matches_reference(void **state) {
  (void)state;
  char *ref_path = reference_file();
  rg_safetensors *st = rg_safetensors_open(ref_path);
  assert_non_null(st);
  int n = rg_safetensors_n_tensors(st);
  rg_tensor *ts = calloc((size_t)n, sizeof *ts);
  assert_non_null(ts);
  for (int i = 0; i < n; i++) ts[i] = *rg_safetensors_tensor(st, i);
  const char *keys[] = {"format"}, *vals[] = {"pt"};
  rg_st_metadata meta = {keys, vals, 1};
  char *out = t_tmp_path("st_written.safetensors");
  if (rg_safetensors_write(out, ts, n, &meta, NULL, NULL) != 0) fail_msg("%s", rg_error_get());
  size_t la, lb;
  char *a = rg_read_file(ref_path, &la), *b = rg_read_file(out, &lb);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, la);
  free(a);
  free(b);

  /* A writer error leaves no file behind (atomic write). */
  ts[0].nbytes -= 1;
  char *bad = t_tmp_path("st_bad_write.safetensors");
  assert_int_equal(rg_safetensors_write(bad, ts, n, NULL, NULL, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "bytes of data but its shape needs"));
  assert_false(rg_path_exists(bad));
  free(bad);
  free(out);
  free(ts);
  rg_safetensors_close(st);
  free(ref_path);
}

/* Fill callback: element j of tensor i is bf16(i + j / 1000). */
static int fill_pattern(void *ctx, int i, size_t offset, void *buf, size_t len) {
  (void)ctx;
  uint16_t *u = buf;
  for (size_t k = 0; k < len / 2; k++) u[k] = rg_fp32_to_bf16((float)i + (float)(offset / 2 + k) / 1000.0f);
  return 0;
}

/* A streamed write (fill callback) reads back with the values the callback
 * produced and 8-byte aligned data. */
static void test_writer_fill_roundtrip(void **state) {
  (void)state;
  rg_tensor ts[2] = {{.name = "x", .type = RG_BF16, .n_dims = 2, .ne = {3, 5, 1, 1}},
                     {.name = "y.z", .type = RG_BF16, .n_dims = 1, .ne = {7, 1, 1, 1}}};
  char *path = t_tmp_path("st_fill.safetensors");
  assert_int_equal(rg_safetensors_write(path, ts, 2, NULL, fill_pattern, NULL), 0);
  rg_safetensors *st = rg_safetensors_open(path);
  if (!st) fail_msg("%s", rg_error_get());
  assert_int_equal(rg_safetensors_n_tensors(st), 2);
  for (int i = 0; i < 2; i++) {
    const rg_tensor *t = rg_safetensors_tensor(st, i);
    assert_string_equal(t->name, ts[i].name);
    assert_int_equal(t->n_dims, ts[i].n_dims);
    assert_memory_equal(t->ne, ts[i].ne, sizeof t->ne);
    if (i == 0) assert_int_equal((uintptr_t)t->data % 8, 0); /* the data area starts 8-aligned */
    for (int64_t j = 0; j < rg_tensor_nelems(t); j++)
      assert_true(to_f32(RG_BF16, t->data, j) == rg_bf16_to_fp32(rg_fp32_to_bf16((float)i + (float)j / 1000.0f)));
  }
  rg_safetensors_close(st);
  free(path);
}

/* Resharding mistral_f16's tensors, in the state_dict order and with the
 * 60 KB limit save_pretrained used, must give transformers' weight_map and
 * total_size; the result loads through the HF loader with identical data. */
static void test_sharded_writer_matches_transformers(void **state) {
  (void)state;
  char *src_dir = t_hf_tiny("mistral_f16");
  rg_model *src = rg_model_load(src_dir);
  if (!src) fail_msg("%s", rg_error_get());
  cJSON *exp = t_read_json_fixture("hf_tiny/mistral_f16.expected.json");
  const cJSON *order = cJSON_GetObjectItem(exp, "state_dict_order");
  int n = cJSON_GetArraySize(order);
  rg_tensor *ts = calloc((size_t)n, sizeof *ts);
  assert_non_null(ts);
  int i = 0;
  for (const cJSON *o = order->child; o; o = o->next, i++) {
    const rg_tensor *t = rg_model_find_tensor(src, o->valuestring);
    assert_non_null(t);
    ts[i] = *t;
  }
  char *dir = t_tmp_path("st_sharded_mistral");
  assert_int_equal(rg_mkdir_p(dir), 0);
  rg_st_shard_opts opts = {.max_shard_bytes = (size_t)cJSON_GetObjectItem(exp, "max_shard_bytes")->valuedouble};
  if (rg_safetensors_write_sharded(dir, ts, n, &opts) != 0) fail_msg("%s", rg_error_get());

  const cJSON *want = cJSON_GetObjectItem(exp, "index"); /* save_pretrained's index.json */
  char *index_path = rg_path_join(dir, "model.safetensors.index.json");
  char *text = rg_read_file(index_path, NULL);
  assert_non_null(text);
  cJSON *got = cJSON_Parse(text);
  assert_non_null(got);
  assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "total_size")->valuedouble ==
              cJSON_GetObjectItem(cJSON_GetObjectItem(want, "metadata"), "total_size")->valuedouble);
  const cJSON *wmap = cJSON_GetObjectItem(want, "weight_map"), *gmap = cJSON_GetObjectItem(got, "weight_map");
  assert_int_equal(cJSON_GetArraySize(gmap), cJSON_GetArraySize(wmap));
  for (const cJSON *w = wmap->child; w; w = w->next)
    assert_string_equal(cJSON_GetObjectItem(gmap, w->string)->valuestring, w->valuestring);

  /* Copy the non-weight files and load the resharded model. */
  const char *others[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
  for (int k = 0; k < 3; k++) {
    char *from = rg_path_join(src_dir, others[k]), *to = rg_path_join(dir, others[k]);
    size_t len;
    char *data = rg_read_file(from, &len);
    assert_non_null(data);
    assert_int_equal(rg_write_file_atomic(to, data, len), 0);
    free(data);
    free(from);
    free(to);
  }
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  assert_int_equal(m->source->n_shards, 4);
  assert_int_equal(m->n_tensors, n);
  for (int k = 0; k < n; k++) {
    const rg_tensor *t = rg_model_find_tensor(m, ts[k].name);
    assert_non_null(t);
    assert_int_equal(t->nbytes, ts[k].nbytes);
    assert_memory_equal(t->data, ts[k].data, t->nbytes);
  }
  rg_model_free(m);
  cJSON_Delete(got);
  cJSON_Delete(exp);
  free(text);
  free(index_path);
  free(dir);
  free(ts);
  rg_model_free(src);
  free(src_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_length_past_end),
      cmocka_unit_test(test_header_length_zero),
      cmocka_unit_test(test_file_too_short),
      cmocka_unit_test(test_header_truncated),
      cmocka_unit_test(test_bad_json),
      cmocka_unit_test(test_not_object),
      cmocka_unit_test(test_unknown_dtype),
      cmocka_unit_test(test_offsets_past_end),
      cmocka_unit_test(test_shape_offset_mismatch),
      cmocka_unit_test(test_zero_dim_with_huge_dims),
      cmocka_unit_test(test_hostile_lengths),
      cmocka_unit_test(test_overlap_and_duplicates),
      cmocka_unit_test(test_read_reference_file),
      cmocka_unit_test(test_writer_matches_reference),
      cmocka_unit_test(test_writer_fill_roundtrip),
      cmocka_unit_test(test_sharded_writer_matches_transformers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
