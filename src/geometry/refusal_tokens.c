/* refusal_tokens.c: the fewest first tokens, and the most common opening, of a checkpoint's refusals. */
#include "geometry/refusal_tokens.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

typedef struct {
  int32_t id;
  int refused, complied; /* replies this token opens, by the judge's verdict */
} token_count;

static int by_refused_then_id(const void *a, const void *b) {
  const token_count *x = a, *y = b;
  if (x->refused != y->refused) return x->refused > y->refused ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b) {
  const token_count *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

int rg_refusal_tokens_fit(const int32_t *first, const bool *refused, int n, double coverage, int32_t *ids,
                          int max_ids, double *covered) {
  *covered = NAN;
  token_count *counts = malloc((size_t)(n > 0 ? n : 1) * sizeof *counts);
  if (!counts) return rg_error_set("refusal tokens: out of memory");
  int n_refused = 0, n_opened = 0, n_distinct = 0;
  for (int i = 0; i < n; i++) {
    n_refused += refused[i];
    if (first[i] >= 0) counts[n_opened++] = (token_count){first[i], refused[i], !refused[i]};
  }
  qsort(counts, (size_t)n_opened, sizeof *counts, by_id);
  for (int i = 0; i < n_opened; i++) {
    token_count *last = n_distinct > 0 ? &counts[n_distinct - 1] : NULL;
    if (last && last->id == counts[i].id) {
      last->refused += counts[i].refused;
      last->complied += counts[i].complied;
    } else {
      counts[n_distinct++] = counts[i];
    }
  }
  qsort(counts, (size_t)n_distinct, sizeof *counts, by_refused_then_id);
  int k = 0, got = 0;
  /* coverage is a share of all refusals: an empty refusal (no first token)
   * counts against it, as no token can open it */
  for (int c = 0; c < n_distinct && k < max_ids && (double)got < coverage * n_refused; c++) {
    if (counts[c].refused <= counts[c].complied) continue; /* opens answers as often: not a refusal token */
    ids[k++] = counts[c].id;
    got += counts[c].refused;
  }
  if (k > 0) *covered = (double)got / n_refused;
  free(counts);
  return k;
}

/* The length of an opening: its tokens before the first -1. */
static int opening_len(const int32_t *o, int k) {
  int len = 0;
  while (len < k && o[len] >= 0) len++;
  return len;
}

int rg_refusal_opening_fit(const int32_t *opening, int k, const bool *refused, int n, int32_t *ids) {
  int best = -1, best_count = 0;
  /* quadratic in the refusals: a step judges tens of replies */
  for (int i = 0; i < n; i++) {
    const int32_t *oi = opening + (size_t)i * k;
    if (!refused[i] || opening_len(oi, k) == 0) continue;
    int count = 0;
    for (int j = 0; j < n; j++)
      if (refused[j] && memcmp(oi, opening + (size_t)j * k, (size_t)k * sizeof *oi) == 0) count++;
    if (count > best_count) best = i, best_count = count;
  }
  if (best < 0) return 0;
  const int32_t *ob = opening + (size_t)best * k;
  int len = opening_len(ob, k);
  for (int j = 0; j < len; j++) ids[j] = ob[j];
  return len;
}
