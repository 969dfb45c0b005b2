/* gcg.c: Greedy Coordinate Gradient (Zou et al. 2023) as HarmBench runs it (gcg.h). */
#include "adv_ft/gcg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/rng.h"

void rg_gcg_disallowed_tokens(const rg_model *m, unsigned char *disallowed) {
  const rg_tokenizer *t = m->tokenizer;
  const int V = m->cfg.vocab_size;
  memset(disallowed, 0, (size_t)V);
  for (int32_t i = 3; i < V; i++) {
    char *s = rg_detokenize(t, &i, 1, false);
    const char *text = rg_token_text(t, i);
    /* rg_detokenize's C string ends at a NUL byte: a token that decodes to
     * "\0" comes back empty, and "\0" is not printable. Python's "" is. */
    bool bad = !s || (s[0] == '\0' && text && text[0] != '\0');
    for (const unsigned char *p = (const unsigned char *)s; !bad && *p; p++) bad = *p < 0x20 || *p > 0x7e;
    disallowed[i] = bad;
    free(s);
  }
  const int32_t special[] = {rg_tokenizer_bos(t), rg_tokenizer_eos(t), rg_tokenizer_pad(t), rg_tokenizer_unk(t)};
  for (int k = 0; k < 4; k++)
    if (special[k] >= 0 && special[k] < V) disallowed[special[k]] = 1;
}

static int check_case(const rg_gcg_case *c) {
  if (c->n < 2 || c->n_suffix < 1 || c->n_target < 1 || c->suffix_start < 0 ||
      c->suffix_start + c->n_suffix > c->n - c->n_target || c->n_target >= c->n)
    return rg_error_set("gcg: bad test case layout (%d tokens, suffix %d+%d, target %d)", c->n, c->suffix_start,
                        c->n_suffix, c->n_target);
  return 0;
}

int rg_gcg_token_grad(rg_session *train, const rg_gcg_case *c, rg_gcg_prefix prefix, float *grad, float *loss) {
  if (check_case(c) < 0) return -1;
  /* the pass covers ids[from, n): from = 0, or the suffix's start on top of the cached prefix */
  const int from = prefix == RG_GCG_WHOLE ? 0 : c->suffix_start, n = c->n - from, nt = c->n_target;
  const int d = rg_session_model(train)->cfg.d_model;
  int *seq = calloc((size_t)c->n, sizeof *seq), *rows = malloc((size_t)nt * sizeof *rows);
  float *scale = malloc((size_t)nt * sizeof *scale);
  float *losses = malloc((size_t)nt * sizeof *losses), *d_embed = malloc((size_t)n * d * sizeof *d_embed);
  int rc = seq && rows && scale && losses && d_embed ? 0 : rg_error_set("gcg: out of memory");
  for (int r = 0; rc == 0 && r < nt; r++) {
    rows[r] = n - nt - 1 + r; /* position t predicts token t + 1 */
    scale[r] = 1.0f / (float)nt;
  }
  if (rc == 0 && prefix == RG_GCG_PREFIX_KEPT && rg_session_seq_len(train, 0) < from)
    rc = rg_error_set("gcg: the session does not hold the %d-token prefix", from);
  if (rc == 0) {
    if (prefix == RG_GCG_PREFIX_KEPT) {
      rg_session_truncate(train, 0, from);
    } else {
      rg_session_reset(train);
      if (from > 0) rc = rg_session_eval(train, c->ids, seq, from, rows, 0, NULL);
    }
  }
  if (rc == 0) rc = rg_session_eval(train, c->ids + from, seq, n, rows, nt, NULL); /* the loss reads them on the backend */
  if (rc == 0) rc = rg_session_loss_ce(train, c->ids + c->n - nt, scale, losses);
  if (rc == 0) rc = rg_session_backward(train, NULL, d_embed);
  /* d loss / d onehot = (d loss / d embeddings) . E^T, since embeddings = onehot . E */
  if (rc == 0)
    rc = rg_session_embedding_products(train, d_embed + (size_t)(c->suffix_start - from) * d, c->n_suffix, grad);
  if (rc == 0) {
    double sum = 0;
    for (int r = 0; r < nt; r++) sum += losses[r];
    *loss = (float)(sum / nt);
  }
  free(seq), free(rows), free(scale), free(losses), free(d_embed);
  return rc < 0 ? rg_error_prefix("gcg token gradient") : 0;
}

typedef struct {
  float g;
  int32_t id;
} scored_token;

static int by_grad(const void *a, const void *b) {
  const scored_token *x = a, *y = b;
  if (x->g != y->g) return x->g < y->g ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int rg_gcg_top_k(float *grad, int n_suffix, int vocab, const unsigned char *disallowed, int top_k, int32_t *top) {
  const size_t total = (size_t)n_suffix * vocab;
  float gmax = grad[0];
  for (size_t i = 1; i < total; i++) gmax = fmaxf(gmax, grad[i]);
  for (int p = 0; p < n_suffix; p++)
    for (int v = 0; v < vocab; v++)
      if (disallowed[v]) grad[(size_t)p * vocab + v] = gmax + 1;
  /* top_k of -grad per position = the top_k smallest gradients */
  scored_token *st = malloc((size_t)vocab * sizeof *st);
  if (!st) return rg_error_set("gcg: out of memory ranking %d tokens", vocab);
  for (int p = 0; p < n_suffix; p++) {
    for (int v = 0; v < vocab; v++) st[v] = (scored_token){grad[(size_t)p * vocab + v], v};
    qsort(st, (size_t)vocab, sizeof *st, by_grad);
    for (int k = 0; k < top_k; k++) top[(size_t)p * top_k + k] = st[k].id;
  }
  free(st);
  return 0;
}

void rg_gcg_draw(const int32_t *top, int n_suffix, int top_k, const int32_t *suffix, int search_width,
                 uint64_t *rng, int32_t *cands) {
  for (int j = 0; j < search_width; j++) {
    int32_t *cand = cands + (size_t)j * n_suffix;
    memcpy(cand, suffix, (size_t)n_suffix * sizeof *cand);
    /* HarmBench: int64(arange(0, L, L / search_width))[j] */
    const int p = (int)floor((double)j * n_suffix / search_width);
    cand[p] = top[(size_t)p * top_k + (int)(rg_splitmix64(rng) % (uint64_t)top_k)];
  }
}

int rg_gcg_sample(float *grad, int n_suffix, int vocab, const unsigned char *disallowed, const int32_t *suffix,
                   int top_k, int search_width, uint64_t *rng, int32_t *cands) {
  int32_t *top = malloc((size_t)n_suffix * top_k * sizeof *top);
  if (!top) return rg_error_set("gcg: out of memory ranking %d tokens", vocab);
  const int rc = rg_gcg_top_k(grad, n_suffix, vocab, disallowed, top_k, top);
  if (rc == 0) rg_gcg_draw(top, n_suffix, top_k, suffix, search_width, rng, cands);
  free(top);
  return rc;
}

int rg_gcg_shared_tokens(const rg_gcg_case *c, const int32_t *cand) {
  int p = 0;
  while (p < c->n_suffix && cand[p] == c->ids[c->suffix_start + p]) p++;
  const int last = c->n - c->n_target - 1; /* the first row whose logits the loss reads */
  return c->suffix_start + p < last ? c->suffix_start + p : last;
}

/* HarmBench's sampler draws each position's token independently, so a step
 * repeats some candidates (about 1 in 20 at width 512, top-k 256, 20
 * positions). */
int rg_gcg_repeat_of(const int32_t *cands, int j, int n_suffix) {
  const int32_t *cand = cands + (size_t)j * n_suffix;
  for (int i = 0; i < j; i++)
    if (memcmp(cands + (size_t)i * n_suffix, cand, (size_t)n_suffix * sizeof *cand) == 0) return i;
  return -1;
}

int rg_gcg_candidate_losses(rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands, float *losses) {
  if (check_case(c) < 0) return -1;
  /* A candidate shares with the current test case every token before its
   * first changed suffix position (HarmBench's candidates change one
   * position each, so on average half the suffix is shared beside the
   * prefix). Those tokens of the current case are run once into sequence
   * 0; each candidate's sequence forks sequence 0's first cut[j] tokens
   * (rg_gcg_shared_tokens; their KV cache rows copied) and runs only the
   * rest. */
  const int n = c->n, nt = c->n_target, P = c->suffix_start;
  const int max_tokens = rg_session_max_batch_tokens(s), max_seqs = rg_session_max_seqs(s) - 1;
  const int max_rows = rg_session_max_logit_rows(s);
  if (max_seqs < 1 || n - P > max_tokens || nt > max_rows || n > rg_session_max_ctx(s))
    return rg_error_set("gcg: the session cannot hold a %d-token prefix and one %d-token candidate with %d target "
                        "rows beside it", P, n - P, nt);
  int32_t *ids = malloc((size_t)max_tokens * sizeof *ids), *targets = malloc((size_t)max_rows * sizeof *targets);
  int *seq = malloc((size_t)max_tokens * sizeof *seq), *rows = malloc((size_t)max_rows * sizeof *rows);
  int *cut = malloc((size_t)(n_cands > 0 ? n_cands : 1) * sizeof *cut);
  float *row_loss = malloc((size_t)max_rows * sizeof *row_loss);
  int *twin = malloc((size_t)(n_cands > 0 ? n_cands : 1) * sizeof *twin);
  int *batch = malloc((size_t)max_seqs * sizeof *batch); /* the candidates of a pass */
  int rc = ids && targets && seq && rows && cut && row_loss && twin && batch ? 0 : rg_error_set("gcg: out of memory");
  int shared = P; /* tokens of the current case sequence 0 holds */
  for (int j = 0; rc == 0 && j < n_cands; j++) {
    cut[j] = rg_gcg_shared_tokens(c, cands + (size_t)j * c->n_suffix);
    if (cut[j] > shared) shared = cut[j];
    twin[j] = rg_gcg_repeat_of(cands, j, c->n_suffix);
  }
  rg_session_reset(s);
  for (int at = 0; rc == 0 && at < shared; at += max_tokens) { /* sequence 0, in passes the session holds */
    const int len = shared - at < max_tokens ? shared - at : max_tokens;
    memset(seq, 0, (size_t)len * sizeof *seq);
    rc = rg_session_eval(s, c->ids + at, seq, len, NULL, 0, NULL);
  }
  for (int j0 = 0; rc == 0 && j0 < n_cands;) {
    /* as many candidates as the session's tokens, sequences and logit rows allow */
    int k = 0, tokens = 0;
    for (; j0 < n_cands && twin[j0] >= 0; j0++) {}
    while (j0 < n_cands && k < max_seqs && tokens + n - 1 - cut[j0] <= max_tokens && (k + 1) * nt <= max_rows) {
      /* the last target token is read by the loss, never fed: no row's
       * logits come from its position */
      const int j = j0, from = cut[j], tail = n - 1 - from;
      int32_t *x = ids + tokens;
      memcpy(x, c->ids + from, (size_t)tail * sizeof *x);
      if (from < P + c->n_suffix)
        memcpy(x, cands + (size_t)j * c->n_suffix + (from - P), (size_t)(P + c->n_suffix - from) * sizeof *x);
      for (int i = 0; i < tail; i++) seq[tokens + i] = k + 1;
      for (int r = 0; r < nt; r++) {
        rows[k * nt + r] = tokens + (n - nt - 1 + r) - from; /* position t predicts token t + 1 */
        targets[k * nt + r] = c->ids[n - nt + r];
      }
      rc = rg_session_fork(s, 0, k + 1);
      if (rc < 0) break;
      rg_session_truncate(s, k + 1, from);
      tokens += tail;
      batch[k++] = j;
      for (j0++; j0 < n_cands && twin[j0] >= 0; j0++) {}
    }
    /* The cross entropy runs on the backend: only k * nt losses come back,
     * not k * nt rows of vocabulary-sized logits. */
    if (rc == 0 && k > 0) rc = rg_session_eval_ce(s, ids, seq, tokens, rows, targets, k * nt, row_loss);
    for (int b = 0; rc == 0 && b < k; b++) {
      double sum = 0;
      for (int r = 0; r < nt; r++) sum += row_loss[b * nt + r];
      losses[batch[b]] = (float)(sum / nt);
    }
  }
  for (int j = 0; rc == 0 && j < n_cands; j++)
    if (twin[j] >= 0) losses[j] = losses[twin[j]];
  free(ids), free(targets), free(seq), free(rows), free(cut), free(row_loss), free(twin), free(batch);
  return rc < 0 ? rg_error_prefix("gcg candidate losses") : 0;
}

const char *rg_gcg_stop_reason_name(rg_gcg_stop_reason r) {
  return r == RG_GCG_MIN_LOSS ? "min_loss" : r == RG_GCG_NO_REFUSAL ? "no_refusal" : "steps";
}

int rg_gcg_retokenizes(const rg_tokenizer *t, const int32_t *cands, int n_cands, int L, unsigned char *keep) {
  for (int j = 0; j < n_cands; j++) {
    const int32_t *cand = cands + (size_t)j * L;
    char *text = rg_detokenize(t, cand, L, false);
    int32_t *ids = NULL;
    int n = 0;
    /* transformers' tokenizer(text, add_special_tokens=False): no BOS, but
     * the text of an added token such as "<|im_start|>" is that token */
    if (!text || rg_tokenize(t, text, strlen(text), true, false, &ids, &n) < 0) {
      free(text);
      return rg_error_prefix("gcg retokenization filter");
    }
    keep[j] = n == L && memcmp(ids, cand, (size_t)L * sizeof *ids) == 0;
    free(text), free(ids);
  }
  return 0;
}

/* The argmin of losses[0..n) among ok[j] (all when OK is NULL). */
static int best_candidate(const float *losses, int n, const unsigned char *ok) {
  int best = -1;
  for (int j = 0; j < n; j++)
    if ((!ok || ok[j]) && (best < 0 || losses[j] < losses[best])) best = j;
  return best;
}

int rg_gcg_kept_candidates(const int32_t *cands, int n, int L, const unsigned char *keep, int32_t *live, int *idx) {
  const bool none = !memchr(keep, 1, (size_t)n);
  int k = 0;
  for (int j = 0; j < n; j++)
    if (none || keep[j]) {
      memcpy(live + (size_t)k * L, cands + (size_t)j * L, (size_t)L * sizeof *live);
      idx[k++] = j;
    }
  return k;
}

/* Runs HarmBench's refusal check after step K if it is due: *stop = 1 when
 * the generation holds no refusal. Returns 0 or -1. */
static int refusal_check(const rg_gcg_stop_rule *r, int k, int steps, double loss, const int32_t *suffix, int L,
                         bool *stop) {
  *stop = false;
  if (!rg_gcg_stop_check_due(r, k, steps, loss)) return 0;
  char *gen = r->generate(r->user, suffix, L, r->n_gen_tokens);
  if (!gen) return rg_error_prefix("gcg refusal check at step %d", k + 1);
  *stop = rg_gcg_stop_decision(r, k, steps, loss, gen);
  free(gen);
  return 0;
}

/* Step 3, its candidates split over SHARD's ranks (NULL: all here) and the
 * losses gathered on every rank. */
static int shared_losses(rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands, rg_comm *shard,
                         float *losses) {
  const int P = shard ? rg_comm_size(shard) : 1;
  if (P == 1) return rg_gcg_candidate_losses(s, c, cands, n_cands, losses);
  const int me = rg_comm_rank(shard), lo = (int)((long)n_cands * me / P);
  const int n_mine = (int)((long)n_cands * (me + 1) / P) - lo;
  int *counts = malloc((size_t)P * sizeof *counts);
  float *mine = malloc((size_t)(n_cands / P + 1) * sizeof *mine); /* MPI's buffers may not overlap */
  int rc = counts && mine ? 0 : rg_error_set("gcg: out of memory");
  for (int r = 0; rc == 0 && r < P; r++) counts[r] = (int)((long)n_cands * (r + 1) / P - (long)n_cands * r / P);
  if (rc == 0 && n_mine > 0) rc = rg_gcg_candidate_losses(s, c, cands + (size_t)lo * c->n_suffix, n_mine, mine);
  /* every rank joins the gather, even after its own share failed, so
   * that none waits for it until the deadline */
  if (counts && mine && rg_comm_allgatherv(shard, losses, counts, mine) < 0 && rc == 0)
    rc = rg_error_prefix("gcg candidate losses");
  free(counts), free(mine);
  return rc;
}

/* Step 3 screened (rg_gcg_screened_losses), each pass's candidates split
 * over SHARD's ranks; every rank picks the same KEEP from the same
 * gathered screen losses. */
static int screened_losses(rg_session *screen, rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands,
                           int keep, const unsigned char *eligible, rg_comm *shard, float *losses,
                           unsigned char *verified) {
  const int L = c->n_suffix;
  if (keep < 1) return rg_error_set("gcg: screening keeps %d candidates (at least 1)", keep);
  int *pick = malloc((size_t)keep * sizeof *pick), *twin = malloc((size_t)n_cands * sizeof *twin);
  int32_t *again = malloc((size_t)keep * L * sizeof *again);
  float *exact = malloc((size_t)keep * sizeof *exact);
  int rc = pick && twin && again && exact ? 0 : rg_error_set("gcg: out of memory");
  if (rc == 0) rc = shared_losses(screen, c, cands, n_cands, shard, losses);
  /* verified[j] marks the candidates out of the running: picked,
   * ineligible, or a repeat (its first copy, with the same loss, is
   * eligible alike and comes first) */
  for (int j = 0; rc == 0 && j < n_cands; j++) {
    twin[j] = rg_gcg_repeat_of(cands, j, L);
    verified[j] = (eligible && !eligible[j]) || twin[j] >= 0;
  }
  int n_pick = 0;
  for (; rc == 0 && n_pick < keep; n_pick++) {
    int best = -1; /* the lowest screened loss left, a NaN last, ties to the first */
    for (int j = 0; j < n_cands; j++)
      if (!verified[j] && (best < 0 || losses[j] < losses[best] || (isnan(losses[best]) && !isnan(losses[j]))))
        best = j;
    if (best < 0) break;
    verified[best] = 1;
    pick[n_pick] = best;
    memcpy(again + (size_t)n_pick * L, cands + (size_t)best * L, (size_t)L * sizeof *again);
  }
  if (rc == 0) rc = shared_losses(s, c, again, n_pick, shard, exact);
  if (rc == 0) {
    memset(verified, 0, (size_t)n_cands);
    for (int i = 0; i < n_pick; i++) losses[pick[i]] = exact[i], verified[pick[i]] = 1;
    for (int j = 0; j < n_cands; j++) /* a repeat of a verified candidate is verified with it */
      if (twin[j] >= 0 && verified[twin[j]]) losses[j] = losses[twin[j]], verified[j] = 1;
  }
  free(pick), free(twin), free(again), free(exact);
  return rc;
}

int rg_gcg_screened_losses(rg_session *screen, rg_session *s, const rg_gcg_case *c, const int32_t *cands, int n_cands,
                           int keep, const unsigned char *eligible, float *losses, unsigned char *verified) {
  if (check_case(c) < 0) return -1;
  return screened_losses(screen, s, c, cands, n_cands, keep, eligible, NULL, losses, verified) < 0
             ? rg_error_prefix("gcg screened losses")
             : 0;
}

int rg_gcg_run(rg_session *train, rg_session *inf, const unsigned char *disallowed, int32_t *ids,
               const rg_gcg_case *layout, const rg_gcg_opts *o, float *losses, int *n_steps,
               rg_gcg_stop_reason *why) {
  rg_gcg_case cs = *layout;
  cs.ids = ids;
  const rg_gcg_case *c = &cs;
  if (why) *why = RG_GCG_ALL_STEPS;
  if (check_case(c) < 0) return -1;
  const int V = rg_session_vocab(train), L = c->n_suffix, W = o->search_width;
  if (o->steps < 0 || W < 1 || o->top_k < 1 || o->top_k > V)
    return rg_error_set("gcg: bad options (steps %d, search width %d, top-k %d of %d tokens)", o->steps, W, o->top_k,
                        V);
  if (o->stop && (o->stop->eval_steps < 1 || o->stop->n_gen_tokens < 1 || !o->stop->generate || !o->stop->refusals))
    return rg_error_set("gcg: bad refusal check (every %d steps, %d tokens)", o->stop->eval_steps,
                        o->stop->n_gen_tokens);
  const bool filter = o->retokenize_filter, screened = o->screen && o->screen_keep < W;
  float *grad = malloc((size_t)L * V * sizeof *grad), *cand_losses = malloc((size_t)W * sizeof(float));
  int32_t *cands = malloc((size_t)W * L * sizeof *cands);
  int32_t *top = o->sample ? NULL : malloc((size_t)L * o->top_k * sizeof *top);
  /* with the filter, the kept candidates (LIVE, at IDX of cands) are the ones evaluated */
  unsigned char *keep = filter ? malloc((size_t)W) : NULL;
  int32_t *live = filter ? malloc((size_t)W * L * sizeof *live) : NULL;
  int *idx = filter ? malloc((size_t)W * sizeof *idx) : NULL;
  unsigned char *verified = screened ? malloc((size_t)W) : NULL;
  int rc = grad && cand_losses && cands && (top || o->sample) && (!filter || (keep && live && idx)) &&
                   (verified || !screened)
               ? 0
               : rg_error_set("gcg: out of memory");
  uint64_t rng = o->seed;
  float loss = 0;
  *n_steps = 0;
  for (int k = 0; rc == 0 && k < o->steps; k++) {
    /* the prefix is run into the gradient session once, at the first step */
    rc = rg_gcg_token_grad(train, c, k == 0 ? RG_GCG_PREFIX_RUN : RG_GCG_PREFIX_KEPT, grad, &loss);
    if (rc == 0 && o->min_loss > 0 && loss < o->min_loss) { /* the current suffix is good enough */
      if (why) *why = RG_GCG_MIN_LOSS;
      break;
    }
    const int32_t *suffix = c->ids + c->suffix_start;
    if (rc == 0 && o->sample) rc = o->sample(o->sample_user, k, suffix, L, cands);
    else if (rc == 0 && (rc = rg_gcg_top_k(grad, L, V, disallowed, o->top_k, top)) == 0)
      rg_gcg_draw(top, L, o->top_k, suffix, W, &rng, cands);
    if (rc == 0 && filter) rc = rg_gcg_retokenizes(rg_session_model(train)->tokenizer, cands, W, L, keep);
    if (rc != 0) break;
    const int n_live = filter ? rg_gcg_kept_candidates(cands, W, L, keep, live, idx) : W;
    const int32_t *eval = filter ? live : cands;
    rc = screened ? screened_losses(o->screen, inf, c, eval, n_live, o->screen_keep, NULL, o->shard, cand_losses,
                                    verified)
                  : shared_losses(inf, c, eval, n_live, o->shard, cand_losses);
    if (rc != 0) break;
    const int best_live = best_candidate(cand_losses, n_live, verified); /* taken unconditionally (HarmBench) */
    const int best = filter ? idx[best_live] : best_live;
    if (filter) /* the losses to their candidates' places, NaN for the dropped; in place, from the end */
      for (int j = W - 1, i = n_live - 1; j >= 0; j--) {
        const bool here = i >= 0 && idx[i] == j;
        cand_losses[j] = here ? cand_losses[i] : NAN;
        if (verified) verified[j] = here && verified[i];
        i -= here;
      }
    if (o->on_step) {
      const rg_gcg_step_view view = {.step = k, .n_suffix = L, .suffix = suffix, .loss = loss, .top = top,
                                     .top_k = o->top_k, .cands = cands, .n_cands = W,
                                     .evaluated = n_live < W ? keep : NULL, .n_removed = W - n_live,
                                     .losses = cand_losses, .verified = verified, .best = best};
      if ((rc = o->on_step(o->step_user, &view)) != 0) break;
    }
    memcpy(ids + c->suffix_start, cands + (size_t)best * L, (size_t)L * sizeof *ids);
    losses[k] = cand_losses[best];
    *n_steps = k + 1;
    bool stop = false;
    if (o->stop) rc = refusal_check(o->stop, k, o->steps, losses[k], c->ids + c->suffix_start, L, &stop);
    if (rc == 0 && stop) {
      if (why) *why = RG_GCG_NO_REFUSAL;
      break;
    }
  }
  free(grad), free(cand_losses), free(cands), free(top), free(keep), free(live), free(idx), free(verified);
  return rc;
}
