/* tokenizer_encode.c: rg_tokenize, text to token ids: added tokens matched
 * first, then normalization, pre-tokenization and the BPE merge loop
 * (tokenizer_bpe.c) on each run between them. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

/* The longest added token whose text starts at S (N bytes left), or -1.
 * Scanning positions left to right and taking the longest match at the first
 * position that has one is Hugging Face's leftmost-longest rule. */
static int32_t match_added(const rg_tokenizer *t, const char *s, size_t n, bool parse_special) {
  int32_t best = -1;
  int best_len = 0;
  /* Matches start and end on character boundaries of the text (valid
   * UTF-8, rg_utf8_repair): an added token that is not valid UTF-8 (a
   * hostile tokenizer file; Hugging Face's are strings) must not cut a
   * character apart, since the pre-tokenizer regex takes its pieces as
   * valid (PCRE2_NO_UTF_CHECK) and read past the end of a lone lead byte. */
  if (n > 0 && ((uint8_t)s[0] & 0xC0) == 0x80) return -1;
  for (int i = 0; i < t->n_added; i++) {
    int32_t id = t->added[i];
    if (t->special[id] && !parse_special) continue;
    int len = t->len[id];
    if ((size_t)len < n && ((uint8_t)s[len] & 0xC0) == 0x80) continue;
    if (len > best_len && (size_t)len <= n && memcmp(rg_tok_text(t, id), s, (size_t)len) == 0) {
      best = id;
      best_len = len;
    }
  }
  return best;
}

/* Encodes one run of text that holds no added token; AT_START tells whether
 * it begins at offset 0 of the input (for the "first" prefix scheme). */
static int encode_run(const rg_tokenizer *t, const char *s, size_t len, bool at_start, rg_idbuf *out) {
  if (len == 0) return 0;
  int rc = -1;
  char *norm = NULL, *nfc = NULL;
  rg_pieces pieces = {0};
  if (t->nfc) {
    /* An ASCII run is its own NFC. utf8proc implements the same Unicode
     * algorithm as HF tokenizers' NFC normalizer; S is valid UTF-8 here
     * (rg_tokenize repairs first), so a failure can only be memory. */
    size_t k = 0;
    while (k < len && (unsigned char)s[k] < 0x80) k++;
    if (k < len) {
      utf8proc_uint8_t *dst = NULL;
      utf8proc_ssize_t n =
          utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
      if (n < 0) {
        rg_error_set("tokenizer: NFC normalization failed: %s", utf8proc_errmsg(n));
        goto done;
      }
      s = nfc = (char *)dst;
      len = (size_t)n;
    }
  }
  if (t->kind == RG_TOK_BPE_SPM) {
    /* SentencePiece normalisation: optional "▁" prefix, spaces -> U+2581. */
    bool prefix = t->prefix == RG_PREFIX_EVERY_SEGMENT || (t->prefix == RG_PREFIX_FIRST && at_start);
    if (t->prefix_unless_space && s[0] == ' ') prefix = false;
    norm = malloc(3 * len + 4);
    if (!norm) {
      rg_error_set("tokenizer: out of memory");
      goto done;
    }
    size_t o = 0;
    if (prefix) o += (size_t)rg_utf8_put(0x2581, norm);
    for (size_t i = 0; i < len; i++) {
      if (s[i] == ' ') o += (size_t)rg_utf8_put(0x2581, norm + o);
      else norm[o++] = s[i];
    }
    s = norm;
    len = o;
  }
  if (rg_pretokenize(t, s, len, &pieces)) goto done;
  char *mapped = NULL;
  for (int i = 0; i < pieces.n; i++) {
    const char *w = pieces.buf + pieces.off[i];
    size_t wl = pieces.len[i];
    if (t->kind == RG_TOK_BPE_BYTE) { /* bytes -> GPT-2 printable code points */
      free(mapped);
      mapped = malloc(2 * wl + 1);
      if (!mapped) {
        rg_error_set("tokenizer: out of memory");
        goto done;
      }
      size_t o = 0;
      for (size_t k = 0; k < wl; k++) o += (size_t)rg_utf8_put(rg_byte_to_cp((uint8_t)w[k]), mapped + o);
      w = mapped;
      wl = o;
    }
    if (rg_bpe_word(t, w, wl, out)) {
      free(mapped);
      goto done;
    }
  }
  free(mapped);
  rc = 0;
done:
  rg_pieces_free(&pieces);
  free(norm);
  free(nfc);
  return rc;
}

int rg_tokenize(const rg_tokenizer *t, const char *text, size_t len, bool parse_special, bool add_bos,
                int32_t **ids, int *n_ids) {
  *ids = NULL;
  *n_ids = 0;
  if (len > (size_t)1 << 30) return rg_error_set("%s: input of %zu bytes is too long", t->source, len);
  size_t n;
  char *s = rg_utf8_repair(text, len, &n);
  if (!s) return -1;
  rg_idbuf out = {0};
  int rc = -1;
  if (add_bos && rg_tokenizer_adds_bos(t) && rg_idbuf_push(&out, t->bos)) goto done;
  size_t run = 0;
  for (size_t i = 0; i < n;) {
    int32_t id = t->n_added ? match_added(t, s + i, n - i, parse_special) : -1;
    if (id < 0) {
      i++;
      continue;
    }
    if (encode_run(t, s + run, i - run, run == 0, &out) || rg_idbuf_push(&out, id)) goto done;
    i += (size_t)t->len[id];
    run = i;
  }
  if (encode_run(t, s + run, n - run, run == 0, &out)) goto done;
  rc = 0;
done:
  free(s);
  if (rc) {
    free(out.ids);
    return rc;
  }
  if (!out.ids) { /* empty input: still hand back a valid (empty) array */
    out.ids = malloc(sizeof *out.ids);
    if (!out.ids) return rg_error_set("tokenizer: out of memory");
  }
  *ids = out.ids;
  *n_ids = out.n;
  return 0;
}
