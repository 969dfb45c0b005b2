/* classifier_truncate.c: a generation clipped to the judge's token budget (classifier_prompt.h). */
#include <stdlib.h>
#include <string.h>

#include "harmbench/classifier_prompt.h"
#include "util/error.h"

char *rg_judge_truncate(const rg_tokenizer *judge_tokenizer, const char *generation, int max_tokens) {
  if (max_tokens <= 0) {
    rg_error_set("judge truncation: max_tokens must be positive (got %d)", max_tokens);
    return NULL;
  }
  int32_t *ids = NULL;
  int n = 0;
  /* parse_special: Hugging Face's encode() recognises added-token text in the
   * input; add_bos: add_special_tokens=True is encode()'s default. */
  if (rg_tokenize(judge_tokenizer, generation, strlen(generation), true, true, &ids, &n) != 0) return NULL;
  char *text = rg_detokenize(judge_tokenizer, ids, n < max_tokens ? n : max_tokens, true);
  free(ids);
  return text;
}
