/* scores.c: refusal_direction's three candidate scores, computed with the engine (scores.h). */
#include "geometry/scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/context_len.h"
#include "engine/forward.h"
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
  rg_weights *own_w; /* NULL when the weights are borrowed */
  rg_session *s;
  int vocab, d_model, n_harmful, n_harmless;
  const int32_t **ids; /* harmful then harmless prompts, one prefill batch */
  int *lens;
  int32_t *refusal;
  int n_refusal;
  float *logits;      /* [n_harmful + n_harmless, vocab] */
  float *base_logits; /* [n_harmless, vocab], unintervened */
  float *dir;         /* float32 copy of the candidate, as the hooks take it */
  double *base_each;  /* [n_harmful + n_harmless] unintervened refusal scores */
  double *each;       /* [n_harmful + 2 n_harmless]: rg_scorer_score's per-prompt parts */
  double base_harmful, base_harmless;
  /* The harmless prompts as one batch, and the residual stream entering
   * every block on its unintervened pass ([n_layers][n_tok, d_model]), so
   * that induce runs only the blocks from the candidate's layer on; NULL
   * when the batch does not fit one call or the stream is too large. */
  float *harmless_resid;
  int32_t *harmless_ids;
  int *harmless_seq, *harmless_last, harmless_tokens;
};

/* Most bytes of kept residual stream (an 8B model with 100 val prompts of
 * ~30 tokens needs ~1.6 GB: it then scores without the shortcut). */
static const size_t MAX_RESID_BYTES = (size_t)1 << 30;

/* Capture callback of keep_harmless_resid: block `layer`'s input rows. */
static void keep_rows(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d_model,
                      const int *seq, const int *pos) {
  rg_scorer *sc = user;
  memcpy(sc->harmless_resid + (size_t)layer * sc->harmless_tokens * d_model, rows,
         (size_t)n_rows * d_model * sizeof(float));
}

/* Runs the harmless prompts as one batch, unintervened, keeping every
 * block's input (the shortcut of induce). Leaves harmless_resid NULL, and
 * returns 0, when the batch does not fit one call or the stream is too
 * large to keep; -1 with the error set on a failure. */
static int keep_harmless_resid(rg_scorer *sc, int max_batch_tokens) {
  const int nh = sc->n_harmful, nl = sc->n_harmless, L = sc->m->cfg.n_layers, d = sc->d_model;
  int n = 0;
  for (int i = 0; i < nl; i++) n += sc->lens[nh + i];
  if (n > max_batch_tokens || (size_t)L * n * d * sizeof(float) > MAX_RESID_BYTES) return 0;
  sc->harmless_tokens = n;
  sc->harmless_ids = malloc((size_t)n * sizeof *sc->harmless_ids);
  sc->harmless_seq = malloc((size_t)n * sizeof *sc->harmless_seq);
  sc->harmless_last = malloc((size_t)nl * sizeof *sc->harmless_last);
  sc->harmless_resid = malloc((size_t)L * n * d * sizeof *sc->harmless_resid);
  uint32_t *sites = malloc((size_t)L * sizeof *sites);
  if (!sc->harmless_ids || !sc->harmless_seq || !sc->harmless_last || !sc->harmless_resid || !sites) {
    free(sites);
    return rg_error_set("scores: out of memory");
  }
  for (int i = 0, t = 0; i < nl; i++) {
    for (int j = 0; j < sc->lens[nh + i]; j++, t++) {
      sc->harmless_ids[t] = sc->ids[nh + i][j];
      sc->harmless_seq[t] = i;
    }
    sc->harmless_last[i] = t - 1;
  }
  for (int l = 0; l < L; l++) sites[l] = RG_HOOK_BIT(RG_HOOK_RESID_PRE);
  const rg_capture cap = {.fn = keep_rows, .user = sc, .layer_sites = sites};
  rg_session_reset(sc->s);
  rg_session_set_capture(sc->s, &cap);
  const int rc = rg_session_eval(sc->s, sc->harmless_ids, sc->harmless_seq, n, sc->harmless_last, 0, NULL);
  rg_session_set_capture(sc->s, NULL);
  free(sites);
  return rc;
}

/* Refusal scores of rows [from, from + n) of sc->logits into out[n]. */
static void row_scores(const rg_scorer *sc, int from, int n, double *out) {
  for (int i = 0; i < n; i++)
    out[i] = rg_refusal_score(sc->logits + (size_t)(from + i) * sc->vocab, sc->vocab, sc->refusal, sc->n_refusal);
}

/* Summed in index order, as numpy's mean of a short vector is. */
static double mean_of(const double *x, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += x[i];
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
  rg_backend_opts bo = {.threads = threads};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  rg_scorer *sc = w ? rg_scorer_new_on(w, harmful, harmless, refusal_ids, n_refusal) : NULL;
  if (sc) sc->own_w = w;
  else rg_weights_free(w);
  return sc;
}

rg_scorer *rg_scorer_new_on(const rg_weights *w, const rg_token_batch *harmful, const rg_token_batch *harmless,
                            const int32_t *refusal_ids, int n_refusal) {
  const rg_model *m = rg_weights_model(w);
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
  sc->base_each = malloc((size_t)n * sizeof *sc->base_each);
  sc->each = malloc((size_t)(n + harmless->n) * sizeof *sc->each);
  if (!sc->ids || !sc->lens || !sc->refusal || !sc->logits || !sc->base_logits || !sc->dir || !sc->base_each ||
      !sc->each) {
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
  if (!(sc->s = rg_session_new(w, n, max_len, &so))) goto fail;
  if (rg_session_prefill(sc->s, sc->ids, sc->lens, n, sc->logits) < 0) goto fail;
  memcpy(sc->base_logits, sc->logits + (size_t)harmful->n * vocab, (size_t)harmless->n * vocab * sizeof(float));
  for (int i = 0; i < n; i++)
    sc->base_each[i] = rg_refusal_score(sc->logits + (size_t)i * vocab, vocab, sc->refusal, sc->n_refusal);
  sc->base_harmful = mean_of(sc->base_each, harmful->n);
  sc->base_harmless = mean_of(sc->base_each + harmful->n, harmless->n);
  if (keep_harmless_resid(sc, so.max_batch_tokens) < 0) goto fail;
  return sc;
fail:
  rg_scorer_free(sc);
  return NULL;
}

void rg_scorer_free(rg_scorer *sc) {
  if (!sc) return;
  rg_session_free(sc->s);
  rg_weights_free(sc->own_w);
  free(sc->ids);
  free(sc->lens);
  free(sc->refusal);
  free(sc->logits);
  free(sc->base_logits);
  free(sc->dir);
  free(sc->base_each);
  free(sc->each);
  free(sc->harmless_resid);
  free(sc->harmless_ids);
  free(sc->harmless_seq);
  free(sc->harmless_last);
  free(sc);
}

double rg_scorer_base_harmful(const rg_scorer *sc) { return sc->base_harmful; }
double rg_scorer_base_harmless(const rg_scorer *sc) { return sc->base_harmless; }

void rg_scorer_base_each(const rg_scorer *sc, double *harmful, double *harmless) {
  memcpy(harmful, sc->base_each, (size_t)sc->n_harmful * sizeof *harmful);
  memcpy(harmless, sc->base_each + sc->n_harmful, (size_t)sc->n_harmless * sizeof *harmless);
}

static void set_dir(rg_scorer *sc, const double *r) {
  /* RD casts the direction to the activation dtype before the hooks use it. */
  for (int k = 0; k < sc->d_model; k++) sc->dir[k] = (float)r[k];
}

int rg_scorer_ablate_each(rg_scorer *sc, const double *r, double *bypass, double *kl) {
  set_dir(sc, r);
  int nh = sc->n_harmful, nl = sc->n_harmless, rc = 0;
  rg_intervention ablate = {.ablate_dir = sc->dir};
  if (rg_session_set_intervention(sc->s, &ablate) < 0 ||
      rg_session_prefill(sc->s, sc->ids, sc->lens, nh + nl, sc->logits) < 0)
    rc = -1;
  if (rc == 0) {
    row_scores(sc, 0, nh, bypass);
    for (int i = 0; i < nl; i++)
      kl[i] = rg_kl_logits(sc->base_logits + (size_t)i * sc->vocab, sc->logits + (size_t)(nh + i) * sc->vocab,
                           sc->vocab);
  }
  rg_session_set_intervention(sc->s, NULL);
  return rc;
}

int rg_scorer_induce_each(rg_scorer *sc, const double *r, int layer, double *induce) {
  if (layer < 0 || layer >= sc->m->cfg.n_layers)
    return rg_error_set("scores: layer %d outside [0, %d)", layer, sc->m->cfg.n_layers);
  set_dir(sc, r);
  int nh = sc->n_harmful, nl = sc->n_harmless, rc;
  /* Activation addition at `layer` leaves the blocks below it as they were
   * on the unintervened pass: start there when that pass's stream is kept. */
  rg_intervention add = {.actadd_vec = sc->dir, .actadd_layer = layer, .actadd_coeff = 1.0f};
  float *harmless_logits = sc->logits + (size_t)nh * sc->vocab;
  if (rg_session_set_intervention(sc->s, &add) < 0) return -1;
  if (sc->harmless_resid) {
    rg_session_reset(sc->s);
    rc = rg_session_eval_from(sc->s, layer,
                              sc->harmless_resid + (size_t)layer * sc->harmless_tokens * sc->d_model,
                              sc->harmless_ids, sc->harmless_seq, sc->harmless_tokens, sc->harmless_last, nl,
                              harmless_logits);
  } else {
    rc = rg_session_prefill(sc->s, sc->ids + nh, sc->lens + nh, nl, harmless_logits);
  }
  if (rc == 0) row_scores(sc, nh, nl, induce);
  rg_session_set_intervention(sc->s, NULL);
  return rc;
}

int rg_scorer_score(rg_scorer *sc, const double *r, int layer, double *bypass, double *induce, double *kl) {
  if (layer < 0 || layer >= sc->m->cfg.n_layers)
    return rg_error_set("scores: layer %d outside [0, %d)", layer, sc->m->cfg.n_layers);
  int nh = sc->n_harmful, nl = sc->n_harmless;
  double *b = sc->each, *k = b + nh, *in = k + nl;
  if (rg_scorer_ablate_each(sc, r, b, k) < 0 || rg_scorer_induce_each(sc, r, layer, in) < 0) return -1;
  *bypass = mean_of(b, nh);
  *kl = mean_of(k, nl);
  *induce = mean_of(in, nl);
  return 0;
}

int rg_prompt_refusal_scores(rg_session *s, const rg_token_batch *b, const int32_t *refusal_ids, int n_refusal,
                             double *out) {
  const int vocab = rg_session_vocab(s);
  int chunk = rg_session_max_seqs(s);
  if (rg_session_max_logit_rows(s) < chunk) chunk = rg_session_max_logit_rows(s);
  float *logits = malloc((size_t)chunk * vocab * sizeof *logits);
  if (!logits) return rg_error_set("scores: out of memory");
  int rc = 0;
  for (int first = 0; first < b->n && rc == 0; first += chunk) {
    int k = b->n - first < chunk ? b->n - first : chunk;
    rc = rg_session_prefill(s, b->ids + first, b->lens + first, k, logits);
    for (int i = 0; rc == 0 && i < k; i++)
      out[first + i] = rg_refusal_score(logits + (size_t)i * vocab, vocab, refusal_ids, n_refusal);
  }
  free(logits);
  return rc;
}
