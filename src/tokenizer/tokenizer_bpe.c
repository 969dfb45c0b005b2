/* tokenizer_bpe.c: the BPE merge loop for one pre-tokenized word.
 *
 * The word starts as one symbol per UTF-8 character. Candidate merges of
 * adjacent symbols sit in a min-heap keyed by (priority, left position):
 *  - by rank (Hugging Face BPE, GGUF "gpt2"): the pair (left id, right id)
 *    must be a merge rule; its priority is the rule's index;
 *  - by score (llama.cpp's SentencePiece tokenizer, GGUF "llama"): the
 *    concatenated text must be a token; its priority is minus its score.
 * Ties go to the leftmost pair, as in both references. A popped candidate is
 * stale when either symbol has changed since it was pushed. This is
 * O(n log n) per word, so a whole SentencePiece text (one "word") is cheap.
 * Symbols that end up without an id (characters missing from the vocab)
 * become <0xXX> byte tokens (byte_fallback), else <unk>, else are dropped, as
 * Hugging Face BPE does. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

typedef struct {
  size_t start;
  size_t len; /* 0 once merged into its left neighbour */
  int32_t id;
  int prev, next;
} symbol;

typedef struct {
  double priority;
  int left, right;
  size_t total_len; /* left.len + right.len when pushed: detects stale entries */
  int32_t merged;
} candidate;

typedef struct {
  candidate *items;
  int n;
} heap;

static bool before(const candidate *a, const candidate *b) {
  return a->priority < b->priority || (a->priority == b->priority && a->left < b->left);
}

static void heap_push(heap *h, candidate c) {
  int i = h->n++;
  h->items[i] = c;
  while (i > 0) {
    int parent = (i - 1) / 2;
    if (!before(&h->items[i], &h->items[parent])) break;
    candidate tmp = h->items[i];
    h->items[i] = h->items[parent];
    h->items[parent] = tmp;
    i = parent;
  }
}

static candidate heap_pop(heap *h) {
  candidate top = h->items[0];
  h->items[0] = h->items[--h->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && before(&h->items[l], &h->items[m])) m = l;
    if (r < h->n && before(&h->items[r], &h->items[m])) m = r;
    if (m == i) break;
    candidate tmp = h->items[i];
    h->items[i] = h->items[m];
    h->items[m] = tmp;
    i = m;
  }
  return top;
}

static int32_t pair_rank(const rg_tokenizer *t, int32_t left, int32_t right) {
  uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  for (uint32_t i = (uint32_t)(h >> 32) & t->pairs.mask;; i = (i + 1) & t->pairs.mask) {
    if (t->pairs.vals[i] < 0) return -1;
    if (t->pairs.keys[i] == key) return t->pairs.vals[i];
  }
}

/* Pushes the merge of symbols L and R if one exists. */
static void try_pair(const rg_tokenizer *t, const char *word, const symbol *sym, int l, int r, heap *h) {
  if (l < 0 || r < 0) return;
  candidate c = {.left = l, .right = r, .total_len = sym[l].len + sym[r].len};
  if (t->score == NULL) {
    if (sym[l].id < 0 || sym[r].id < 0) return;
    int32_t rank = pair_rank(t, sym[l].id, sym[r].id);
    if (rank < 0) return;
    c.priority = rank;
    c.merged = t->merges[rank].merged;
  } else {
    int32_t id = rg_tok_find(t, word + sym[l].start, c.total_len);
    if (id < 0) return;
    c.priority = -(double)t->score[id];
    c.merged = id;
  }
  heap_push(h, c);
}

/* Appends the ids for a symbol that has no token of its own. */
static int fallback(const rg_tokenizer *t, const char *s, size_t len, bool *last_unk, rg_idbuf *out) {
  if (t->byte_fallback) {
    bool all = true;
    for (size_t i = 0; i < len; i++) all = all && t->byte_token[(uint8_t)s[i]] >= 0;
    if (all) {
      for (size_t i = 0; i < len; i++)
        if (rg_idbuf_push(out, t->byte_token[(uint8_t)s[i]])) return -1;
      *last_unk = false;
      return 0;
    }
  }
  if (t->unk < 0) return 0;
  if (t->fuse_unk && *last_unk) return 0;
  *last_unk = true;
  return rg_idbuf_push(out, t->unk);
}

int rg_bpe_word(const rg_tokenizer *t, const char *word, size_t len, rg_idbuf *out) {
  if (len == 0) return 0;
  if (t->ignore_merges) {
    int32_t id = rg_tok_find(t, word, len);
    if (id >= 0) return rg_idbuf_push(out, id);
  }
  int rc = -1;
  symbol *sym = malloc(sizeof *sym * len);
  /* Each merge pushes at most two new candidates: n-1 + 2(n-1) entries. */
  heap h = {malloc(sizeof *h.items * (3 * len + 1)), 0};
  if (!sym || !h.items) {
    rg_error_set("tokenizer: out of memory");
    goto done;
  }
  int n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t cl = (size_t)rg_utf8_get(word + i, len - i, &cp);
    sym[n] = (symbol){.start = i, .len = cl, .id = rg_tok_find(t, word + i, cl), .prev = n - 1, .next = -1};
    if (n > 0) sym[n - 1].next = n;
    n++;
    i += cl;
  }
  for (int i = 0; i + 1 < n; i++) try_pair(t, word, sym, i, i + 1, &h);
  while (h.n > 0) {
    candidate c = heap_pop(&h);
    symbol *l = &sym[c.left], *r = &sym[c.right];
    if (l->len == 0 || r->len == 0 || l->next != c.right || l->len + r->len != c.total_len) continue;
    l->len += r->len;
    l->id = c.merged;
    l->next = r->next;
    if (r->next >= 0) sym[r->next].prev = c.left;
    r->len = 0;
    try_pair(t, word, sym, l->prev, c.left, &h);
    try_pair(t, word, sym, c.left, l->next, &h);
  }
  bool last_unk = false;
  for (int i = 0; i >= 0 && i < n; i = sym[i].next) {
    if (sym[i].id >= 0) {
      if (rg_idbuf_push(out, sym[i].id)) goto done;
      last_unk = false;
    } else if (fallback(t, word + sym[i].start, sym[i].len, &last_unk, out)) {
      goto done;
    }
  }
  rc = 0;
done:
  free(sym);
  free(h.items);
  return rc;
}
