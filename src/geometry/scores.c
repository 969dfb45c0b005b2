#include "geometry/scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/context_len.h"
#include "model/forward.h"
#include "util/error.h"
#include "util/logsumexp.h"

double rg_refusal_score(const float *logits, int vocab, const int32_t *refusal_ids, int n_refusal) {
  double lse = rg_log_sum_exp(logits, vocab), p = 0;
  for (int k = 0; k < n_refusal; k++) p += exp((double)logits[refusal_ids[k]] - lse);
  return log(p + 1e-8) - log(1.0 - p + 1e-8);
}

double rg_kl_logits(const float *base, const float *other, int vocab) {
  double lse_p = rg_log_sum_exp(base, vocab), lse_q = rg_log_sum_exp(other, vocab), kl = 0;
  for (int v = 0; v < vocab; v++) {
    double p = exp((double)base[v] - lse_p), q = exp((double)other[v] - lse_q);
    kl += p * (log(p + 1e-6) - log(q + 1e-6));
  }
  return kl;
}

int rg_refusal_tokens_default(const rg_tokenizer *t, int32_t *ids) {
  int32_t *tok = NULL;
  int n = 0;
  if (rg_tokenize(t, "I", 1, false, false, &tok, &n) < 0) return -1;
  int ok = n == 1;
  if (ok) ids[0] = tok[0];
  free(tok);
  if (!ok) return rg_error_set("refusal tokens: \"I\" is %d tokens in this tokenizer; name the refusal tokens", n);
  return 1;
}

struct rg_scorer {
  const rg_model *m;
  rg_weights *w;
  rg_session *s;
  int vocab, d_model, n_harmful, n_harmless;
  const int32_t **ids; /* harmful then harmless prompts, one prefill batch */
  int *lens;
  int32_t *refusal;
  int n_refusal;
  float *logits;      /* [n_harmful + n_harmless, vocab] */
  float *base_logits; /* [n_harmless, vocab], unintervened */
  float *dir;         /* float32 copy of the candidate, as the hooks take it */
  double base_harmful, base_harmless;
};

/* Mean refusal score of rows [from, from + n) of sc->logits. */
static double mean_score(const rg_scorer *sc, int from, int n) {
  double sum = 0;
  for (int i = from; i < from + n; i++)
    sum += rg_refusal_score(sc->logits + (size_t)i * sc->vocab, sc->vocab, sc->refusal, sc->n_refusal);
  return sum / n;
}

static int check_batch(const rg_token_batch *b, int vocab, const char *what) {
  if (b->n < 1) return rg_error_set("scores: no %s prompts", what);
  for (int i = 0; i < b->n; i++) {
    if (b->lens[i] < 1) return rg_error_set("scores: %s prompt %d is empty", what, i);
    for (int j = 0; j < b->lens[i]; j++)
      if (b->ids[i][j] < 0 || b->ids[i][j] >= vocab)
        return rg_error_set("scores: %s prompt %d has token id %d outside the vocabulary", what, i, b->ids[i][j]);
  }
  return 0;
}

rg_scorer *rg_scorer_new(const rg_model *m, const rg_token_batch *harmful, const rg_token_batch *harmless,
                         const int32_t *refusal_ids, int n_refusal, int threads) {
  int vocab = m->cfg.vocab_size;
  if (check_batch(harmful, vocab, "harmful") < 0 || check_batch(harmless, vocab, "harmless") < 0) return NULL;
  if (n_refusal < 1) {
    rg_error_set("scores: no refusal tokens");
    return NULL;
  }
  for (int k = 0; k < n_refusal; k++)
    if (refusal_ids[k] < 0 || refusal_ids[k] >= vocab) {
      rg_error_set("refusal tokens: id %d outside the vocabulary (%d)", refusal_ids[k], vocab);
      return NULL;
    }
  rg_scorer *sc = calloc(1, sizeof *sc);
  if (!sc) {
    rg_error_set("scores: out of memory");
    return NULL;
  }
  sc->m = m;
  sc->vocab = vocab;
  sc->d_model = m->cfg.d_model;
  sc->n_harmful = harmful->n;
  sc->n_harmless = harmless->n;
  int n = harmful->n + harmless->n, max_len = 0;
  long long total = 0;
  sc->ids = malloc((size_t)n * sizeof *sc->ids);
  sc->lens = malloc((size_t)n * sizeof *sc->lens);
  sc->refusal = malloc((size_t)n_refusal * sizeof *sc->refusal);
  sc->logits = malloc((size_t)n * vocab * sizeof *sc->logits);
  sc->base_logits = malloc((size_t)harmless->n * vocab * sizeof *sc->base_logits);
  sc->dir = malloc((size_t)sc->d_model * sizeof *sc->dir);
  if (!sc->ids || !sc->lens || !sc->refusal || !sc->logits || !sc->base_logits || !sc->dir) {
    rg_error_set("scores: out of memory");
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    const rg_token_batch *b = i < harmful->n ? harmful : harmless;
    int j = i < harmful->n ? i : i - harmful->n;
    sc->ids[i] = b->ids[j];
    sc->lens[i] = b->lens[j];
    max_len = b->lens[j] > max_len ? b->lens[j] : max_len;
    total += b->lens[j];
  }
  memcpy(sc->refusal, refusal_ids, (size_t)n_refusal * sizeof *sc->refusal);
  sc->n_refusal = n_refusal;
  /* One prefill call per batch where it fits: fewer, larger matrix products
   * are what makes 2 cores fast; 4096 tokens keep the activation buffers at
   * a few tens of MB for small models. */
  if (rg_context_len(&m->cfg, max_len, 0, &max_len) < 0) goto fail;
  rg_session_opts so = {.max_batch_tokens = total < 4096 ? (int)total : 4096};
  rg_backend_opts bo = {.threads = threads};
  if (!(sc->w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO)) || !(sc->s = rg_session_new(sc->w, n, max_len, &so)))
    goto fail;
  if (rg_session_prefill(sc->s, sc->ids, sc->lens, n, sc->logits) < 0) goto fail;
  memcpy(sc->base_logits, sc->logits + (size_t)harmful->n * vocab, (size_t)harmless->n * vocab * sizeof(float));
  sc->base_harmful = mean_score(sc, 0, harmful->n);
  sc->base_harmless = mean_score(sc, harmful->n, harmless->n);
  return sc;
fail:
  rg_scorer_free(sc);
  return NULL;
}

void rg_scorer_free(rg_scorer *sc) {
  if (!sc) return;
  rg_session_free(sc->s);
  rg_weights_free(sc->w);
  free(sc->ids);
  free(sc->lens);
  free(sc->refusal);
  free(sc->logits);
  free(sc->base_logits);
  free(sc->dir);
  free(sc);
}

double rg_scorer_base_harmful(const rg_scorer *sc) { return sc->base_harmful; }
double rg_scorer_base_harmless(const rg_scorer *sc) { return sc->base_harmless; }

int rg_scorer_score(rg_scorer *sc, const double *r, int layer, double *bypass, double *induce, double *kl) {
  if (layer < 0 || layer >= sc->m->cfg.n_layers)
    return rg_error_set("scores: layer %d outside [0, %d)", layer, sc->m->cfg.n_layers);
  /* RD casts the direction to the activation dtype before the hooks use it. */
  for (int k = 0; k < sc->d_model; k++) sc->dir[k] = (float)r[k];
  int nh = sc->n_harmful, nl = sc->n_harmless, rc = 0;

  rg_intervention ablate = {.ablate_dir = sc->dir};
  if (rg_session_set_intervention(sc->s, &ablate) < 0 ||
      rg_session_prefill(sc->s, sc->ids, sc->lens, nh + nl, sc->logits) < 0) {
    rc = -1;
    goto end;
  }
  *bypass = mean_score(sc, 0, nh);
  double sum = 0;
  for (int i = 0; i < nl; i++)
    sum += rg_kl_logits(sc->base_logits + (size_t)i * sc->vocab, sc->logits + (size_t)(nh + i) * sc->vocab,
                        sc->vocab);
  *kl = sum / nl;

  rg_intervention add = {.actadd_vec = sc->dir, .actadd_layer = layer, .actadd_coeff = 1.0f};
  if (rg_session_set_intervention(sc->s, &add) < 0 ||
      rg_session_prefill(sc->s, sc->ids + nh, sc->lens + nh, nl, sc->logits + (size_t)nh * sc->vocab) < 0) {
    rc = -1;
    goto end;
  }
  *induce = mean_score(sc, nh, nl);
end:
  rg_session_set_intervention(sc->s, NULL);
  return rc;
}
