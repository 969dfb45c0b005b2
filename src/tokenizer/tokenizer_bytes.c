/* tokenizer_bytes.c: a byte-level BPE tokenizer without merges, made in
 * memory (rg_tokenizer_bytes_new, tokenizer.h). */
#include <stdio.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

rg_tokenizer *rg_tokenizer_bytes_new(int vocab_size, const char *const *specials, int n_specials, int eos) {
  if (n_specials < 0 || vocab_size < 256 + n_specials) {
    rg_error_set("vocab_size %d is below the 256 byte tokens and %d special tokens", vocab_size, n_specials);
    return NULL;
  }
  rg_tokenizer *t = rg_tok_alloc(RG_TOK_BPE_BYTE, "byte-level tokenizer", vocab_size);
  if (!t) return NULL;
  int rc = 0;
  for (int id = 0; rc == 0 && id < vocab_size; id++) {
    char text[32];
    int len;
    if (id < 256) /* GPT-2's bytes_to_unicode */
      len = rg_utf8_put(rg_byte_to_cp((uint8_t)id), text);
    else if (id < 256 + n_specials)
      len = snprintf(text, sizeof text, "%s", specials[id - 256]);
    else
      len = snprintf(text, sizeof text, "<|unused_%d|>", id - 256 - n_specials);
    rc = len < (int)sizeof text ? rg_tok_set_text(t, id, text, (size_t)len)
                                : rg_error_set("special token %d is longer than %zu bytes", id, sizeof text - 1);
  }
  if (rc == 0) rc = rg_tok_index_vocab(t);
  for (int k = 0; rc == 0 && k < n_specials; k++) rc = rg_tok_add_added(t, 256 + k, true);
  if (rc != 0) {
    rg_tokenizer_free(t);
    return NULL;
  }
  t->eos = eos >= 0 && eos < vocab_size ? eos : -1;
  return t;
}
