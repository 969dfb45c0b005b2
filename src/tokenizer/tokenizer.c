/* tokenizer.c: vocabulary tables, lookups and decoding, shared by both
 * tokenizer kinds. Encoding (tokenizer_encode.c) sits above the BPE merge
 * loop (tokenizer_bpe.c), which uses this file's tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

/* ---------------------------------------------------------------- construction */

static const uint32_t FNV_OFFSET = 2166136261u;

/* FNV-1a of H's bytes followed by the LEN bytes at S (start with
 * FNV_OFFSET): a text hashed in two parts hashes as the whole. */
static uint32_t hash_more(uint32_t h, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

/* Smallest power of two >= 2n (load factor <= 1/2). */
static uint32_t table_size(int n) {
  uint32_t cap = 16;
  while (cap < 2u * (uint32_t)n) cap *= 2;
  return cap;
}

rg_tokenizer *rg_tok_alloc(rg_tokenizer_kind kind, const char *source, int n_vocab) {
  rg_tokenizer *t = calloc(1, sizeof *t);
  if (!t) goto oom;
  t->kind = kind;
  t->n_vocab = n_vocab;
  t->bos = t->eos = t->pad = t->unk = -1;
  memset(t->byte_token, 0xff, sizeof t->byte_token);
  t->source = strdup(source ? source : "tokenizer");
  /* The text block starts small and doubles: its size follows the texts
   * the file holds, not the vocabulary size it claims. */
  t->texts_cap = 4096;
  t->texts = malloc(t->texts_cap);
  t->text_off = calloc((size_t)n_vocab, sizeof *t->text_off);
  t->len = calloc((size_t)n_vocab, sizeof *t->len);
  t->special = calloc((size_t)n_vocab, sizeof *t->special);
  if (!t->source || !t->texts || !t->text_off || !t->len || !t->special) goto oom;
  t->texts[0] = '\0'; /* offset 0: every id's text until it is set */
  t->texts_len = 1;
  return t;
oom:
  rg_tokenizer_free(t);
  rg_error_set("%s: out of memory for %d tokens", source ? source : "tokenizer", n_vocab);
  return NULL;
}

int rg_tok_set_text(rg_tokenizer *t, int32_t id, const char *text, size_t len) {
  if (id < 0 || id >= t->n_vocab) return rg_error_set("%s: token id %d out of range", t->source, (int)id);
  if (len > 65536) return rg_error_set("%s: token %d is %zu bytes long", t->source, (int)id, len);
  if (len + 1 > t->texts_cap - t->texts_len) {
    size_t cap = t->texts_cap;
    while (len + 1 > cap - t->texts_len) cap *= 2;
    char *grown = realloc(t->texts, cap);
    if (!grown) return rg_error_set("%s: out of memory for the token texts", t->source);
    t->texts = grown;
    t->texts_cap = cap;
  }
  /* A text set twice (tokenizer.json lists an added token in the vocab too)
   * leaves its first copy unused in the block. */
  memcpy(t->texts + t->texts_len, text, len);
  t->texts[t->texts_len + len] = '\0';
  t->text_off[id] = t->texts_len;
  t->len[id] = (int)len;
  t->texts_len += len + 1;
  return 0;
}

int rg_tok_index_vocab(rg_tokenizer *t) {
  free(t->vocab.slots);
  uint32_t cap = table_size(t->n_vocab);
  t->vocab.slots = malloc(sizeof *t->vocab.slots * cap);
  if (!t->vocab.slots) return rg_error_set("%s: out of memory", t->source);
  memset(t->vocab.slots, 0xff, sizeof *t->vocab.slots * cap);
  t->vocab.mask = cap - 1;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    if (t->len[id] == 0) continue; /* an unused id is never looked up */
    const char *text = rg_tok_text(t, id);
    uint32_t i = hash_more(FNV_OFFSET, text, (size_t)t->len[id]) & t->vocab.mask;
    while (t->vocab.slots[i] >= 0) {
      int32_t other = t->vocab.slots[i];
      if (t->len[other] == t->len[id] && memcmp(rg_tok_text(t, other), text, (size_t)t->len[id]) == 0) break;
      i = (i + 1) & t->vocab.mask;
    }
    if (t->vocab.slots[i] < 0) t->vocab.slots[i] = id; /* first id wins for duplicates */
  }
  return 0;
}

/* Id of the token whose text is the A_LEN bytes at A followed by the B_LEN
 * bytes at B, or -1; a merge's result is found without building it. */
static int32_t find_concat(const rg_tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len) {
  const size_t len = a_len + b_len;
  if (!t->vocab.slots || len == 0) return -1;
  for (uint32_t i = hash_more(hash_more(FNV_OFFSET, a, a_len), b, b_len) & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
    int32_t id = t->vocab.slots[i];
    if (id < 0) return -1;
    const char *text = rg_tok_text(t, id);
    if ((size_t)t->len[id] == len && memcmp(text, a, a_len) == 0 && memcmp(text + a_len, b, b_len) == 0) return id;
  }
}

int32_t rg_tok_find(const rg_tokenizer *t, const char *s, size_t len) { return find_concat(t, s, len, "", 0); }

int rg_tok_add_merge(rg_tokenizer *t, const char *left, size_t left_len, const char *right, size_t right_len) {
  int rank = t->n_merges;
  int32_t l = rg_tok_find(t, left, left_len), r = rg_tok_find(t, right, right_len);
  if (l < 0 || r < 0)
    return rg_error_set("%s: merge %d ('%.*s %.*s') uses a token not in the vocabulary", t->source, rank,
                        (int)left_len, left, (int)right_len, right);
  int32_t m = find_concat(t, left, left_len, right, right_len);
  if (m < 0)
    return rg_error_set("%s: merge %d ('%.*s %.*s') makes a token not in the vocabulary", t->source, rank,
                        (int)left_len, left, (int)right_len, right);
  if ((rank & (rank - 1)) == 0) { /* grow at powers of two */
    rg_merge *mg = realloc(t->merges, sizeof *mg * (size_t)(rank ? 2 * rank : 1));
    if (!mg) return rg_error_set("%s: out of memory", t->source);
    t->merges = mg;
  }
  t->merges[rank] = (rg_merge){l, r, m};
  t->n_merges++;
  return 0;
}

int rg_tok_index_merges(rg_tokenizer *t) {
  uint32_t cap = table_size(t->n_merges);
  t->pairs.keys = malloc(sizeof *t->pairs.keys * cap);
  t->pairs.vals = malloc(sizeof *t->pairs.vals * cap);
  if (!t->pairs.keys || !t->pairs.vals) return rg_error_set("%s: out of memory", t->source);
  memset(t->pairs.vals, 0xff, sizeof *t->pairs.vals * cap);
  t->pairs.mask = cap - 1;
  for (int32_t k = 0; k < t->n_merges; k++) {
    uint64_t key = ((uint64_t)(uint32_t)t->merges[k].left << 32) | (uint32_t)t->merges[k].right;
    uint64_t h = key * 0x9E3779B97F4A7C15ull; /* same hash as tokenizer_bpe.c's pair_rank */
    uint32_t i = (uint32_t)(h >> 32) & t->pairs.mask;
    while (t->pairs.vals[i] >= 0 && t->pairs.keys[i] != key) i = (i + 1) & t->pairs.mask;
    if (t->pairs.vals[i] < 0) { /* a repeated rule keeps its first (best) rank */
      t->pairs.keys[i] = key;
      t->pairs.vals[i] = k;
    }
  }
  return 0;
}

int rg_tok_add_added(rg_tokenizer *t, int32_t id, bool special) {
  if (id < 0 || id >= t->n_vocab) return rg_error_set("%s: added token id %d out of range", t->source, (int)id);
  /* special[] is kept per id, so an id listed twice is special when either
   * listing says so, and its second entry matches the same text as the
   * first: harmless, and not searched for (that search made loading
   * quadratic in the number of added tokens: 20 s for 100k of them). */
  if (special) t->special[id] = true;
  const int n = t->n_added;
  if ((n & (n - 1)) == 0) { /* grow at powers of two */
    int32_t *a = realloc(t->added, sizeof *a * (size_t)(n ? 2 * n : 1));
    if (!a) return rg_error_set("%s: out of memory", t->source);
    t->added = a;
  }
  t->added[t->n_added++] = id;
  return 0;
}

void rg_tok_find_byte_tokens(rg_tokenizer *t) {
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_token[b] = rg_tok_find(t, name, 6);
  }
}

int rg_tok_add_regex(rg_tokenizer *t, const char *pattern, size_t len, bool literal, rg_split_behavior behavior,
                     bool prefix_space) {
  pcre2_code *re = NULL;
  if (pattern) {
    int err;
    PCRE2_SIZE at;
    /* PCRE2_LITERAL admits only a few other options (pcre2_compile(3): UTF
     * is one, UCP is not, and asking for it fails every literal pattern with
     * "invalid option bits with PCRE2_LITERAL"). A literal has no character
     * classes, so UCP would change nothing; UTF keeps matches on character
     * boundaries. */
    uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    re = pcre2_compile((PCRE2_SPTR)pattern, len, options, &err, &at, NULL);
    if (!re) {
      PCRE2_UCHAR msg[120];
      pcre2_get_error_message(err, msg, sizeof msg);
      return rg_error_set("%s: pre-tokenizer regex '%.*s': %s at offset %zu", t->source, (int)len, pattern,
                          (const char *)msg, (size_t)at);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if JIT is unavailable */
  }
  char *source = pattern ? malloc(len + 1) : NULL;
  rg_pretok_step *s = !pattern || source ? realloc(t->steps, sizeof *s * (size_t)(t->n_steps + 1)) : NULL;
  if (!s) {
    pcre2_code_free(re);
    free(source);
    return rg_error_set("%s: out of memory", t->source);
  }
  if (source) {
    memcpy(source, pattern, len);
    source[len] = '\0';
  }
  t->steps = s;
  t->steps[t->n_steps++] = (rg_pretok_step){
      .re = re, .behavior = behavior, .prefix_space = prefix_space, .pattern = source, .literal = literal};
  return 0;
}

void rg_tokenizer_free(rg_tokenizer *t) {
  if (!t) return;
  free(t->texts);
  free(t->text_off);
  free(t->len);
  free(t->score);
  free(t->special);
  free(t->vocab.slots);
  free(t->merges);
  free(t->pairs.keys);
  free(t->pairs.vals);
  free(t->added);
  for (int i = 0; i < t->n_steps; i++) {
    pcre2_code_free(t->steps[i].re);
    free(t->steps[i].pattern);
  }
  free(t->steps);
  free(t->source);
  free(t);
}

/* ---------------------------------------------------------------- accessors */

rg_tokenizer_kind rg_tokenizer_kind_of(const rg_tokenizer *t) { return t->kind; }
int rg_tokenizer_vocab_size(const rg_tokenizer *t) { return t->n_vocab; }
int32_t rg_tokenizer_bos(const rg_tokenizer *t) { return t->bos; }
int32_t rg_tokenizer_eos(const rg_tokenizer *t) { return t->eos; }
int32_t rg_tokenizer_pad(const rg_tokenizer *t) { return t->pad; }
int32_t rg_tokenizer_unk(const rg_tokenizer *t) { return t->unk; }
bool rg_tokenizer_adds_bos(const rg_tokenizer *t) { return t->add_bos && t->bos >= 0; }

const char *rg_token_text(const rg_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab ? rg_tok_text(t, id) : NULL;
}

int32_t rg_token_lookup(const rg_tokenizer *t, const char *text) { return rg_tok_find(t, text, strlen(text)); }

bool rg_token_is_special(const rg_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->special[id]; }

/* ---------------------------------------------------------------- encoding */

int rg_idbuf_push(rg_idbuf *b, int32_t id) {
  if (b->n == b->cap) {
    int cap = b->cap ? b->cap * 2 : 64;
    int32_t *ids = realloc(b->ids, sizeof *ids * (size_t)cap);
    if (!ids) return rg_error_set("tokenizer: out of memory");
    b->ids = ids;
    b->cap = cap;
  }
  b->ids[b->n++] = id;
  return 0;
}

/* ---------------------------------------------------------------- decoding */

typedef struct {
  char *s;
  size_t n, cap;
} strbuf;

static int sb_put(strbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) return rg_error_set("tokenizer: out of memory");
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  return 0;
}

/* Byte-level: each code point maps back to a byte; a token with any code
 * point outside the map (an added token such as "<|im_start|>" may hold
 * one) is emitted as its raw text, as Hugging Face's ByteLevel decoder does. */
static int decode_byte_level(const char *tok, size_t n, strbuf *b) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    i += (size_t)rg_utf8_get(tok + i, n - i, &cp);
    if (rg_cp_to_byte(cp) < 0) return sb_put(b, tok, n);
  }
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    i += (size_t)rg_utf8_get(tok + i, n - i, &cp);
    char byte = (char)rg_cp_to_byte(cp);
    if (sb_put(b, &byte, 1)) return -1;
  }
  return 0;
}

/* SentencePiece: <0xXX> is a raw byte, U+2581 is a space. */
static int decode_spm(const rg_tokenizer *t, int32_t id, strbuf *b) {
  const char *tok = rg_tok_text(t, id);
  size_t n = (size_t)t->len[id];
  unsigned byte;
  if (n == 6 && sscanf(tok, "<0x%2X>", &byte) == 1 && t->byte_token[byte & 0xFF] == id) {
    char c = (char)byte;
    return sb_put(b, &c, 1);
  }
  for (size_t i = 0; i < n;) {
    if (i + 3 <= n && memcmp(tok + i, "\xE2\x96\x81", 3) == 0) {
      if (sb_put(b, " ", 1)) return -1;
      i += 3;
    } else {
      if (sb_put(b, tok + i, 1)) return -1;
      i++;
    }
  }
  return 0;
}

char *rg_detokenize(const rg_tokenizer *t, const int32_t *ids, int n_ids, bool skip_special) {
  strbuf b = {0};
  for (int i = 0; i < n_ids; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= t->n_vocab) {
      free(b.s);
      rg_error_set("%s: token id %d out of range (vocab %d)", t->source, (int)id, t->n_vocab);
      return NULL;
    }
    if (skip_special && t->special[id]) continue;
    int rc = t->kind == RG_TOK_BPE_BYTE ? decode_byte_level(rg_tok_text(t, id), (size_t)t->len[id], &b) : decode_spm(t, id, &b);
    if (rc) {
      free(b.s);
      return NULL;
    }
  }
  size_t start = t->strip_decoded_space && b.n > 0 && b.s[0] == ' ' ? 1 : 0;
  size_t n;
  char *out = rg_utf8_repair(b.s ? b.s + start : "", b.n - start, &n);
  free(b.s);
  return out;
}
