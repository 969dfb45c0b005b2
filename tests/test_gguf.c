/* test_gguf: the GGUF reader on hand-built files (a small byte writer, as in
 * llama.cpp's tests/test-gguf.cpp) and on corrupt copies of the real header.
 * Every bad input must give NULL and one line naming the file and the
 * problem; nothing may crash (the suite also runs under ASan+UBSan). The
 * loader's shape/missing-tensor checks run on a tiny hand-built model. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

#include "gguf_writer.h"

/* ---------------------------------------------------------------- a tiny valid file */

/* Where the fields that the corruption tests patch live. */
typedef struct {
  size_t version, n_tensors, n_kv, first_key_len, words, tensor_b_type, tensor_b_offset, tensor_b_ne0, data_start;
} tiny_layout;

/* kvs: general.architecture "test", general.alignment 32, an i32 array and a
 * string array; tensors "a" f32 [4, 2] and "b" q8_0 [32]. */
static bytes tiny_gguf(tiny_layout *at) {
  bytes b = {0};
  put_u32(&b, 0x46554747);
  at->version = b.len;
  put_u32(&b, 3);
  at->n_tensors = b.len;
  put_u64(&b, 2);
  at->n_kv = b.len;
  put_u64(&b, 4);
  at->first_key_len = b.len;
  kv_str(&b, "general.architecture", "test");
  kv_u32(&b, "general.alignment", 32);
  put_str(&b, "test.ints");
  put_u32(&b, RG_GGUF_ARRAY);
  put_u32(&b, RG_GGUF_I32);
  put_u64(&b, 3);
  for (int32_t i = 1; i <= 3; i++) put(&b, &i, 4);
  put_str(&b, "test.words");
  put_u32(&b, RG_GGUF_ARRAY);
  put_u32(&b, RG_GGUF_STRING);
  put_u64(&b, 2);
  at->words = b.len;
  put_str(&b, "");
  put_str(&b, "hello");

  put_str(&b, "a");
  put_u32(&b, 2);
  put_u64(&b, 4);
  put_u64(&b, 2);
  put_u32(&b, 0 /* f32 */);
  put_u64(&b, 0);
  put_str(&b, "b");
  put_u32(&b, 1);
  at->tensor_b_ne0 = b.len;
  put_u64(&b, 32);
  at->tensor_b_type = b.len;
  put_u32(&b, 8 /* q8_0 */);
  at->tensor_b_offset = b.len;
  put_u64(&b, 32);
  pad_to(&b, 32);
  at->data_start = b.len;
  for (int i = 0; i < 8; i++) put_f32(&b, (float)i * 0.5f);
  uint16_t d = 0x3C00; /* f16 1.0 */
  put(&b, &d, 2);
  for (int8_t i = 0; i < 32; i++) put(&b, &i, 1);
  return b;
}

static char *write_named(const char *name, const bytes *b, size_t len) { return t_write_tmp(name, b->buf, len); }

/* Opens PATH expecting failure with a message that starts with the path and
 * contains WANT. */
static void expect_open_error(const char *path, const char *want) {
  rg_error_clear();
  rg_gguf *g = rg_gguf_open(path);
  if (g) {
    rg_gguf_close(g);
    fail_msg("%s: opened, expected an error containing '%s'", path, want);
  }
  const char *msg = rg_error_get();
  if (strncmp(msg, path, strlen(path)) != 0 || !strstr(msg, want) || strchr(msg, '\n'))
    fail_msg("error '%s' does not name '%s' and contain '%s' on one line", msg, path, want);
}

static void test_tiny_valid(void **state) {
  (void)state;
  tiny_layout at;
  bytes b = tiny_gguf(&at);
  char *path = write_named("tiny.gguf", &b, b.len);
  rg_gguf *g = rg_gguf_open(path);
  if (!g) fail_msg("%s", rg_error_get());
  assert_int_equal(rg_gguf_version(g), 3);
  assert_int_equal(rg_gguf_n_kv(g), 4);
  assert_string_equal(rg_gguf_kv_key(g, 1), "general.alignment");
  char *arch = rg_gguf_dup_str(g, "general.architecture");
  assert_string_equal(arch, "test");
  free(arch);
  int64_t v = 0;
  assert_int_equal(rg_gguf_get_i64(g, "general.alignment", &v), 0);
  assert_int_equal(v, 32);
  assert_int_equal(rg_gguf_get_i64(g, "absent.key", &v), -1);
  assert_int_equal(rg_gguf_get_i64(g, "general.architecture", &v), -1);
  rg_gguf_type et;
  int64_t count;
  assert_int_equal(rg_gguf_get_arr(g, "test.ints", &et, &count), 0);
  assert_int_equal(et, RG_GGUF_I32);
  assert_int_equal(count, 3);
  int32_t ints[3];
  memcpy(ints, rg_gguf_arr_data(g, "test.ints"), sizeof ints);
  assert_int_equal(ints[2], 3);
  size_t len;
  assert_non_null(rg_gguf_arr_str(g, "test.words", 0, &len));
  assert_int_equal(len, 0);
  const char *w = rg_gguf_arr_str(g, "test.words", 1, &len);
  assert_int_equal(len, 5);
  assert_memory_equal(w, "hello", 5);
  assert_null(rg_gguf_arr_str(g, "test.words", 2, &len));
  assert_null(rg_gguf_arr_data(g, "test.words"));

  assert_int_equal(rg_gguf_n_tensors(g), 2);
  const rg_tensor *a = rg_gguf_find_tensor(g, "a");
  assert_non_null(a);
  assert_int_equal(a->n_dims, 2);
  assert_int_equal(a->ne[0], 4);
  assert_int_equal(a->ne[1], 2);
  assert_int_equal(a->ne[2], 1);
  assert_int_equal(a->nbytes, 32);
  float f7;
  memcpy(&f7, (const float *)a->data + 7, 4);
  assert_true(f7 == 3.5f);
  const rg_tensor *t = rg_gguf_find_tensor(g, "b");
  assert_int_equal(t->nbytes, 34);
  assert_ptr_equal((const uint8_t *)t->data, (const uint8_t *)a->data + 32);
  assert_null(rg_gguf_find_tensor(g, "c"));
  rg_gguf_close(g);
  free(path);
  free(b.buf);
}

/* Cuts at several points: magic, counts, a key, a string array, the tensor
 * infos, the padding and the tensor data. */
static void test_truncated(void **state) {
  (void)state;
  tiny_layout at;
  bytes b = tiny_gguf(&at);
  const struct { size_t cut; const char *want; } cuts[] = {
      {3, "truncated header (needs 4 bytes at offset 0)"},
      {at.n_tensors + 5, "truncated header (needs 8 bytes at offset 8)"},
      {at.first_key_len + 12, "n_kv = 4 does not fit in the file (size 36; truncated or corrupt header)"},
      {at.words + 10, "array 'test.words' claims 2 strings, more than the file can hold"},
      {at.words + 18, "has length 5, past the end of the file"},
      {at.tensor_b_ne0 - 20, "truncated header"},
      {at.tensor_b_offset + 4, "truncated header (needs 8 bytes"},
      {at.data_start - 1, "runs past the end of the file"},
      {at.data_start + 40, "tensor 'b' data ["},
      {b.len - 1, "runs past the end of the file (size"},
  };
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    char *path = write_named("truncated.gguf", &b, cuts[i].cut);
    expect_open_error(path, cuts[i].want);
    free(path);
  }
  free(b.buf);
}

/* One patched field per case. */
static void test_corrupt_fields(void **state) {
  (void)state;
  enum { MAGIC, VERSION, N_KV, KEY_LEN, TYPE, OFFSET, MISALIGNED, NE0, BLOCK, N_CASES };
  const char *want[N_CASES] = {
      "bad magic 0x58554747 (not a GGUF file)",
      "unsupported GGUF version 7",
      "n_kv = 1152921504606846976 does not fit in the file",
      "has length 1000000, past the end of the file",
      "tensor 'b' has unknown type 99",
      NULL, /* past_end below: depends on where the data start */
      "tensor 'b' data offset 33 is not a multiple of the alignment 32",
      "tensor 'b' has bad dimension ne[0] = 0",
      "tensor 'b' has ne[0] = 31, not a multiple of the q8_0 block size 32",
  };
  for (int c = 0; c < N_CASES; c++) {
    tiny_layout at;
    bytes b = tiny_gguf(&at);
    switch (c) {
    case MAGIC: memcpy(b.buf, "GGUX", 4); break;
    case VERSION: patch_u32(&b, at.version, 7); break;
    case N_KV: patch_u64(&b, at.n_kv, 1ull << 60); break;
    case KEY_LEN: patch_u64(&b, at.first_key_len, 1000000); break;
    case TYPE: patch_u32(&b, at.tensor_b_type, 99); break;
    case OFFSET: patch_u64(&b, at.tensor_b_offset, 1u << 20); break;
    case MISALIGNED: patch_u64(&b, at.tensor_b_offset, 33); break;
    case NE0: patch_u64(&b, at.tensor_b_ne0, 0); break;
    case BLOCK: patch_u64(&b, at.tensor_b_ne0, 31); break;
    }
    char past_end[160];
    snprintf(past_end, sizeof past_end, "tensor 'b' data [%zu, %zu) runs past the end of the file (size %zu)",
             at.data_start + (1u << 20), at.data_start + (1u << 20) + 34, b.len);
    char *path = write_named("corrupt.gguf", &b, b.len);
    expect_open_error(path, c == OFFSET ? past_end : want[c]);
    free(path);
    free(b.buf);
  }
  expect_open_error("/nonexistent/model.gguf", "No such file or directory");
  rg_error_clear();
  assert_null(rg_model_load("/nonexistent/model.gguf"));
  assert_string_equal(rg_error_get(), "/nonexistent/model.gguf: No such file or directory");
}

/* Every byte of the tiny file set to 0x00 and to 0xFF in turn: each copy
 * either opens or fails with one line naming the file; ASan/UBSan catch any
 * out-of-bounds read on the way. */
static void test_byte_mutations(void **state) {
  (void)state;
  tiny_layout at;
  bytes b = tiny_gguf(&at);
  int opened = 0, failed = 0;
  for (size_t i = 0; i < b.len; i++) {
    for (int v = 0; v < 2; v++) {
      bytes m = {malloc(b.len), b.len, b.len};
      assert_non_null(m.buf);
      memcpy(m.buf, b.buf, b.len);
      m.buf[i] = v ? 0xFF : 0x00;
      char *path = write_named("mutated.gguf", &m, m.len);
      rg_error_clear();
      rg_gguf *g = rg_gguf_open(path);
      if (g) {
        opened++;
        rg_gguf_close(g);
      } else {
        failed++;
        const char *msg = rg_error_get();
        assert_true(strncmp(msg, path, strlen(path)) == 0 && strlen(msg) > strlen(path) + 2 && !strchr(msg, '\n'));
      }
      free(path);
      free(m.buf);
    }
  }
  /* Data and padding bytes are free to change; header bytes mostly are not. */
  assert_true(opened > 0 && failed > 0);
  free(b.buf);
}

/* Truncated and patched copies of the first 2 MiB of the SmolLM2 file (its
 * header, with the 49152-token vocabulary, ends at 1785664). */
static void test_real_header(void **state) {
  (void)state;
  enum { PREFIX = 2 << 20 };
  FILE *fp = fopen(t_env("REFGEO_MODEL"), "rb");
  assert_non_null(fp);
  bytes b = {malloc(PREFIX), PREFIX, PREFIX};
  assert_non_null(b.buf);
  assert_int_equal(fread(b.buf, 1, PREFIX, fp), PREFIX);
  fclose(fp);

  char *path = write_named("real-cut.gguf", &b, 900000);
  expect_open_error(path, "past the end of the file");
  free(path);
  path = write_named("real-cut.gguf", &b, PREFIX);
  expect_open_error(path, "tensor 'token_embd.weight' data [1785664, 31866688) runs past the end of the file (size 2097152)");
  free(path);

  /* The first tensor info is the first occurrence of its length-prefixed
   * name; its type field follows n_dims (u32) and two u64 dims. */
  const char needle[] = "\x11\0\0\0\0\0\0\0token_embd.weight";
  size_t name_at = 0;
  while (name_at + sizeof needle - 1 <= PREFIX && memcmp(b.buf + name_at, needle, sizeof needle - 1) != 0) name_at++;
  assert_true(name_at + sizeof needle - 1 <= PREFIX);
  size_t type_at = name_at + sizeof needle - 1 + 4 + 16;
  uint32_t type;
  memcpy(&type, b.buf + type_at, 4);
  assert_int_equal(type, 8); /* q8_0, as gguf-py reports */
  patch_u32(&b, type_at, 99);
  path = write_named("real-type.gguf", &b, PREFIX);
  expect_open_error(path, "tensor 'token_embd.weight' has unknown type 99");
  free(path);
  free(b.buf);
}

/* ---------------------------------------------------------------- loader checks on a tiny model */

/* Variations of the tiny model: SKIP omits one tensor, BAD_Q gives attn_q a
 * wrong shape, BLOCK_COUNT (if not 0) replaces llama.block_count 1, EXTRA
 * adds one more [32] f32 tensor of that name. */
typedef struct {
  const char *skip;
  bool bad_q;
  uint32_t block_count;
  const char *extra;
} tiny_opts;

/* A one-layer llama GGUF (d_model 32, 2 heads, 1 kv head, ff 64, vocab 4)
 * with f32 tensors, varied by O. */
static bytes tiny_model(tiny_opts o) {
  static const struct { const char *name; int64_t ne0, ne1; } T[] = {
      {"token_embd.weight", 32, 4},       {"output_norm.weight", 32, 1},   {"blk.0.attn_norm.weight", 32, 1},
      {"blk.0.attn_q.weight", 32, 32},    {"blk.0.attn_k.weight", 32, 16}, {"blk.0.attn_v.weight", 32, 16},
      {"blk.0.attn_output.weight", 32, 32}, {"blk.0.ffn_norm.weight", 32, 1}, {"blk.0.ffn_gate.weight", 32, 64},
      {"blk.0.ffn_up.weight", 32, 64},    {"blk.0.ffn_down.weight", 64, 32},
  };
  const char *skip = o.skip;
  const int n_t = (int)(sizeof T / sizeof T[0]) - (skip ? 1 : 0) + (o.extra ? 1 : 0);
  bytes b = {0};
  put_u32(&b, 0x46554747);
  put_u32(&b, 3);
  put_u64(&b, (uint64_t)n_t);
  put_u64(&b, 12);
  kv_str(&b, "general.architecture", "llama");
  kv_str(&b, "tokenizer.ggml.model", "gpt2");
  put_str(&b, "tokenizer.ggml.merges");
  put_u32(&b, RG_GGUF_ARRAY);
  put_u32(&b, RG_GGUF_STRING);
  put_u64(&b, 0);
  kv_u32(&b, "llama.block_count", o.block_count ? o.block_count : 1);
  kv_u32(&b, "llama.embedding_length", 32);
  kv_u32(&b, "llama.feed_forward_length", 64);
  kv_u32(&b, "llama.attention.head_count", 2);
  kv_u32(&b, "llama.attention.head_count_kv", 1);
  kv_u32(&b, "llama.context_length", 128);
  kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  kv_f32(&b, "llama.rope.freq_base", 10000.0f);
  put_str(&b, "tokenizer.ggml.tokens");
  put_u32(&b, RG_GGUF_ARRAY);
  put_u32(&b, RG_GGUF_STRING);
  put_u64(&b, 4);
  const char *vocab[4] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++) put_str(&b, vocab[i]);
  uint64_t off = 0;
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
    if (skip && strcmp(T[i].name, skip) == 0) continue;
    int64_t ne1 = o.bad_q && strcmp(T[i].name, "blk.0.attn_q.weight") == 0 ? 16 : T[i].ne1;
    put_str(&b, T[i].name);
    put_u32(&b, T[i].ne1 == 1 ? 1 : 2);
    put_u64(&b, (uint64_t)T[i].ne0);
    if (T[i].ne1 != 1) put_u64(&b, (uint64_t)ne1);
    put_u32(&b, 0);
    put_u64(&b, off);
    off += (uint64_t)(T[i].ne0 * ne1 * 4 + 31) / 32 * 32;
  }
  if (o.extra) {
    put_str(&b, o.extra);
    put_u32(&b, 1);
    put_u64(&b, 32);
    put_u32(&b, 0);
    put_u64(&b, off);
    off += 32 * 4;
  }
  pad_to(&b, 32);
  uint8_t *zeros = calloc(1, off);
  assert_non_null(zeros);
  put(&b, zeros, off);
  free(zeros);
  return b;
}

static void expect_load_error(const bytes *b, const char *want) {
  char *path = write_named("tiny-model.gguf", b, b->len);
  rg_error_clear();
  rg_model *m = rg_model_load(path);
  if (m) {
    rg_model_free(m);
    fail_msg("%s: loaded, expected '%s'", path, want);
  }
  const char *msg = rg_error_get();
  if (strncmp(msg, path, strlen(path)) != 0 || !strstr(msg, want))
    fail_msg("error '%s' does not name '%s' and contain '%s'", msg, path, want);
  free(path);
}

static void test_model_checks(void **state) {
  (void)state;
  bytes b = tiny_model((tiny_opts){.skip = "blk.0.ffn_up.weight"});
  expect_load_error(&b, "missing tensor blk.0.ffn_up.weight");
  free(b.buf);
  b = tiny_model((tiny_opts){.bad_q = true});
  expect_load_error(&b, "tensor blk.0.attn_q.weight has shape [32, 16] but the config implies [32, 32]");
  free(b.buf);
  b = tiny_model((tiny_opts){.skip = "blk.0.ffn_norm.weight"});
  expect_load_error(&b, "missing tensor blk.0.ffn_norm.weight");
  free(b.buf);
}

/* Issue 17, defect 2: llama.block_count sized a calloc before any tensor was
 * looked at (10^9 layers: "out of memory", an abort under ASan). It is now
 * checked against the layers whose tensors the file holds, first. */
static void test_block_count_bounded_by_tensors(void **state) {
  (void)state;
  bytes b = tiny_model((tiny_opts){.block_count = 1000000000});
  expect_load_error(&b, "llama.block_count is 1000000000 but the weights hold tensors for 1 layer");
  free(b.buf);
  b = tiny_model((tiny_opts){.block_count = 2});
  expect_load_error(&b, "llama.block_count is 2 but the weights hold tensors for 1 layer");
  free(b.buf);
}

/* A layer number that does not fit in 32 bits is not a layer: sscanf("%u")
 * wrapped blk.4294967296 to layer 0, so the model held two tensors named
 * model.layers.0.input_layernorm.weight. It keeps its GGUF name instead. */
static void test_layer_number_wrap(void **state) {
  (void)state;
  bytes b = tiny_model((tiny_opts){.extra = "blk.4294967296.attn_norm.weight"});
  char *path = write_named("tiny-model.gguf", &b, b.len);
  rg_model *m = rg_model_load(path);
  if (!m) fail_msg("%s", rg_error_get());
  assert_non_null(rg_model_find_tensor(m, "blk.4294967296.attn_norm.weight"));
  int n = 0;
  for (int i = 0; i < m->n_tensors; i++) n += strcmp(m->tensors[i].name, "model.layers.0.input_layernorm.weight") == 0;
  assert_int_equal(n, 1);
  rg_model_free(m);
  free(path);
  free(b.buf);
}

/* Issue 17, defect 1: the byte size of a tensor wrapped around 2^64. Tensor
 * 'b' made f32 with ne[0] = 2^62 + 8 needs 2^64 + 32 bytes, which wrapped to
 * 32, fit in the 34 bytes the file holds, and was accepted. */
static void test_size_wrap(void **state) {
  (void)state;
  const int64_t wrap = ((int64_t)1 << 62) + 8;
  assert_int_equal(rg_dtype_row_bytes(RG_F32, wrap), 0);
  assert_int_equal(rg_dtype_row_bytes(RG_F32, ((int64_t)1 << 62) + 16), 0); /* issue's example: was 64 */
  assert_int_equal(rg_dtype_row_bytes(RG_F64, INT64_MAX), 0);
  /* Large but representable: 2^58 - 1 q8_0 blocks of 34 bytes. */
  assert_int_equal(rg_dtype_row_bytes(RG_Q8_0, INT64_MAX / 32 * 32), (((size_t)1 << 58) - 1) * 34);
  assert_int_equal(rg_dtype_row_bytes(RG_F32, ((int64_t)1 << 61) - 1), (((size_t)1 << 61) - 1) * 4);
  tiny_layout at;
  bytes b = tiny_gguf(&at);
  patch_u32(&b, at.tensor_b_type, 0 /* f32 */);
  patch_u64(&b, at.tensor_b_ne0, (uint64_t)wrap);
  char *path = write_named("wrap.gguf", &b, b.len);
  expect_open_error(path, "tensor 'b' (f32, 4611686018427387912 x 1 elements) needs more than 2^64 bytes");
  free(path);
  /* An offset that wraps the extent around is refused too. */
  b = (free(b.buf), tiny_gguf(&at));
  patch_u64(&b, at.tensor_b_offset, UINT64_MAX - 31);
  path = write_named("wrap-offset.gguf", &b, b.len);
  expect_open_error(path, "tensor 'b' data offset 18446744073709551584 plus its 34 bytes is past any file size");
  free(path);
  free(b.buf);
}

/* ---------------------------------------------------------------- CLI */

static void test_cli_errors(void **state) {
  (void)state;
  tiny_layout at;
  bytes b = tiny_gguf(&at);
  char *cut = write_named("cli-cut.gguf", &b, 10);
  patch_u32(&b, at.version, 7);
  char *bad_version = write_named("cli-version.gguf", &b, b.len);
  free(b.buf);
  const char *paths[2] = {bad_version, cut};
  const char *want[2] = {"unsupported GGUF version 7", "truncated header"};
  for (int i = 0; i < 2; i++) {
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "info '%s'", paths[i]);
    int rc = t_run_cli(args, &out, &err);
    assert_int_equal(rc, 1);
    assert_string_equal(out, "");
    /* Exactly one line: "refgeo info: PATH: problem\n". */
    assert_true(strncmp(err, "refgeo info: ", 13) == 0);
    assert_non_null(strstr(err, paths[i]));
    assert_non_null(strstr(err, want[i]));
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
    free(out);
    free(err);
  }
  free(bad_version);
  free(cut);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiny_valid),   cmocka_unit_test(test_truncated),    cmocka_unit_test(test_corrupt_fields),
      cmocka_unit_test(test_byte_mutations),
      cmocka_unit_test(test_real_header),  cmocka_unit_test(test_model_checks), cmocka_unit_test(test_cli_errors),
      cmocka_unit_test(test_size_wrap),    cmocka_unit_test(test_block_count_bounded_by_tensors),
      cmocka_unit_test(test_layer_number_wrap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
