/* test_gcg_retokenize.c: the retokenization filter of GCG
 * (rg_gcg_retokenizes, `refgeo attack --retokenize-filter`) on
 * SmolLM2-135M-Instruct's byte-level BPE, whose tokenization is checked
 * against Hugging Face tokenizers in test_tokenizer. Facts of that BPE the
 * cases rest on: "ab" and "ing" are single tokens, so the two-token
 * suffixes "a"+"b" and "in"+"g" decode to text that re-encodes to one token
 * (dropped), while the tokens of a text ("! ! ! !", " hello world") decode
 * and re-encode to themselves (kept), and so does " !"+"!" (" !!" is no
 * token of its own); "!"+"!" is dropped ("!!" is one token).
 */
#include <stdlib.h>
#include <string.h>

#include "adv_ft/gcg.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "testlib.h"

static int32_t one_token(const rg_tokenizer *t, const char *text) {
  int32_t *ids = NULL;
  int n = 0;
  assert_int_equal(rg_tokenize(t, text, strlen(text), false, false, &ids, &n), 0);
  if (n != 1) fail_msg("'%s' is %d tokens, the test expects one", text, n);
  const int32_t id = ids[0];
  free(ids);
  return id;
}

static void test_filter_drops_what_does_not_retokenize(void **state) {
  rg_model *m = rg_model_load(t_env("REFGEO_MODEL"));
  assert_non_null(m);
  const rg_tokenizer *t = m->tokenizer;
  enum { L = 2 };
  const int32_t bang = one_token(t, "!"), space_bang = one_token(t, " !");
  const int32_t cands[][L] = {
      {one_token(t, "a"), one_token(t, "b")},     /* "ab": one token */
      {one_token(t, "in"), one_token(t, "g")},    /* "ing": one token */
      {bang, space_bang},                         /* "! !": itself */
      {one_token(t, " hello"), one_token(t, " world")},
      {space_bang, bang},                         /* " !!": " !" + "!" again */
      {bang, bang},                               /* "!!": one token */
  };
  const unsigned char want[] = {0, 0, 1, 1, 1, 0};
  const int n = (int)(sizeof cands / sizeof cands[0]);
  unsigned char keep[sizeof want];
  one_token(t, "ab"), one_token(t, "ing"), one_token(t, "!!"); /* the facts the cases rest on */
  assert_int_equal(rg_gcg_retokenizes(t, &cands[0][0], n, L, keep), 0);
  for (int j = 0; j < n; j++)
    if (keep[j] != want[j]) fail_msg("candidate %d: kept %d, expected %d", j, keep[j], want[j]);
  rg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_filter_drops_what_does_not_retokenize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
