/* test_case.c: a GCG test case as token ids, laid out for GCG and R2D2 (test_case.h). */
#include "adv_ft/test_case.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

/* Appends N ids to S (grown as needed). */
static int append_ids(rg_test_case_seq *s, const int32_t *ids, int n) {
  int32_t *grown = realloc(s->ids, (size_t)(s->n + n + 1) * sizeof *grown);
  if (!grown) return rg_error_set("out of memory");
  memcpy(grown + s->n, ids, (size_t)n * sizeof *ids);
  s->ids = grown;
  s->n += n;
  return 0;
}

/* Appends the tokens of TEXT, special-token text parsed as the HF
 * tokenizers HarmBench calls do. */
static int append_text(const rg_model *m, rg_test_case_seq *s, const char *text, bool add_bos) {
  int32_t *ids = NULL;
  int n = 0;
  if (rg_tokenize(m->tokenizer, text, strlen(text), true, add_bos, &ids, &n) < 0) return -1;
  const int rc = append_ids(s, ids, n);
  free(ids);
  return rc;
}

int rg_test_case_build(const rg_model *m, const rg_test_case_frame *f, const char *behavior, const int32_t *suffix,
                       int n_suffix, const char *target, bool append_eos, rg_test_case_seq *out) {
  rg_test_case_seq s = {0};
  const int32_t eos = rg_tokenizer_eos(m->tokenizer);
  int rc = append_text(m, &s, f->before, f->add_bos) || append_text(m, &s, behavior, false) ? -1 : 0;
  s.suffix_start = s.n;
  s.n_suffix = n_suffix;
  if (rc == 0) rc = append_ids(&s, suffix, n_suffix);
  if (rc == 0) rc = append_text(m, &s, f->after, false);
  s.target_start = s.n;
  if (rc == 0) rc = append_text(m, &s, target, false);
  if (rc == 0 && append_eos) rc = eos < 0 ? rg_error_set("the tokenizer has no EOS to end the target") : append_ids(&s, &eos, 1);
  if (rc < 0) {
    rg_test_case_seq_free(&s);
    return -1;
  }
  *out = s;
  return 0;
}

void rg_test_case_seq_free(rg_test_case_seq *s) {
  free(s->ids);
  memset(s, 0, sizeof *s);
}

int rg_test_case_tokens(const rg_model *m, const char *text, int32_t **ids, int *n) {
  return rg_tokenize(m->tokenizer, text, strlen(text), false, false, ids, n);
}
