/* generate.c: the decode loop and the samplers of generate.h. */
#include "engine/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

/* ---------------------------------------------------------------- PRNG */

/* xoshiro256** (Blackman & Vigna), state seeded by splitmix64. */
typedef struct {
  uint64_t s[4];
} rng;

static void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = rg_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

/* Uniform in [0, 1). */
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------- samplers */

int rg_argmax(const float *logits, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

typedef struct {
  double p;
  int id;
} cand;

static int cand_desc(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return x->id - y->id;
}

/* Temperature + top-p draw; cands is scratch of n entries. */
static int sample(const float *logits, int n, float temperature, float top_p, rng *r, cand *cands) {
  const int top = rg_argmax(logits, n);
  const double mx = logits[top] / (double)temperature;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    cands[i].p = exp(logits[i] / (double)temperature - mx);
    cands[i].id = i;
    sum += cands[i].p;
  }
  int keep = n;
  if (top_p < 1) {
    qsort(cands, (size_t)n, sizeof *cands, cand_desc);
    double cum = 0;
    for (keep = 0; keep < n;) {
      cum += cands[keep++].p / sum;
      if (cum >= top_p) break;
    }
    sum = 0;
    for (int i = 0; i < keep; i++) sum += cands[i].p;
  }
  double u = rng_uniform(r) * sum, acc = 0;
  for (int i = 0; i < keep; i++) {
    acc += cands[i].p;
    if (u < acc) return cands[i].id;
  }
  return cands[keep - 1].id; /* u landed on the rounding slack at the end */
}

/* ---------------------------------------------------------------- the loop */

void rg_gen_results_free(rg_gen_result *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].ids);
    r[i] = (rg_gen_result){0};
  }
}

static bool is_stop(const rg_gen_opts *o, int32_t id) {
  for (int i = 0; i < o->n_stop; i++)
    if (o->stop_ids[i] == id) return true;
  return false;
}

int rg_generate(rg_session *s, const int32_t *const *prompts, const int *lens, int n, const rg_gen_opts *o,
                rg_gen_result *out) {
  const int V = rg_session_vocab(s);
  if (n < 1 || n > rg_session_max_seqs(s)) return rg_error_set("generate: %d prompts, expected 1..%d", n, rg_session_max_seqs(s));
  if (o->max_new_tokens < 0) return rg_error_set("generate: max_new_tokens %d is negative", o->max_new_tokens);
  if (o->temperature > 0 && !(o->top_p > 0 && o->top_p <= 1))
    return rg_error_set("generate: top_p %g is not in (0, 1]", o->top_p);
  memset(out, 0, (size_t)n * sizeof *out);
  float *logits = malloc((size_t)n * V * sizeof *logits);
  rng *rngs = malloc((size_t)n * sizeof *rngs);
  cand *cands = o->temperature > 0 ? malloc((size_t)V * sizeof *cands) : NULL;
  int *seq = malloc((size_t)n * sizeof *seq), *row_of = malloc((size_t)n * sizeof *row_of);
  int32_t *next = malloc((size_t)n * sizeof *next);
  bool *done = calloc((size_t)n, sizeof *done);
  int rc = -1;
  if (!logits || !rngs || (o->temperature > 0 && !cands) || !seq || !row_of || !next || !done) {
    rg_error_set("generate: out of memory");
    goto end;
  }
  for (int i = 0; i < n; i++) {
    rng_seed(&rngs[i], o->seeds ? o->seeds[i] : o->seed + (uint64_t)i);
    out[i].ids = malloc((size_t)(o->max_new_tokens > 0 ? o->max_new_tokens : 1) * sizeof(int32_t));
    if (!out[i].ids) {
      rg_error_set("generate: out of memory");
      goto end;
    }
    row_of[i] = i;
  }
  if (o->max_new_tokens == 0) {
    rc = 0;
    goto end;
  }
  if (rg_session_prefill(s, prompts, lens, n, logits) < 0) goto end;
  for (;;) {
    /* Pick each live sequence's next token from its logits row. */
    int n_feed = 0;
    for (int i = 0; i < n; i++) {
      if (done[i]) continue;
      const float *lg = logits + (size_t)row_of[i] * V;
      int32_t id = o->temperature > 0 ? sample(lg, V, o->temperature, o->top_p, &rngs[i], cands) : rg_argmax(lg, V);
      if (is_stop(o, id)) {
        out[i].stopped = done[i] = true;
        continue;
      }
      out[i].ids[out[i].n++] = id;
      if (out[i].n == o->max_new_tokens || rg_session_seq_len(s, i) >= rg_session_max_ctx(s)) {
        done[i] = true;
        continue;
      }
      seq[n_feed] = i;
      next[n_feed] = id;
      row_of[i] = n_feed++;
    }
    if (n_feed == 0) break;
    if (rg_session_decode(s, seq, next, n_feed, logits) < 0) goto end;
  }
  rc = 0;
end:
  if (rc < 0) rg_gen_results_free(out, n);
  free(logits);
  free(rngs);
  free(cands);
  free(seq);
  free(row_of);
  free(next);
  free(done);
  return rc;
}
