/* test_tokenizer_forms: the Mistral-7B tokenizer in every tokenizer.json form
 * the Hub uses, and a Split-String tokenizer, give Hugging Face `tokenizers`'
 * ids on the repo's prompt sets.
 *
 * tests/fixtures/tokenizer/spm_forms.json (tools/reference/make_spm_form_fixtures.py)
 * holds each form as an edit of a committed tokenizer.json (the top-level
 * fields that replace the base's), the texts (engine strings of cases.json,
 * data/prompts, HarmBench behaviors and contexts, XSTest prompts) and the ids
 * `tokenizers` gave for each form with add_special_tokens=False. The forms:
 *   legacy                Prepend + Replace normalizer, no pre-tokenizer
 *   metaspace_first       Metaspace, prepend_scheme "first", split false
 *   metaspace_split       Metaspace, prepend_scheme "always", split true
 *   metaspace_first_v015  Metaspace as tokenizers 0.15 wrote it (no "split"
 *                         key, which now means true), prepend_scheme "first"
 *   split_string          legacy + Split pre-tokenizers on literal patterns
 *   split_contiguous_invert  the same with the Contiguous behavior and invert
 * The test writes each form's file exactly as the script built it, loads it
 * with rg_tokenizer_from_json, and compares every id, with special-token
 * text parsed and as plain text (tokenizers' encode_special_tokens), and the
 * decode of the expected ids (skip_special off) with tokenizers' decode;
 * there is no tolerance. The one text holding a NUL byte is left out of the
 * decode check (a C string ends there). On d99de02 the last four forms did
 * not load: literal patterns failed to compile (PCRE2_UCP with
 * PCRE2_LITERAL), and Contiguous and invert were refused. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "testlib.h"
#include "util/error.h"

enum { MAX_SETS = 8 };

typedef struct {
  const char *name;
  int texts, ids, mismatches, plain_mismatches, decodes, decode_mismatches;
} set_count;

static set_count *count_for(set_count *sets, int *n_sets, const char *name) {
  for (int i = 0; i < *n_sets; i++)
    if (strcmp(sets[i].name, name) == 0) return &sets[i];
  assert_true(*n_sets < MAX_SETS);
  sets[*n_sets] = (set_count){name, 0, 0, 0, 0, 0, 0};
  return &sets[(*n_sets)++];
}

/* The text's bytes: "text" (UTF-8) or "hex" (invalid UTF-8 or NUL). */
static char *text_bytes(const cJSON *entry, size_t *len) {
  const cJSON *text = cJSON_GetObjectItem(entry, "text");
  if (cJSON_IsString(text)) {
    *len = strlen(text->valuestring);
    char *copy = malloc(*len + 1);
    memcpy(copy, text->valuestring, *len + 1);
    return copy;
  }
  const char *hex = cJSON_GetObjectItem(entry, "hex")->valuestring;
  *len = strlen(hex) / 2;
  char *out = malloc(*len + 1);
  for (size_t i = 0; i < *len; i++) {
    unsigned b;
    assert_int_equal(sscanf(hex + 2 * i, "%2x", &b), 1);
    out[i] = (char)b;
  }
  return out;
}

/* Writes FORM's tokenizer.json (base file with the edited fields replaced). */
static char *write_form(const cJSON *form) {
  char rel[256];
  snprintf(rel, sizeof rel, "tokenizer/%s", cJSON_GetObjectItem(form, "base")->valuestring);
  cJSON *root = t_read_json_fixture(rel);
  const cJSON *field;
  cJSON_ArrayForEach(field, cJSON_GetObjectItem(form, "edit")) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, field->string);
    cJSON_AddItemToObject(root, field->string, cJSON_Duplicate(field, true));
  }
  char *json = cJSON_PrintUnformatted(root);
  snprintf(rel, sizeof rel, "form_%s_tokenizer.json", cJSON_GetObjectItem(form, "name")->valuestring);
  char *path = t_write_tmp(rel, json, strlen(json));
  free(json);
  cJSON_Delete(root);
  return path;
}

/* A JSON array of ids as a malloc'd array; *n gets the count. */
static int32_t *json_ids(const cJSON *array, int *n) {
  assert_true(cJSON_IsArray(array));
  *n = cJSON_GetArraySize(array);
  int32_t *ids = malloc(sizeof *ids * (size_t)(*n ? *n : 1));
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, array) ids[i++] = (int32_t)e->valueint;
  return ids;
}

/* A form's expected ids for one text: ENTRY is an array, null (BASE's ids),
 * or {"head", "tail", "ids"}: BASE's first head ids, then ids, then BASE's
 * last tail ids (the fixture stores only what differs from the base form). */
static int32_t *expected_ids(const cJSON *entry, const cJSON *base, int *n) {
  if (cJSON_IsArray(entry)) return json_ids(entry, n);
  int n_base;
  int32_t *base_ids = json_ids(base, &n_base);
  if (cJSON_IsNull(entry)) {
    *n = n_base;
    return base_ids;
  }
  int head = cJSON_GetObjectItem(entry, "head")->valueint, tail = cJSON_GetObjectItem(entry, "tail")->valueint;
  int n_mid;
  int32_t *mid = json_ids(cJSON_GetObjectItem(entry, "ids"), &n_mid);
  assert_true(head >= 0 && tail >= 0 && head + tail <= n_base);
  *n = head + n_mid + tail;
  int32_t *ids = malloc(sizeof *ids * (size_t)(*n ? *n : 1));
  memcpy(ids, base_ids, sizeof *ids * (size_t)head);
  memcpy(ids + head, mid, sizeof *ids * (size_t)n_mid);
  memcpy(ids + head + n_mid, base_ids + n_base - tail, sizeof *ids * (size_t)tail);
  free(mid);
  free(base_ids);
  return ids;
}

static bool same_ids(const int32_t *a, int n_a, const int32_t *b, int n_b) {
  return n_a == n_b && (n_a == 0 || memcmp(a, b, sizeof *a * (size_t)n_a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int n) {
  fprintf(stderr, " %s [", what);
  for (int k = 0; k < n; k++) fprintf(stderr, "%s%d", k ? "," : "", ids[k]);
  fprintf(stderr, "]");
}

/* Tokenizes every text with FORM; returns its mismatches, or -1 when the form
 * does not load (the other forms still run, so one report shows them all). */
static int check_form(const cJSON *fx, const cJSON *form) {
  const char *name = cJSON_GetObjectItem(form, "name")->valuestring;
  const cJSON *same_as = cJSON_GetObjectItem(form, "same_as");
  const cJSON *ids = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "ids"), name);
  const cJSON *base =
      cJSON_IsString(same_as) ? cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "ids"), same_as->valuestring) : NULL;
  const cJSON *decodes = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "decoded"), name);
  const cJSON *plain_ids = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "ids_plain"), name);
  char *path = write_form(form);
  rg_tokenizer *t = rg_tokenizer_from_json(path, NULL);
  free(path);
  if (!t) {
    fprintf(stderr, "%-23s does not load: %s\n", name, rg_error_get());
    return -1;
  }
  assert_int_equal(rg_tokenizer_kind_of(t), RG_TOK_BPE_SPM);

  set_count sets[MAX_SETS];
  int n_sets = 0, reported = 0, i = 0;
  const cJSON *entry;
  cJSON_ArrayForEach(entry, cJSON_GetObjectItem(fx, "texts")) {
    int n_want;
    int32_t *want = expected_ids(cJSON_GetArrayItem(ids, i), cJSON_GetArrayItem(base, i), &n_want);
    size_t len;
    char *text = text_bytes(entry, &len);
    int32_t *got;
    int n;
    assert_int_equal(rg_tokenize(t, text, len, true, false, &got, &n), 0);
    set_count *c = count_for(sets, &n_sets, cJSON_GetObjectItem(entry, "set")->valuestring);
    c->texts++;
    c->ids += n_want;
    if (!same_ids(got, n, want, n_want)) {
      c->mismatches++;
      if (reported++ < 5) {
        fprintf(stderr, "%s: text %d \"%.60s\":", name, i, text);
        print_ids("expected", want, n_want);
        print_ids("got", got, n);
        fprintf(stderr, "\n");
      }
    }
    free(got);
    char key[16];
    snprintf(key, sizeof key, "%d", i);
    const cJSON *plain = cJSON_GetObjectItem(plain_ids, key); /* absent: same as parsed */
    int n_plain = n_want;
    int32_t *want_plain = plain ? json_ids(plain, &n_plain) : NULL;
    assert_int_equal(rg_tokenize(t, text, len, false, false, &got, &n), 0);
    if (!same_ids(got, n, plain ? want_plain : want, n_plain)) {
      c->plain_mismatches++;
      if (reported++ < 5) fprintf(stderr, "%s: text %d \"%.60s\" differs with special tokens as text\n", name, i, text);
    }
    free(got);
    free(want_plain);
    if (!memchr(text, 0, len)) {
      const cJSON *want_dec = cJSON_GetArrayItem(decodes, i);
      const char *want_text = cJSON_IsString(want_dec) ? want_dec->valuestring : text; /* null: the text itself */
      char *dec = rg_detokenize(t, want, n_want, false);
      c->decodes++;
      if (!dec || strcmp(dec, want_text) != 0) {
        c->decode_mismatches++;
        if (reported++ < 5)
          fprintf(stderr, "%s: text %d decodes to \"%.60s\", expected \"%.60s\"\n", name, i, dec ? dec : "(null)",
                  want_text);
      }
      free(dec);
    }
    free(want);
    free(text);
    i++;
  }
  int mismatches = 0;
  for (int s = 0; s < n_sets; s++) {
    fprintf(stderr, "%-23s %-10s %4d texts %6d ids %d mismatches (%d as plain text), %4d decodes %d mismatches\n", name,
            sets[s].name, sets[s].texts, sets[s].ids, sets[s].mismatches, sets[s].plain_mismatches, sets[s].decodes,
            sets[s].decode_mismatches);
    mismatches += sets[s].mismatches + sets[s].plain_mismatches + sets[s].decode_mismatches;
  }
  assert_int_equal(n_sets, 4); /* engine, prompts, harmbench, xstest */
  rg_tokenizer_free(t);
  return mismatches;
}

static void test_forms(void **state) {
  (void)state;
  cJSON *fx = t_read_json_fixture("tokenizer/spm_forms.json");
  /* The sets are as large as their sources: 320 engine strings, 144 data/
   * prompts instructions, 400 HarmBench behaviors + 100 contexts, 450 XSTest. */
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(fx, "texts")), 320 + 144 + 500 + 450);
  int n_forms = 0, n_bad = 0;
  const cJSON *form;
  cJSON_ArrayForEach(form, cJSON_GetObjectItem(fx, "forms")) {
    n_bad += check_form(fx, form) != 0;
    n_forms++;
  }
  assert_int_equal(n_forms, 6);
  assert_int_equal(n_bad, 0);
  cJSON_Delete(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
