/* test_ignore_merges: Hugging Face BPE's ignore_merges (Llama-3) on both
 * tokenizer paths.
 *
 * With ignore_merges, a pre-tokenized word that is itself in the vocabulary
 * is emitted as that one token before any merge is tried (tokenizers'
 * models/bpe/model.rs, BPE::tokenize). A vocabulary {a, b, c, ab, abc} with
 * the single merge "a b" cannot reach "abc" by merging, so the word "abc"
 * must give [abc] with the flag and [ab, c] without it. This is the defect
 * llama.cpp's suite found in the GGUF path: Llama-3's "Cửa Việt" gave
 * [34, 91163, 11655, 26298, 83] instead of [34, 91163, 101798], because the
 * GGUF loader never set the flag for the llama-bpe pre type.
 *
 * GGUF path: tokenizer.ggml.pre "llama-bpe" sets it (and, as llama.cpp does,
 * makes BOS added by default); "gpt-2" does not. tokenizer.json path: the
 * model's "ignore_merges" field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "testlib.h"
#include "util/error.h"

enum { ID_A, ID_B, ID_C, ID_AB, ID_ABC, N_VOCAB };
static const char *const VOCAB[N_VOCAB] = {"a", "b", "c", "ab", "abc"};

static void expect_ids(const rg_tokenizer *t, const int32_t *want, int n_want) {
  int32_t *ids;
  int n;
  assert_int_equal(rg_tokenize(t, "abc", 3, false, false, &ids, &n), 0);
  assert_int_equal(n, n_want);
  for (int i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
  free(ids);
}

/* Writes a vocab-only GGUF of VOCAB with pre type PRE; returns its path. */
static char *vocab_gguf(const char *pre) {
  bytes b = {0};
  put_u32(&b, 0x46554747); /* "GGUF" */
  put_u32(&b, 3);
  put_u64(&b, 0); /* tensors */
  put_u64(&b, 6); /* key-value pairs */
  kv_str(&b, "general.architecture", "llama");
  kv_str(&b, "tokenizer.ggml.model", "gpt2");
  kv_str(&b, "tokenizer.ggml.pre", pre);
  kv_str_array(&b, "tokenizer.ggml.tokens", VOCAB, N_VOCAB);
  const char *merges[] = {"a b"};
  kv_str_array(&b, "tokenizer.ggml.merges", merges, 1);
  kv_u32(&b, "tokenizer.ggml.bos_token_id", ID_A);
  char name[64];
  snprintf(name, sizeof name, "ignore_merges_%s.gguf", pre);
  char *path = t_write_tmp(name, b.buf, b.len);
  free(b.buf);
  return path;
}

static rg_tokenizer *gguf_tokenizer(const char *pre) {
  char *path = vocab_gguf(pre);
  rg_gguf *g = rg_gguf_open(path);
  if (!g) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(g);
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  rg_gguf_close(g);
  free(path);
  return t;
}

static void test_gguf_pre_types(void **state) {
  (void)state;
  rg_tokenizer *llama3 = gguf_tokenizer("llama-bpe");
  expect_ids(llama3, (int32_t[]){ID_ABC}, 1);
  assert_true(rg_tokenizer_adds_bos(llama3));
  rg_tokenizer_free(llama3);

  rg_tokenizer *gpt2 = gguf_tokenizer("gpt-2");
  expect_ids(gpt2, (int32_t[]){ID_AB, ID_C}, 2);
  assert_false(rg_tokenizer_adds_bos(gpt2));
  rg_tokenizer_free(gpt2);
}

/* A tokenizer.json of VOCAB with a byte-level pre-tokenizer. */
static rg_tokenizer *json_tokenizer(bool ignore_merges) {
  char json[1024];
  snprintf(json, sizeof json,
           "{\"added_tokens\": [], \"normalizer\": null,"
           " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
           " \"decoder\": {\"type\": \"ByteLevel\"},"
           " \"model\": {\"type\": \"BPE\", \"ignore_merges\": %s,"
           " \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"abc\": 4}, \"merges\": [\"a b\"]}}",
           ignore_merges ? "true" : "false");
  char *path = t_write_tmp(ignore_merges ? "ignore_merges_on.json" : "ignore_merges_off.json", json, strlen(json));
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  free(path);
  return t;
}

static void test_json_flag(void **state) {
  (void)state;
  rg_tokenizer *on = json_tokenizer(true);
  expect_ids(on, (int32_t[]){ID_ABC}, 1);
  rg_tokenizer_free(on);
  rg_tokenizer *off = json_tokenizer(false);
  expect_ids(off, (int32_t[]){ID_AB, ID_C}, 2);
  rg_tokenizer_free(off);
}

/* An unknown pre type is refused with one line that lists the known names. */
static void test_unknown_pre_type(void **state) {
  (void)state;
  char *path = vocab_gguf("no-such-pre");
  rg_gguf *g = rg_gguf_open(path);
  assert_non_null(g);
  assert_null(rg_tokenizer_from_gguf(g));
  const char *err = rg_error_get();
  assert_non_null(strstr(err, "unsupported tokenizer.ggml.pre 'no-such-pre'"));
  assert_non_null(strstr(err, "llama-bpe"));
  assert_null(strchr(err, '\n'));
  rg_gguf_close(g);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gguf_pre_types),
      cmocka_unit_test(test_json_flag),
      cmocka_unit_test(test_unknown_pre_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
