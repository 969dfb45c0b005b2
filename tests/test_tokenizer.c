/* test_tokenizer: the byte-level (SmolLM2 and Qwen2.5-Coder GGUFs) and
 * SentencePiece (Mistral tokenizer.json) tokenizers against independent
 * references.
 *
 * tests/fixtures/tokenizer/cases.json (tools/reference/make_tokenizer_fixtures.py)
 * holds 320 strings (hex, so invalid UTF-8 is exact) with
 *  - smollm: ids from Hugging Face `tokenizers` built from the GGUF's vocab and
 *    merges with SmolLM2's tokenizer.json pre-tokenizer/decoder/specials, with
 *    and without special-token parsing, and its decode (with/without skip);
 *    qwen_cases.json has the same for Qwen2.5-Coder-0.5B-Instruct's GGUF with
 *    Qwen2's tokenizer.json pipeline (NFC, Qwen2 split regex, ByteLevel);
 *  - mistral: ids and decode from the `sentencepiece` package on Mistral-7B
 *    v0.1's tokenizer.model.v1 (checked through tokenizer.json and GGUF);
 *  - tiny: a small byte-level tokenizer.json trained by `tokenizers`.
 * Token ids are exact; there is no tolerance. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "testlib.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"

static char *from_hex(const char *hex, size_t *len) {
  size_t n = strlen(hex) / 2;
  char *out = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned b;
    sscanf(hex + 2 * i, "%2x", &b);
    out[i] = (char)b;
  }
  out[n] = '\0';
  *len = n;
  return out;
}

/* Whether the ids equal the JSON array EXPECTED; prints the first mismatches. */
static bool ids_match(const char *what, const char *hex, const int32_t *ids, int n, const cJSON *expected,
                      int *n_reported) {
  bool same = cJSON_GetArraySize(expected) == n;
  for (int i = 0; same && i < n; i++) same = cJSON_GetArrayItem(expected, i)->valueint == ids[i];
  if (!same && (*n_reported)++ < 5) {
    char *exp = cJSON_PrintUnformatted(expected);
    fprintf(stderr, "%s mismatch on hex %s: expected %s, got [", what, hex, exp);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : "", ids[i]);
    fprintf(stderr, "]\n");
    free(exp);
  }
  return same;
}

static bool str_match(const char *what, const char *hex, const char *got, const char *expected, int *n_reported) {
  bool same = got && strcmp(got, expected) == 0;
  if (!same && (*n_reported)++ < 5)
    fprintf(stderr, "%s mismatch on hex %s: expected \"%s\", got \"%s\"\n", what, hex, expected, got ? got : "(null)");
  return same;
}

static bool valid_utf8(const char *s, size_t len) {
  /* Well-formed UTF-8 per Unicode table 3-7 (written independently of the
   * tokenizer's own repair code). */
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    unsigned c = u[i];
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || i + n > len) return false;
    for (size_t k = 1; k < n; k++)
      if ((u[i + k] & 0xC0) != 0x80) return false;
    if ((c == 0xE0 && u[i + 1] < 0xA0) || (c == 0xED && u[i + 1] > 0x9F) || (c == 0xF0 && u[i + 1] < 0x90) ||
        (c == 0xF4 && u[i + 1] > 0x8F))
      return false;
    i += n;
  }
  return true;
}

/* A byte-level GGUF tokenizer, its fixture, and what its GGUF metadata
 * says (tokenizer.ggml.*_token_id, add_bos_token, the token list). */
typedef struct {
  const char *model_env, *fixture, *key;
  int vocab;
  int32_t bos, eos, pad, im_start, im_end;
  bool nfc; /* Qwen2's normalizer: a decomposed string round-trips composed */
} bytelevel_model;

static void check_bytelevel_gguf(const bytelevel_model *bm) {
  rg_gguf *g = rg_gguf_open(t_env(bm->model_env));
  assert_non_null(g);
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  rg_gguf_close(g); /* the tokenizer keeps its own copies */
  assert_int_equal(rg_tokenizer_kind_of(t), RG_TOK_BPE_BYTE);
  assert_int_equal(rg_tokenizer_vocab_size(t), bm->vocab);
  assert_int_equal(rg_tokenizer_bos(t), bm->bos);
  assert_int_equal(rg_tokenizer_eos(t), bm->eos);
  assert_int_equal(rg_tokenizer_pad(t), bm->pad);
  assert_false(rg_tokenizer_adds_bos(t));
  assert_string_equal(rg_token_text(t, bm->im_start), "<|im_start|>");
  assert_int_equal(rg_token_lookup(t, "<|im_end|>"), bm->im_end);
  assert_true(rg_token_is_special(t, bm->im_end));
  assert_false(rg_token_is_special(t, 100));

  cJSON *root = t_read_json_fixture(bm->fixture);
  int n_cases = 0, bad_ids = 0, bad_plain = 0, bad_dec = 0, bad_skip = 0, bad_round = 0, reported = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
    const cJSON *ref = cJSON_GetObjectItem(c, bm->key);
    size_t len;
    char *text = from_hex(hex, &len);
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, text, len, true, true, &ids, &n), 0);
    bad_ids += !ids_match(bm->key, hex, ids, n, cJSON_GetObjectItem(ref, "ids"), &reported);
    char *dec = rg_detokenize(t, ids, n, false);
    char *skip = rg_detokenize(t, ids, n, true);
    const char *want_dec = cJSON_GetObjectItem(ref, "decoded")->valuestring;
    bad_dec += !str_match(bm->key, hex, dec, want_dec, &reported);
    bad_skip += !str_match(bm->key, hex, skip, cJSON_GetObjectItem(ref, "decoded_skip")->valuestring, &reported);
    /* a C string cannot carry a NUL byte back, so "nul\0byte" is left out;
     * under NFC a decomposed text comes back composed, as the reference's
     * decode says */
    if (valid_utf8(text, len) && !memchr(text, 0, len) && (!bm->nfc || strcmp(want_dec, text) == 0))
      bad_round += !(dec && strlen(dec) == len && memcmp(dec, text, len) == 0);
    free(dec);
    free(skip);
    free(ids);
    assert_int_equal(rg_tokenize(t, text, len, false, true, &ids, &n), 0);
    bad_plain += !ids_match(bm->key, hex, ids, n, cJSON_GetObjectItem(ref, "ids_plain"), &reported);
    free(ids);
    free(text);
    n_cases++;
  }
  fprintf(stderr, "%s: %d cases; mismatches ids %d, ids(no special) %d, decode %d, decode(skip) %d, "
                  "round trip %d\n",
          bm->key, n_cases, bad_ids, bad_plain, bad_dec, bad_skip, bad_round);
  assert_true(n_cases >= 300);
  assert_int_equal(bad_ids + bad_plain + bad_dec + bad_skip + bad_round, 0);
  cJSON_Delete(root);
  rg_tokenizer_free(t);
}

static void test_smollm_gguf(void **state) {
  (void)state;
  static const bytelevel_model SMOLLM2 = {"REFGEO_MODEL", "tokenizer/cases.json", "smollm", 49152, 1, 2, 2, 1, 2,
                                          false};
  check_bytelevel_gguf(&SMOLLM2);
}

static void test_qwen_gguf(void **state) {
  (void)state;
  static const bytelevel_model QWEN = {"REFGEO_MODEL_QWEN", "tokenizer/qwen_cases.json", "qwen", 151936, 151643,
                                       151645, 151643, 151644, 151645, true};
  check_bytelevel_gguf(&QWEN);
}

/* Compares T on every case against cases[i][KEY].ids and .decoded; returns
 * the number of cases. */
static int check_cases(const rg_tokenizer *t, const char *key, bool parse_special, bool add_bos, bool skip_special) {
  cJSON *root = t_read_json_fixture("tokenizer/cases.json");
  int n_cases = 0, bad_ids = 0, bad_dec = 0, reported = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
    const cJSON *ref = cJSON_GetObjectItem(c, key);
    size_t len;
    char *text = from_hex(hex, &len);
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, text, len, parse_special, add_bos, &ids, &n), 0);
    bad_ids += !ids_match(key, hex, ids, n, cJSON_GetObjectItem(ref, "ids"), &reported);
    char *dec = rg_detokenize(t, ids, n, skip_special);
    bad_dec += !str_match(key, hex, dec, cJSON_GetObjectItem(ref, "decoded")->valuestring, &reported);
    free(dec);
    free(ids);
    free(text);
    n_cases++;
  }
  fprintf(stderr, "%s: %d cases; mismatches ids %d, decode %d\n", key, n_cases, bad_ids, bad_dec);
  assert_int_equal(bad_ids + bad_dec, 0);
  cJSON_Delete(root);
  return n_cases;
}

/* SentencePiece from tokenizer.json (merges by rank) vs the sentencepiece
 * package, which never parses special-token text: parse_special off. */
static void test_mistral_json(void **state) {
  (void)state;
  char *path = t_fixture_path("tokenizer/mistral_tokenizer.json");
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  free(path);
  assert_int_equal(rg_tokenizer_kind_of(t), RG_TOK_BPE_SPM);
  assert_int_equal(rg_tokenizer_vocab_size(t), 32000);
  assert_int_equal(rg_tokenizer_bos(t), 1);
  assert_int_equal(rg_tokenizer_eos(t), 2);
  assert_int_equal(rg_token_lookup(t, "<0x0A>"), 13);
  assert_true(check_cases(t, "mistral", false, false, true) >= 300);
  rg_tokenizer_free(t);
}

/* The same model as a vocab-only GGUF: merges by piece score, llama.cpp style. */
static void test_mistral_gguf(void **state) {
  (void)state;
  char *path = t_fixture_path("tokenizer/mistral_vocab.gguf.fixture");
  rg_gguf *g = rg_gguf_open(path);
  if (!g) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(g);
  free(path);
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  rg_gguf_close(g);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  assert_int_equal(rg_tokenizer_kind_of(t), RG_TOK_BPE_SPM);
  assert_true(rg_tokenizer_adds_bos(t));
  assert_int_equal(rg_tokenizer_bos(t), 1);
  assert_true(rg_token_is_special(t, 1));
  int32_t *ids;
  int n;
  assert_int_equal(rg_tokenize(t, "Hi", 2, true, true, &ids, &n), 0);
  assert_true(n >= 2);
  assert_int_equal(ids[0], 1);
  free(ids);
  check_cases(t, "mistral", false, false, true);
  rg_tokenizer_free(t);
}

/* Byte-level tokenizer.json with a Split regex, ignore_merges and a BOS
 * template, against the tokenizers library that trained it. */
static void test_tiny_bytelevel_json(void **state) {
  (void)state;
  char *path = t_fixture_path("tokenizer/tiny_bytelevel_tokenizer.json");
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  free(path);
  assert_int_equal(rg_tokenizer_kind_of(t), RG_TOK_BPE_BYTE);
  assert_true(rg_tokenizer_adds_bos(t));
  assert_int_equal(rg_tokenizer_bos(t), 0);
  check_cases(t, "tiny", true, true, true);
  rg_tokenizer_free(t);

  /* tokenizer_config.json overrides the post-processor's BOS and names EOS. */
  const char *cfg = "{\"add_bos_token\": false, \"eos_token\": {\"content\": \"<|eot_id|>\"}, \"pad_token\": \"<|eot_id|>\"}";
  char *cfg_path = t_write_tmp("tiny_tokenizer_config.json", cfg, strlen(cfg));
  path = t_fixture_path("tokenizer/tiny_bytelevel_tokenizer.json");
  t = rg_tokenizer_from_json(path, cfg_path);
  assert_non_null(t);
  assert_false(rg_tokenizer_adds_bos(t));
  assert_int_equal(rg_tokenizer_eos(t), 1);
  assert_int_equal(rg_tokenizer_pad(t), 1);
  rg_tokenizer_free(t);
  free(path);
  free(cfg_path);
}

/* llama.cpp's own vectors (tests/fixtures/tokenizer/llamacpp/README): the
 * vocab-only GGUFs of its test suite with the ids it expects, tokenized with
 * add_special=false and parse_special=false as test-tokenizer-0 does. */
static void check_llamacpp_vocab(const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "tokenizer/llamacpp/ggml-vocab-%s.gguf.fixture", name);
  char *path = t_fixture_path(rel);
  rg_gguf *g = rg_gguf_open(path);
  if (!g) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(g);
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  rg_gguf_close(g);
  free(path);
  snprintf(rel, sizeof rel, "tokenizer/llamacpp/ggml-vocab-%s.gguf.inp", name);
  path = t_fixture_path(rel);
  size_t inp_len, out_len;
  char *inp = rg_read_file(path, &inp_len);
  free(path);
  snprintf(rel, sizeof rel, "tokenizer/llamacpp/ggml-vocab-%s.gguf.out", name);
  path = t_fixture_path(rel);
  char *out = rg_read_file(path, &out_len);
  free(path);
  assert_non_null(inp);
  assert_non_null(out);
  const char *sep = "\n__ggml_vocab_test__\n";
  int n_tests = 0, n_bad = 0;
  char *line = out, *pos = inp, *end = inp + inp_len;
  while (pos < end) {
    char *next = strstr(pos, sep);
    size_t len = next ? (size_t)(next - pos) : (size_t)(end - pos);
    char *eol = strchr(line, '\n');
    assert_non_null(eol);
    *eol = '\0';
    int32_t want[512];
    int n_want = 0;
    for (char *q = line; n_want < 512;) {
      char *after;
      long v = strtol(q, &after, 10);
      if (after == q) break;
      want[n_want++] = (int32_t)v;
      q = after;
    }
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, pos, len, false, false, &ids, &n), 0);
    bool same = n == n_want && memcmp(ids, want, sizeof *ids * (size_t)n) == 0;
    if (!same && n_bad++ < 5) {
      fprintf(stderr, "%s: mismatch on \"%.*s\": expected%s\n  got", name, (int)len, pos, line);
      for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
      fprintf(stderr, "\n");
    }
    free(ids);
    n_tests++;
    line = eol + 1;
    pos = next ? next + strlen(sep) : end;
  }
  fprintf(stderr, "llama.cpp %s: %d vectors, %d mismatches\n", name, n_tests, n_bad);
  assert_true(n_tests > 30);
  assert_int_equal(n_bad, 0);
  free(inp);
  free(out);
  rg_tokenizer_free(t);
}

static void test_llamacpp_vectors(void **state) {
  (void)state;
  check_llamacpp_vocab("llama-spm");
  check_llamacpp_vocab("gpt-2");
}

/* A malformed tokenizer.json gives NULL and one line naming the file. */
static void expect_json_error(const char *name, const char *json, const char *phrase) {
  char *path = t_write_tmp(name, json, strlen(json));
  rg_error_clear();
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  assert_null(t);
  const char *err = rg_error_get();
  fprintf(stderr, "%s -> %s\n", name, err);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, phrase));
  assert_null(strchr(err, '\n'));
  free(path);
}

/* The NFC normalizer (Qwen2's tokenizer.json): "e" + U+0301 is composed to
 * U+00E9 before the byte-level split, so it takes the merge of U+00E9's two
 * bytes (GPT-2 byte map: C3 -> "Ã", A9 -> "©", CC -> "Ì", 81 -> "ģ"). */
static void test_json_nfc(void **state) {
  (void)state;
  static const char *FMT = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\\u00c3\": 0, \"\\u00a9\": 1, \"e\": 2, "
                           "\"\\u00cc\": 3, \"\\u0123\": 4, \"\\u00c3\\u00a9\": 5}, \"merges\": [\"\\u00c3 \\u00a9\"]}, "
                           "\"normalizer\": %s, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
  static const struct {
    const char *normalizer;
    int n;
    int32_t ids[3];
  } CASES[] = {{"{\"type\": \"NFC\"}", 1, {5}}, {"null", 3, {2, 3, 4}}};
  for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
    char json[512];
    snprintf(json, sizeof json, FMT, CASES[c].normalizer);
    char *path = t_write_tmp("tok_nfc.json", json, strlen(json));
    rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
    if (!t) fail_msg("%s", rg_error_get());
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, "e\xcc\x81", 3, true, false, &ids, &n), 0);
    assert_int_equal(n, CASES[c].n);
    assert_memory_equal(ids, CASES[c].ids, sizeof *ids * (size_t)n);
    free(ids);
    assert_int_equal(rg_tokenize(t, "\xc3\xa9", 2, true, false, &ids, &n), 0); /* already NFC: one token */
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 5);
    free(ids);
    rg_tokenizer_free(t);
    free(path);
  }
}

static void test_json_errors(void **state) {
  (void)state;
  expect_json_error("tok_bad.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0", "not valid JSON at byte 41"); /* cut short: its last byte */
  expect_json_error("tok_novocab.json", "{\"model\": {\"type\": \"BPE\", \"merges\": []}}", "model.vocab");
  expect_json_error("tok_badmerge.json",
                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\", "
                    "\"a zz\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
                    "merge 1");
  expect_json_error("tok_badid.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}",
                    "bad id");
  expect_json_error("tok_nopre.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                    "neither");
  char *missing = t_tmp_path("no_such_tokenizer.json");
  assert_null(rg_tokenizer_from_json(missing, NULL));
  assert_non_null(strstr(rg_error_get(), missing));
  free(missing);
}

/* Issue 17, defect 3: ids are bounded before any table is sized by them. A
 * 141-byte file whose one added token claims id 2^24 - 1 made refgeo size
 * tables for 16.7 million tokens (865 MB, seconds) and then load it. A file
 * of N bytes can hold at most (N + 1) / 5 entries ("":0 and a comma), and a
 * model bounds ids by its embedding rows. */
#define TOK_ABCD "{\"model\":{\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"d\":3},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"

static void test_json_id_bounds(void **state) {
  (void)state;
  expect_json_error("tok_id_2p24.json", TOK_ABCD "\"added_tokens\":[{\"id\":16777215,\"content\":\"x\"}]}",
                    "added_tokens entry 0 has bad id 16777215 (ids must be integers in [0, 28): a 141-byte file");
  expect_json_error("tok_id_negative.json", TOK_ABCD "\"added_tokens\":[{\"id\":-1,\"content\":\"x\"}]}",
                    "added_tokens entry 0 has bad id -1");
  expect_json_error("tok_id_fraction.json", TOK_ABCD "\"added_tokens\":[{\"id\":4.5,\"content\":\"x\"}]}",
                    "added_tokens entry 0 has bad id 4.5");
  expect_json_error("tok_id_vocab_big.json",
                    "{\"model\":{\"vocab\":{\"a\":0,\"b\":4294967296},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
                    "model.vocab entry 1 has bad id 4294967296");

  /* Gaps in the ids are allowed while the file could hold the slots. */
  const char *gap = TOK_ABCD "\"added_tokens\":[{\"id\":20,\"content\":\"<x>\"}]}";
  char *path = t_write_tmp("tok_id_gap.json", gap, strlen(gap));
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  if (!t) fprintf(stderr, "%s\n", rg_error_get());
  assert_non_null(t);
  assert_int_equal(rg_tokenizer_vocab_size(t), 21);
  assert_int_equal(rg_token_lookup(t, "<x>"), 20);
  rg_tokenizer_free(t);

  /* With a model, its vocabulary is the bound: 21 rows hold id 20, 20 do not. */
  t = rg_tokenizer_from_json_for_model(path, NULL, 21);
  assert_non_null(t);
  rg_tokenizer_free(t);
  rg_error_clear();
  assert_null(rg_tokenizer_from_json_for_model(path, NULL, 20));
  fprintf(stderr, "model vocab 20 -> %s\n", rg_error_get());
  assert_non_null(strstr(rg_error_get(), "added_tokens entry 0 has bad id 20 (ids must be integers in [0, 20): "
                                         "the model's vocabulary has 20 tokens)"));
  free(path);
}

/* Added tokens: an id listed twice is special when either listing says so,
 * and 100k added tokens load in linear time (the old duplicate search made
 * that 20 s; about 0.3 s now, so 5 s is a loose bound for a busy machine). */
static void test_json_added_tokens(void **state) {
  (void)state;
  const char *twice = TOK_ABCD "\"added_tokens\":[{\"id\":4,\"content\":\"<x>\",\"special\":false},"
                               "{\"id\":4,\"content\":\"<x>\",\"special\":true}]}";
  char *path = t_write_tmp("tok_added_twice.json", twice, strlen(twice));
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  assert_non_null(t);
  assert_true(rg_token_is_special(t, 4));
  int32_t *ids;
  int n;
  assert_int_equal(rg_tokenize(t, "a<x>", 4, true, false, &ids, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(ids[1], 4);
  free(ids);
  assert_int_equal(rg_tokenize(t, "a<x>", 4, false, false, &ids, &n), 0);
  for (int i = 0; i < n; i++) assert_int_not_equal(ids[i], 4);
  free(ids);
  rg_tokenizer_free(t);
  free(path);

  enum { N_ADDED = 100000 };
  size_t cap = (size_t)N_ADDED * 64, len = 0;
  char *json = malloc(cap);
  len += (size_t)snprintf(json + len, cap - len, "{\"model\":{\"merges\":[],\"vocab\":{");
  for (int i = 0; i < N_ADDED; i++) len += (size_t)snprintf(json + len, cap - len, "%s\"t%d\":%d", i ? "," : "", i, i);
  len += (size_t)snprintf(json + len, cap - len, "}},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"added_tokens\":[");
  for (int i = 0; i < N_ADDED; i++)
    len += (size_t)snprintf(json + len, cap - len, "%s{\"id\":%d,\"content\":\"<t%d>\"}", i ? "," : "", i, i);
  len += (size_t)snprintf(json + len, cap - len, "]}");
  path = t_write_tmp("tok_added_100k.json", json, len);
  free(json);
  double t0 = rg_now_seconds();
  t = rg_tokenizer_from_json(path, NULL);
  double sec = rg_now_seconds() - t0;
  fprintf(stderr, "%d added tokens loaded in %.3f s\n", N_ADDED, sec);
  assert_non_null(t);
  assert_int_equal(rg_token_lookup(t, "<t99999>"), 99999);
  if (!getenv("REFGEO_SANITIZED")) assert_true(sec < 5.0);
  rg_tokenizer_free(t);
  free(path);
}

/* One tokenizer shared read-only by several threads gives every thread the
 * single-threaded ids (the contract: no hidden mutable state). */
typedef struct {
  const rg_tokenizer *t;
  const char *text;
  size_t len;
  int32_t *ids;
  int n;
  int rc;
} thread_job;

static void *tokenize_job(void *arg) {
  thread_job *j = arg;
  for (int rep = 0; rep < 5 && j->rc == 0; rep++) {
    free(j->ids);
    j->rc = rg_tokenize(j->t, j->text, j->len, true, false, &j->ids, &j->n);
  }
  return NULL;
}

static void check_threads(const rg_tokenizer *t, const char *text, size_t len, const int32_t *ids, int n) {
  enum { N_THREADS = 4 };
  pthread_t th[N_THREADS];
  thread_job jobs[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) {
    jobs[i] = (thread_job){t, text, len, NULL, 0, 0};
    assert_int_equal(pthread_create(&th[i], NULL, tokenize_job, &jobs[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(jobs[i].rc, 0);
    assert_int_equal(jobs[i].n, n);
    assert_memory_equal(jobs[i].ids, ids, sizeof *ids * (size_t)n);
    free(jobs[i].ids);
  }
}

/* 10k words: well under a second is the goal (about 0.02 s in Release); the
 * 3 s bound leaves room for ASan's ~10x slowdown on a busy 2-core machine.
 * Then the same text from 4 threads at once, and an out-of-range id. */
static void test_speed_threads_bad_ids(void **state) {
  (void)state;
  rg_gguf *g = rg_gguf_open(t_env("REFGEO_MODEL"));
  assert_non_null(g);
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  rg_gguf_close(g);
  assert_non_null(t);
  static const char *WORDS[] = {"the", "refusal", "direction", "is", "computed", "from", "12345", "activations,",
                                "über", "数据", "\n\n", "  "};
  size_t cap = 200000, len = 0;
  char *text = malloc(cap);
  for (int i = 0; i < 10000; i++) len += (size_t)snprintf(text + len, cap - len, "%s ", WORDS[(i * 7) % 12]);
  double t0 = rg_now_seconds();
  int32_t *ids;
  int n;
  assert_int_equal(rg_tokenize(t, text, len, true, false, &ids, &n), 0);
  double s = rg_now_seconds() - t0;
  fprintf(stderr, "10k words (%zu bytes) -> %d tokens in %.3f s\n", len, n, s);
  assert_true(s < 3.0);
  char *dec = rg_detokenize(t, ids, n, false);
  assert_non_null(dec);
  assert_int_equal(strlen(dec), len);
  assert_memory_equal(dec, text, len);
  free(dec);
  check_threads(t, text, len, ids, n);
  int32_t bad[2] = {5, 49152};
  assert_null(rg_detokenize(t, bad, 2, false));
  assert_non_null(strstr(rg_error_get(), "49152"));
  free(ids);
  free(text);
  rg_tokenizer_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_smollm_gguf),
      cmocka_unit_test(test_qwen_gguf),
      cmocka_unit_test(test_mistral_json),
      cmocka_unit_test(test_mistral_gguf),
      cmocka_unit_test(test_tiny_bytelevel_json),
      cmocka_unit_test(test_llamacpp_vectors),
      cmocka_unit_test(test_json_nfc),
      cmocka_unit_test(test_json_errors),
      cmocka_unit_test(test_json_id_bounds),
      cmocka_unit_test(test_json_added_tokens),
      cmocka_unit_test(test_speed_threads_bad_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
