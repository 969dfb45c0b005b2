/* tokenizer_pretok.c: UTF-8 repair, the regex pre-tokenizer and the GPT-2
 * byte-to-unicode map. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

/* ---------------------------------------------------------------- UTF-8 */

/* Length of the well-formed sequence that starts with LEAD (Unicode table
 * 3-7), and the allowed range of its second byte; 0 for a byte that cannot
 * start one. */
static int utf8_seq_len(uint8_t lead, uint8_t *lo, uint8_t *hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0) *lo = 0xA0; /* no overlong forms */
    if (lead == 0xED) *hi = 0x9F; /* no surrogates */
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F; /* nothing above U+10FFFF */
    return 4;
  }
  return 0;
}

char *rg_utf8_repair(const char *s, size_t len, size_t *out_len) {
  /* Each bad byte becomes at most 3 bytes (U+FFFD). */
  if (len > (SIZE_MAX - 1) / 3) {
    rg_error_set("tokenizer: input too long");
    return NULL;
  }
  char *out = malloc(len * 3 + 1);
  if (!out) {
    rg_error_set("tokenizer: out of memory");
    return NULL;
  }
  const uint8_t *u = (const uint8_t *)s;
  size_t i = 0, o = 0;
  while (i < len) {
    uint8_t lo, hi;
    int n = utf8_seq_len(u[i], &lo, &hi);
    /* Count how much of the sequence is well formed: that maximal subpart is
     * replaced by one U+FFFD and scanning resumes at the first bad byte. */
    int good = n ? 1 : 0;
    while (good > 0 && good < n && i + (size_t)good < len) {
      uint8_t c = u[i + (size_t)good];
      uint8_t l = good == 1 ? lo : 0x80, h = good == 1 ? hi : 0xBF;
      if (c < l || c > h) break;
      good++;
    }
    if (n > 0 && good == n) {
      memcpy(out + o, s + i, (size_t)n);
      o += (size_t)n;
      i += (size_t)n;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i += good ? (size_t)good : 1;
    }
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

int rg_utf8_get(const char *s, size_t n, uint32_t *cp) {
  const uint8_t *u = (const uint8_t *)s;
  uint8_t lo, hi;
  int len = utf8_seq_len(u[0], &lo, &hi);
  if (len == 0 || (size_t)len > n) { /* not reached on repaired text; be safe */
    *cp = u[0];
    return 1;
  }
  static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t c = u[0] & lead_mask[len];
  for (int k = 1; k < len; k++) c = (c << 6) | (u[k] & 0x3F);
  *cp = c;
  return len;
}

int rg_utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* ---------------------------------------------------------------- GPT-2 byte map
 * GPT-2's bytes_to_unicode(): printable bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF map to themselves; the other 68 bytes (0x00..0x20, 0x7F..0xA0,
 * 0xAD), in byte order, map to U+0100, U+0101, ... */

uint32_t rg_byte_to_cp(uint8_t b) {
  if (b <= 0x20) return 256u + b;
  if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (uint32_t)(b - 0x7F);
  if (b == 0xAD) return 256u + 67u;
  return b;
}

int rg_cp_to_byte(uint32_t cp) {
  if (cp >= 256 && cp < 256 + 33) return (int)(cp - 256);
  if (cp >= 256 + 33 && cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
  if (cp == 256 + 67) return 0xAD;
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
  return -1;
}

/* ---------------------------------------------------------------- pieces */

void rg_pieces_free(rg_pieces *p) {
  free(p->buf);
  free(p->off);
  free(p->len);
  memset(p, 0, sizeof *p);
}

int rg_pieces_push(rg_pieces *p, const char *prefix, size_t prefix_len, const char *s, size_t len) {
  size_t need = p->buf_len + prefix_len + len;
  if (need > p->buf_cap) {
    size_t cap = p->buf_cap ? p->buf_cap : 256;
    while (cap < need) cap *= 2;
    char *b = realloc(p->buf, cap);
    if (!b) return rg_error_set("tokenizer: out of memory");
    p->buf = b;
    p->buf_cap = cap;
  }
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 64;
    size_t *off = realloc(p->off, sizeof *off * (size_t)cap);
    if (!off) return rg_error_set("tokenizer: out of memory");
    p->off = off;
    size_t *ln = realloc(p->len, sizeof *ln * (size_t)cap);
    if (!ln) return rg_error_set("tokenizer: out of memory");
    p->len = ln;
    p->cap = cap;
  }
  if (prefix_len) memcpy(p->buf + p->buf_len, prefix, prefix_len);
  if (len) memcpy(p->buf + p->buf_len + prefix_len, s, len);
  p->off[p->n] = p->buf_len;
  p->len[p->n] = prefix_len + len;
  p->n++;
  p->buf_len = need;
  return 0;
}

/* Hugging Face's Split, streamed. The pattern cuts a piece into segments,
 * matches and the non-empty text between them (invert swaps which is which),
 * and the behavior folds them into pieces as tokenizers' NormalizedString::
 * split does (normalizer.rs). Each fold step either extends the last piece or
 * starts a new one, so the last piece is held open and written out when the
 * next one starts. */
typedef struct {
  const rg_pretok_step *step;
  const char *s;
  rg_pieces *out;
  size_t open_start, open_end;
  bool open, prev_match;
} splitter;

static int split_flush(splitter *sp) {
  if (!sp->open) return 0;
  sp->open = false;
  return rg_pieces_push(sp->out, NULL, 0, sp->s + sp->open_start, sp->open_end - sp->open_start);
}

static int split_segment(splitter *sp, size_t start, size_t end, bool match) {
  if (sp->step->invert) match = !match;
  bool extend = false;
  switch (sp->step->behavior) {
  case RG_SPLIT_ISOLATED:
    break;
  case RG_SPLIT_REMOVED:
    if (match) return split_flush(sp);
    break;
  case RG_SPLIT_MERGED_PREVIOUS: /* a match joins the text before it */
    extend = match && !sp->prev_match;
    break;
  case RG_SPLIT_MERGED_NEXT: /* text joins the match before it */
    extend = !match && sp->prev_match;
    break;
  case RG_SPLIT_CONTIGUOUS: /* a run of matches is one piece */
    extend = match == sp->prev_match;
    break;
  }
  sp->prev_match = match;
  if (extend && sp->open) {
    sp->open_end = end;
    return 0;
  }
  if (split_flush(sp)) return -1;
  sp->open = true;
  sp->open_start = start;
  sp->open_end = end;
  return 0;
}

/* Splits S by one step's regex, appending the resulting pieces to OUT. */
static int split_piece(const rg_pretok_step *st, const char *s, size_t len, pcre2_match_data *md,
                       pcre2_match_context *mc, rg_pieces *out) {
  splitter sp = {.step = st, .s = s, .out = out};
  size_t pos = 0, gap_start = 0;
  while (pos <= len) {
    int rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[120];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return rg_error_set("tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) { /* an empty match splits nothing; step over one character */
      if (ms >= len) break;
      uint32_t cp;
      pos = ms + (size_t)rg_utf8_get(s + ms, len - ms, &cp);
      continue;
    }
    if ((ms > gap_start && split_segment(&sp, gap_start, ms, false)) || split_segment(&sp, ms, me, true)) return -1;
    gap_start = pos = me;
  }
  if (len > gap_start && split_segment(&sp, gap_start, len, false)) return -1;
  return split_flush(&sp);
}

int rg_pretokenize(const rg_tokenizer *t, const char *s, size_t len, rg_pieces *out) {
  rg_pieces cur = {0}, next = {0}, tmp = {0};
  int rc = -1;
  /* Per-call match data and JIT stack keep the tokenizer read-only. The JIT
   * stack may grow to 8 MiB: "\s+(?!\S)" backtracks over long blank runs. */
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  pcre2_match_context *mc = pcre2_match_context_create(NULL);
  pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
  if (!md || !mc || !js) {
    rg_error_set("tokenizer: out of memory");
    goto done;
  }
  pcre2_jit_stack_assign(mc, NULL, js);
  if (rg_pieces_push(&cur, NULL, 0, s, len)) goto done;
  for (int k = 0; k < t->n_steps; k++) {
    const rg_pretok_step *st = &t->steps[k];
    next.n = 0;
    next.buf_len = 0;
    for (int i = 0; i < cur.n; i++) {
      const char *p = cur.buf + cur.off[i];
      size_t n = cur.len[i];
      if (st->prefix_space && (n == 0 || p[0] != ' ')) {
        tmp.n = 0;
        tmp.buf_len = 0;
        if (rg_pieces_push(&tmp, " ", 1, p, n)) goto done;
        p = tmp.buf;
        n = tmp.len[0];
      }
      if (st->re) {
        if (split_piece(st, p, n, md, mc, &next)) goto done;
      } else if (rg_pieces_push(&next, NULL, 0, p, n)) {
        goto done;
      }
    }
    rg_pieces swap = cur;
    cur = next;
    next = swap;
  }
  rg_pieces_free(out);
  *out = cur;
  cur = (rg_pieces){0};
  rc = 0;
done:
  rg_pieces_free(&cur);
  rg_pieces_free(&next);
  rg_pieces_free(&tmp);
  pcre2_jit_stack_free(js);
  pcre2_match_context_free(mc);
  pcre2_match_data_free(md);
  return rc;
}
