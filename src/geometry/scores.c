/* scores.c: refusal_direction's three candidate scores under a refusal measure, computed with the engine (scores.h). */
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

rg_refusal_measure rg_refusal_measure_tokens(const int32_t *ids, int n) {
  return (rg_refusal_measure){.mode = RG_SCORE_TOKENS, .refusal = ids, .n_refusal = n};
}

static int check_ids(const int32_t *ids, int n, int vocab, const char *what) {
  if (n < 1) return rg_error_set("scores: no %s", what);
  for (int k = 0; k < n; k++)
    if (ids[k] < 0 || ids[k] >= vocab)
      return rg_error_set("%s: id %d outside the vocabulary (%d)", what, ids[k], vocab);
  return 0;
}

int rg_refusal_measure_check(const rg_refusal_measure *rm, int vocab) {
  if (rm->mode == RG_SCORE_TOKENS) return check_ids(rm->refusal, rm->n_refusal, vocab, "refusal tokens");
  if (rm->mode != RG_SCORE_SEQUENCE) return rg_error_set("scores: unknown refusal score mode %d", (int)rm->mode);
  if (check_ids(rm->refusal, rm->n_refusal, vocab, "refusal string") < 0) return -1;
  return check_ids(rm->compliance, rm->n_compliance, vocab, "compliance string");
}

/* ---- prompts packed into the sequences a measure runs ----
 *
 * TOKENS runs each prompt as it is and reads the row of its last position.
 * SEQUENCE runs each prompt twice, followed by all but the last token of R
 * (sign +1) and of C (sign -1), and reads the rows that predict each token
 * of the string: the prompt's last position, then every appended one. A
 * prompt's KL row is its last position (in SEQUENCE, on its R sequence). */
typedef struct {
  int n_prompts, n_seqs, n_tok, n_rows;
  int32_t *ids;         /* [n_tok] every sequence's tokens, in sequence order */
  int *seq;             /* [n_tok] the chunk-local sequence of each token (set per chunk) */
  int *seq_tok_end;     /* [n_seqs] token offset past each sequence */
  int *seq_row_end;     /* [n_seqs] row offset past each sequence's rows */
  int *row;             /* [n_rows] the global token index of each row */
  int *row_local;       /* [n_rows] its chunk-local index (set per chunk) */
  int32_t *row_target;  /* [n_rows] the token a SEQUENCE row scores (-1 for TOKENS) */
  int *row_prompt;      /* [n_rows] */
  signed char *row_sign;/* [n_rows] */
  int *kl_row;          /* [n_prompts] */
  int max_seq_len;
  int32_t *sfx_ids;     /* [n_tok] scratch: a chunk's tokens after a shared prefix */
  int *sfx_seq;         /* [n_tok] */
} packed;

static void packed_free(packed *p) {
  free(p->ids), free(p->seq), free(p->seq_tok_end), free(p->seq_row_end), free(p->row), free(p->row_local);
  free(p->row_target), free(p->row_prompt), free(p->row_sign), free(p->kl_row);
  free(p->sfx_ids), free(p->sfx_seq);
  *p = (packed){0};
}

/* Appends one sequence: PROMPT then the first n_str - 1 tokens of STR (none
 * for TOKENS, STR NULL), its rows scoring STR with SIGN. */
static void pack_seq(packed *p, int prompt, const int32_t *ids, int len, const int32_t *str, int n_str, int sign) {
  int at = p->n_tok, extra = str ? n_str - 1 : 0;
  memcpy(p->ids + at, ids, (size_t)len * sizeof *ids);
  if (extra > 0) memcpy(p->ids + at + len, str, (size_t)extra * sizeof *str);
  p->n_tok += len + extra;
  if (len + extra > p->max_seq_len) p->max_seq_len = len + extra;
  int n_rows = str ? n_str : 1;
  for (int k = 0; k < n_rows; k++, p->n_rows++) {
    p->row[p->n_rows] = at + len - 1 + k;
    p->row_target[p->n_rows] = str ? str[k] : -1;
    p->row_prompt[p->n_rows] = prompt;
    p->row_sign[p->n_rows] = (signed char)sign;
  }
  p->seq_tok_end[p->n_seqs] = p->n_tok;
  p->seq_row_end[p->n_seqs] = p->n_rows;
  p->n_seqs++;
}

/* Packs the prompts of A then B (B may be NULL) for measure RM. */
static int pack(const rg_token_batch *a, const rg_token_batch *b, const rg_refusal_measure *rm, packed *p) {
  *p = (packed){0};
  const bool seq_mode = rm->mode == RG_SCORE_SEQUENCE;
  const int n = a->n + (b ? b->n : 0), per = seq_mode ? 2 : 1;
  const int rows_per = seq_mode ? rm->n_refusal + rm->n_compliance : 1;
  long long tok = 0;
  for (int i = 0; i < n; i++) {
    int len = i < a->n ? a->lens[i] : b->lens[i - a->n];
    tok += seq_mode ? 2LL * len + rm->n_refusal + rm->n_compliance - 2 : len;
  }
  if (tok > 1 << 30) return rg_error_set("scores: %lld tokens to score", tok);
  p->n_prompts = n;
  p->ids = malloc((size_t)(tok ? tok : 1) * sizeof *p->ids);
  p->seq = malloc((size_t)(tok ? tok : 1) * sizeof *p->seq);
  p->seq_tok_end = malloc((size_t)(n ? n * per : 1) * sizeof *p->seq_tok_end);
  p->seq_row_end = malloc((size_t)(n ? n * per : 1) * sizeof *p->seq_row_end);
  size_t rows = (size_t)(n ? n : 1) * rows_per;
  p->row = malloc(rows * sizeof *p->row);
  p->row_local = malloc(rows * sizeof *p->row_local);
  p->row_target = malloc(rows * sizeof *p->row_target);
  p->row_prompt = malloc(rows * sizeof *p->row_prompt);
  p->row_sign = malloc(rows * sizeof *p->row_sign);
  p->kl_row = malloc((size_t)(n ? n : 1) * sizeof *p->kl_row);
  p->sfx_ids = malloc((size_t)(tok ? tok : 1) * sizeof *p->sfx_ids);
  p->sfx_seq = malloc((size_t)(tok ? tok : 1) * sizeof *p->sfx_seq);
  if (!p->ids || !p->seq || !p->seq_tok_end || !p->seq_row_end || !p->row || !p->row_local || !p->row_target ||
      !p->row_prompt || !p->row_sign || !p->kl_row || !p->sfx_ids || !p->sfx_seq) {
    packed_free(p);
    return rg_error_set("scores: out of memory");
  }
  for (int i = 0; i < n; i++) {
    const int32_t *ids = i < a->n ? a->ids[i] : b->ids[i - a->n];
    int len = i < a->n ? a->lens[i] : b->lens[i - a->n];
    p->kl_row[i] = p->n_rows;
    if (!seq_mode) {
      pack_seq(p, i, ids, len, NULL, 0, 1);
    } else {
      pack_seq(p, i, ids, len, rm->refusal, rm->n_refusal, 1);
      pack_seq(p, i, ids, len, rm->compliance, rm->n_compliance, -1);
    }
  }
  return 0;
}

/* Where a pass starts: the whole model (X_IN NULL), or block FROM_LAYER
 * with its input X_IN[n_tok, d_model] (one chunk only). NO_SHARE: every
 * token runs in one call (a capture then sees the tokens in packed order). */
typedef struct {
  int from_layer;
  const float *x_in;
  bool no_share;
} pass_start;

/* A shared prefix shorter than this is run with each sequence: below it
 * the saving does not pay for the extra call. */
enum { MIN_SHARED_PREFIX = 8 };

/* The tokens that every sequence of [first, last) opens with, up to (not
 * including) each one's first scored row, so that every row is computed
 * after the prefix. */
static int shared_prefix(const packed *p, int first, int last) {
  const int tok0 = first ? p->seq_tok_end[first - 1] : 0, row0 = first ? p->seq_row_end[first - 1] : 0;
  int n = p->row[row0] - tok0; /* the first sequence's first row */
  for (int q = first + 1; q < last && n > 0; q++) {
    const int at = p->seq_tok_end[q - 1], first_row = p->row[p->seq_row_end[q - 1]] - at;
    if (first_row < n) n = first_row;
    int k = 0;
    while (k < n && p->ids[at + k] == p->ids[tok0 + k]) k++;
    n = k;
  }
  return n;
}

/* Runs the sequences [first, last) as their shared prefix of P tokens
 * (once, as sequence 0, copied to the others by rg_session_fork), then
 * every sequence's remaining tokens in one call whose logit rows are
 * written to LOGITS in the chunk's row order. */
static int eval_shared(rg_session *s, packed *p, int first, int last, int P, float *logits) {
  const int tok0 = first ? p->seq_tok_end[first - 1] : 0, row0 = first ? p->seq_row_end[first - 1] : 0;
  for (int t = 0; t < P; t++) p->sfx_seq[t] = 0;
  if (rg_session_eval(s, p->ids + tok0, p->sfx_seq, P, NULL, 0, NULL) < 0) return -1;
  for (int q = 1; q < last - first; q++)
    if (rg_session_fork(s, 0, q) < 0) return -1;
  int n = 0, r = row0;
  for (int q = first; q < last; q++) {
    const int start = q ? p->seq_tok_end[q - 1] : 0;
    const int offset = n - (start + P); /* a token's index in the suffix call, less its packed index */
    for (int t = start + P; t < p->seq_tok_end[q]; t++, n++) {
      p->sfx_ids[n] = p->ids[t];
      p->sfx_seq[n] = q - first;
    }
    for (; r < p->seq_row_end[q]; r++) p->row_local[r] = p->row[r] + offset;
  }
  return rg_session_eval(s, p->sfx_ids, p->sfx_seq, n, p->row_local + row0, r - row0, logits);
}

/* What a pass gives: SCORE[n_prompts] (NULL: none); from prompt KL_FROM on,
 * with KL_BASE[.., vocab] the reference rows, KL[..] the divergences of the
 * prompts' KL rows, and KL_KEEP[.., vocab] a copy of those rows (each NULL:
 * not wanted). */
typedef struct {
  double *score;
  int kl_from;
  const float *kl_base;
  double *kl;
  float *kl_keep;
} pass_out;

/* Runs P on session S in chunks of whole sequences that fit its max_seqs,
 * batch tokens and logit rows (each chunk after a reset, its sequences
 * numbered from 0; a prefix all its sequences share, a chat template's
 * system prompt, runs once), LOGITS[max_logit_rows, vocab] the scratch.
 * Returns 0, or -1 with the error set. */
static int run_packed(rg_session *s, packed *p, const rg_refusal_measure *rm, pass_start start, float *logits,
                      const pass_out *out) {
  const int vocab = rg_session_vocab(s), max_seqs = rg_session_max_seqs(s),
            max_tok = rg_session_max_batch_tokens(s), max_rows = rg_session_max_logit_rows(s);
  if (out->score)
    for (int i = 0; i < p->n_prompts; i++) out->score[i] = 0;
  for (int first = 0; first < p->n_seqs;) {
    const int tok0 = first ? p->seq_tok_end[first - 1] : 0, row0 = first ? p->seq_row_end[first - 1] : 0;
    int last = first;
    while (last < p->n_seqs && last - first < max_seqs && p->seq_tok_end[last] - tok0 <= max_tok &&
           p->seq_row_end[last] - row0 <= max_rows)
      last++;
    if (last == first) return rg_error_set("scores: a sequence of %d tokens does not fit the session",
                                           p->seq_tok_end[first] - tok0);
    if (start.x_in && (first > 0 || last < p->n_seqs))
      return rg_error_set("scores: a pass from layer %d must fit one call", start.from_layer);
    const int n_tok = p->seq_tok_end[last - 1] - tok0, n_rows = p->seq_row_end[last - 1] - row0;
    const int shared = start.x_in || start.no_share || last - first < 2 ? 0 : shared_prefix(p, first, last);
    rg_session_reset(s);
    int rc;
    if (shared >= MIN_SHARED_PREFIX) {
      rc = eval_shared(s, p, first, last, shared, logits);
    } else {
      for (int q = first, t = tok0; q < last; q++)
        for (; t < p->seq_tok_end[q]; t++) p->seq[t] = q - first;
      for (int r = 0; r < n_rows; r++) p->row_local[row0 + r] = p->row[row0 + r] - tok0;
      rc = start.x_in ? rg_session_eval_from(s, start.from_layer, start.x_in, p->ids, p->seq, n_tok, p->row_local,
                                             n_rows, logits)
                      : rg_session_eval(s, p->ids + tok0, p->seq + tok0, n_tok, p->row_local + row0, n_rows, logits);
    }
    if (rc < 0) return -1;
    for (int r = row0; r < row0 + n_rows; r++) {
      const float *lg = logits + (size_t)(r - row0) * vocab;
      const int i = p->row_prompt[r];
      if (out->score) {
        if (rm->mode == RG_SCORE_TOKENS)
          out->score[i] = rg_refusal_score(lg, vocab, rm->refusal, rm->n_refusal);
        else
          out->score[i] += p->row_sign[r] * ((double)lg[p->row_target[r]] - rg_log_sum_exp(lg, vocab));
      }
      if (r != p->kl_row[i] || i < out->kl_from) continue;
      const size_t at = (size_t)(i - out->kl_from) * vocab;
      if (out->kl) out->kl[i - out->kl_from] = rg_kl_logits(out->kl_base + at, lg, vocab);
      if (out->kl_keep) memcpy(out->kl_keep + at, lg, (size_t)vocab * sizeof *lg);
    }
    first = last;
  }
  return 0;
}

/* Logit rows a pass reads at once: 128 MiB of them (a 150k vocabulary
 * gives 220 rows, a sequence measure's 32 prompts about 400: two calls). */
static int logit_row_cap(int vocab, int n_rows) {
  long long cap = ((long long)128 << 20) / ((long long)vocab * (long long)sizeof(float));
  if (cap < 1) cap = 1;
  return n_rows < cap ? n_rows : (int)cap;
}

struct rg_scorer {
  const rg_model *m;
  rg_weights *own_w; /* NULL when the weights are borrowed */
  rg_session *s;
  int vocab, d_model, n_harmful, n_harmless;
  int32_t *measure_ids; /* the measure's ids, copied */
  rg_refusal_measure rm;
  packed both;        /* harmful then harmless: the base and ablation passes */
  packed harmless;    /* harmless alone: the induce pass */
  float *logits;      /* [max_logit_rows, vocab] scratch */
  float *base_logits; /* [n_harmless, vocab], unintervened, at each prompt's last position */
  float *dir;         /* float32 copy of the candidate, as the hooks take it */
  double *base_each;  /* [n_harmful + n_harmless] unintervened refusal scores */
  double *each;       /* [n_harmful + 2 n_harmless]: rg_scorer_score's per-prompt parts */
  double *pass_score; /* [n_harmful + n_harmless]: an ablation pass's scores */
  double base_harmful, base_harmless;
  /* The residual stream entering every block on the harmless prompts'
   * unintervened pass ([n_layers][harmless.n_tok, d_model]), so that induce
   * runs only the blocks from the candidate's layer on; NULL when that pass
   * does not fit one call or the stream is too large. */
  float *harmless_resid;
};

/* Most bytes of kept residual stream (an 8B model with 100 val prompts of
 * ~30 tokens needs ~1.6 GB: it then scores without the shortcut). */
static const size_t MAX_RESID_BYTES = (size_t)1 << 30;

/* Capture callback of keep_harmless_resid: block `layer`'s input rows. */
static void keep_rows(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d_model,
                      const int *seq, const int *pos) {
  rg_scorer *sc = user;
  memcpy(sc->harmless_resid + (size_t)layer * sc->harmless.n_tok * d_model, rows,
         (size_t)n_rows * d_model * sizeof(float));
}

/* Runs the harmless sequences unintervened in one call, keeping every
 * block's input (the shortcut of induce). Leaves harmless_resid NULL, and
 * returns 0, when they do not fit one call or the stream is too large to
 * keep; -1 with the error set on a failure. */
static int keep_harmless_resid(rg_scorer *sc) {
  const packed *h = &sc->harmless;
  const int L = sc->m->cfg.n_layers, d = sc->d_model;
  if (h->n_tok > rg_session_max_batch_tokens(sc->s) || h->n_seqs > rg_session_max_seqs(sc->s) ||
      h->n_rows > rg_session_max_logit_rows(sc->s) || (size_t)L * h->n_tok * d * sizeof(float) > MAX_RESID_BYTES)
    return 0;
  sc->harmless_resid = malloc((size_t)L * h->n_tok * d * sizeof *sc->harmless_resid);
  uint32_t *sites = malloc((size_t)L * sizeof *sites);
  if (!sc->harmless_resid || !sites) {
    free(sites);
    return rg_error_set("scores: out of memory");
  }
  for (int l = 0; l < L; l++) sites[l] = RG_HOOK_BIT(RG_HOOK_RESID_PRE);
  const rg_capture cap = {.fn = keep_rows, .user = sc, .layer_sites = sites};
  rg_session_set_capture(sc->s, &cap);
  const pass_out none = {0};
  const int rc = run_packed(sc->s, &sc->harmless, &sc->rm, (pass_start){.no_share = true}, sc->logits, &none);
  rg_session_set_capture(sc->s, NULL);
  free(sites);
  return rc;
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
                         const rg_refusal_measure *rm, int threads) {
  rg_backend_opts bo = {.threads = threads};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  rg_scorer *sc = w ? rg_scorer_new_on(w, harmful, harmless, rm) : NULL;
  if (sc) sc->own_w = w;
  else rg_weights_free(w);
  return sc;
}

/* The measure RM with its ids copied into the scorer. */
static int copy_measure(rg_scorer *sc, const rg_refusal_measure *rm) {
  const int n = rm->n_refusal + (rm->mode == RG_SCORE_SEQUENCE ? rm->n_compliance : 0);
  if (!(sc->measure_ids = malloc((size_t)n * sizeof *sc->measure_ids))) return rg_error_set("scores: out of memory");
  memcpy(sc->measure_ids, rm->refusal, (size_t)rm->n_refusal * sizeof *sc->measure_ids);
  sc->rm = *rm;
  sc->rm.refusal = sc->measure_ids;
  if (rm->mode == RG_SCORE_SEQUENCE) {
    memcpy(sc->measure_ids + rm->n_refusal, rm->compliance, (size_t)rm->n_compliance * sizeof *sc->measure_ids);
    sc->rm.compliance = sc->measure_ids + rm->n_refusal;
  }
  return 0;
}

rg_scorer *rg_scorer_new_on(const rg_weights *w, const rg_token_batch *harmful, const rg_token_batch *harmless,
                            const rg_refusal_measure *rm) {
  const rg_model *m = rg_weights_model(w);
  int vocab = m->cfg.vocab_size;
  if (check_batch(harmful, vocab, "harmful") < 0 || check_batch(harmless, vocab, "harmless") < 0 ||
      rg_refusal_measure_check(rm, vocab) < 0)
    return NULL;
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
  const int nh = harmful->n, nl = harmless->n;
  int max_len;
  if (copy_measure(sc, rm) < 0 || pack(harmful, harmless, &sc->rm, &sc->both) < 0 ||
      pack(harmless, NULL, &sc->rm, &sc->harmless) < 0)
    goto fail;
  if (rg_context_len(&m->cfg, sc->both.max_seq_len, 0, &max_len) < 0) goto fail;
  /* One call per pass where it fits: fewer, larger matrix products are what
   * makes 2 cores fast; 4096 tokens keep the activation buffers at a few
   * tens of MB for small models. */
  int batch = sc->both.n_tok < 4096 ? sc->both.n_tok : 4096;
  if (batch < sc->both.max_seq_len) batch = sc->both.max_seq_len;
  rg_session_opts so = {.max_batch_tokens = batch, .max_logit_rows = logit_row_cap(vocab, sc->both.n_rows)};
  sc->logits = malloc((size_t)so.max_logit_rows * vocab * sizeof *sc->logits);
  sc->base_logits = malloc((size_t)nl * vocab * sizeof *sc->base_logits);
  sc->dir = malloc((size_t)sc->d_model * sizeof *sc->dir);
  sc->base_each = malloc((size_t)(nh + nl) * sizeof *sc->base_each);
  sc->each = malloc((size_t)(nh + 2 * nl) * sizeof *sc->each);
  sc->pass_score = malloc((size_t)(nh + nl) * sizeof *sc->pass_score);
  if (!sc->logits || !sc->base_logits || !sc->dir || !sc->base_each || !sc->each || !sc->pass_score) {
    rg_error_set("scores: out of memory");
    goto fail;
  }
  if (!(sc->s = rg_session_new(w, sc->both.n_seqs, max_len, &so))) goto fail;
  const pass_out base = {.score = sc->base_each, .kl_from = nh, .kl_keep = sc->base_logits};
  if (run_packed(sc->s, &sc->both, &sc->rm, (pass_start){0}, sc->logits, &base) < 0) goto fail;
  sc->base_harmful = mean_of(sc->base_each, nh);
  sc->base_harmless = mean_of(sc->base_each + nh, nl);
  if (keep_harmless_resid(sc) < 0) goto fail;
  return sc;
fail:
  rg_scorer_free(sc);
  return NULL;
}

void rg_scorer_free(rg_scorer *sc) {
  if (!sc) return;
  rg_session_free(sc->s);
  rg_weights_free(sc->own_w);
  free(sc->measure_ids);
  packed_free(&sc->both);
  packed_free(&sc->harmless);
  free(sc->logits);
  free(sc->base_logits);
  free(sc->dir);
  free(sc->base_each);
  free(sc->each);
  free(sc->pass_score);
  free(sc->harmless_resid);
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
  const int nh = sc->n_harmful;
  rg_intervention ablate = {.ablate_dir = sc->dir};
  /* harmful then harmless: bypass is the harmful part */
  const pass_out out = {.score = sc->pass_score, .kl_from = nh, .kl_base = sc->base_logits, .kl = kl};
  int rc = rg_session_set_intervention(sc->s, &ablate);
  if (rc == 0) rc = run_packed(sc->s, &sc->both, &sc->rm, (pass_start){0}, sc->logits, &out);
  if (rc == 0) memcpy(bypass, sc->pass_score, (size_t)nh * sizeof *bypass);
  rg_session_set_intervention(sc->s, NULL);
  return rc;
}

int rg_scorer_induce_each(rg_scorer *sc, const double *r, int layer, double *induce) {
  if (layer < 0 || layer >= sc->m->cfg.n_layers)
    return rg_error_set("scores: layer %d outside [0, %d)", layer, sc->m->cfg.n_layers);
  set_dir(sc, r);
  /* Activation addition at `layer` leaves the blocks below it as they were
   * on the unintervened pass: start there when that pass's stream is kept. */
  rg_intervention add = {.actadd_vec = sc->dir, .actadd_layer = layer, .actadd_coeff = 1.0f};
  pass_start start = {0};
  if (sc->harmless_resid)
    start = (pass_start){.from_layer = layer,
                         .x_in = sc->harmless_resid + (size_t)layer * sc->harmless.n_tok * sc->d_model};
  const pass_out out = {.score = induce};
  if (rg_session_set_intervention(sc->s, &add) < 0) return -1;
  int rc = run_packed(sc->s, &sc->harmless, &sc->rm, start, sc->logits, &out);
  rg_session_set_intervention(sc->s, NULL);
  return rc;
}

int rg_scorer_score(rg_scorer *sc, const double *r, int layer, double *bypass, double *induce, double *kl) {
  if (layer < 0 || layer >= sc->m->cfg.n_layers)
    return rg_error_set("scores: layer %d outside [0, %d)", layer, sc->m->cfg.n_layers);
  const int nh = sc->n_harmful, nl = sc->n_harmless;
  double *b = sc->each, *k = b + nh, *in = k + nl;
  if (rg_scorer_ablate_each(sc, r, b, k) < 0 || rg_scorer_induce_each(sc, r, layer, in) < 0) return -1;
  *bypass = mean_of(b, nh);
  *kl = mean_of(k, nl);
  *induce = mean_of(in, nl);
  return 0;
}

int rg_prompt_refusal_scores(rg_session *s, const rg_token_batch *b, const rg_refusal_measure *rm, double *out) {
  if (b->n == 0) return 0;
  if (rg_refusal_measure_check(rm, rg_session_vocab(s)) < 0) return -1;
  packed p;
  if (pack(b, NULL, rm, &p) < 0) return -1;
  const int vocab = rg_session_vocab(s), rows = rg_session_max_logit_rows(s);
  float *logits = malloc((size_t)rows * vocab * sizeof *logits);
  int rc = logits ? 0 : rg_error_set("scores: out of memory");
  const pass_out po = {.score = out};
  if (rc == 0) rc = run_packed(s, &p, rm, (pass_start){0}, logits, &po);
  free(logits);
  packed_free(&p);
  return rc;
}
