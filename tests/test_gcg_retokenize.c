/* test_gcg_retokenize.c: the retokenization filter of GCG
 * (rg_gcg_retokenizes; on by default in `refgeo attack`, off with --no-retokenize-filter) on
 * SmolLM2-135M-Instruct's byte-level BPE, whose tokenization is checked
 * against Hugging Face tokenizers in test_tokenizer. Facts of that BPE the
 * cases rest on: "ab" and "ing" are single tokens, so the two-token
 * suffixes "a"+"b" and "in"+"g" decode to text that re-encodes to one token
 * (dropped), while the tokens of a text ("! ! ! !", " hello world") decode
 * and re-encode to themselves (kept), and so does " !"+"!" (" !!" is no
 * token of its own); "!"+"!" is dropped ("!!" is one token). Special tokens
 * such as "<reponame>" (printable ASCII, so HarmBench's token filter lets
 * GCG place it) decode to their text, which transformers'
 * tokenizer(text, add_special_tokens=False) encodes back to them:
 * "<reponame>" + "hello" + "<|im_start|>" is kept (transformers 5.24 on this
 * GGUF: decode([4, 28120, 1]) = "<reponame>hello<|im_start|>", encoded to
 * [4, 28120, 1]).
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
  enum { L = 3 };
  const int32_t bang = one_token(t, "!"), space_bang = one_token(t, " !");
  const int32_t x = one_token(t, "x"); /* a third token that merges with none of the others' */
  const int32_t cands[][L] = {
      {one_token(t, "a"), one_token(t, "b"), x},     /* "abx": "ab" is one token */
      {x, one_token(t, "in"), one_token(t, "g")},    /* "xing": "ing" is one token */
      {bang, space_bang, space_bang},                /* "! ! !": itself */
      {one_token(t, " hello"), one_token(t, " world"), space_bang},
      {space_bang, bang, space_bang},                /* " !! !": " !" + "!" + " !" again */
      {bang, bang, space_bang},                      /* "!!": one token */
      {rg_token_lookup(t, "<reponame>"), one_token(t, "hello"), rg_token_lookup(t, "<|im_start|>")},
  };
  const unsigned char want[] = {0, 0, 1, 1, 1, 0, 1};
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
