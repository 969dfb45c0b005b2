/* r2d2_step.c: the two halves of an R2D2 micro-batch, GCG refresh and loss accumulation (r2d2_step.h). */
#include "adv_ft/r2d2_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int rg_r2d2_step_init(rg_r2d2_step *s, int max_tokens) {
  s->max_tokens = max_tokens;
  s->ids = malloc((size_t)max_tokens * sizeof *s->ids);
  s->targets = malloc((size_t)max_tokens * sizeof *s->targets);
  s->seq = malloc((size_t)max_tokens * sizeof *s->seq);
  s->rows = malloc((size_t)max_tokens * sizeof *s->rows);
  s->kinds = malloc((size_t)max_tokens * sizeof *s->kinds);
  if (!s->ids || !s->targets || !s->seq || !s->rows || !s->kinds) {
    rg_r2d2_step_free(s);
    return rg_error_set("out of memory for a %d-token batch", max_tokens);
  }
  return 0;
}

void rg_r2d2_step_free(rg_r2d2_step *s) {
  free(s->ids), free(s->targets), free(s->seq), free(s->rows), free(s->kinds);
  s->ids = s->targets = NULL;
  s->seq = s->rows = NULL;
  s->kinds = NULL;
}

/* C's test case with its away target, or the refusal and EOS (TOWARD). */
static int case_seq(const rg_r2d2_step *s, const rg_r2d2_case *c, bool toward, rg_test_case_seq *out) {
  const char *target = toward ? s->refusal : c->target;
  if (rg_test_case_build(s->m, s->frame, c->behavior, c->suffix, c->n_suffix, target, toward, out) < 0) return -1;
  if (out->n > s->max_case_tokens || out->target_start >= out->n) {
    const int n = out->n;
    rg_test_case_seq_free(out);
    return rg_error_set("%s: %d tokens with its %s target (max_case_tokens %d)", c->name, n, toward ? "toward" : "away",
                        s->max_case_tokens);
  }
  return 0;
}

int rg_r2d2_refresh(rg_r2d2_step *s, rg_r2d2_case *c, const rg_gcg_opts *o, double *loss) {
  if (loss) *loss = NAN;
  if (o->steps < 1) return 0;
  rg_test_case_seq q;
  if (case_seq(s, c, false, &q) < 0) return -1;
  const rg_gcg_case layout = {.n = q.n, .suffix_start = q.suffix_start, .n_suffix = q.n_suffix, .n_target = q.n - q.target_start};
  float *losses = malloc((size_t)o->steps * sizeof *losses);
  int n_steps = 0;
  rg_session *grad = s->gcg_train ? s->gcg_train : s->train;
  int rc = losses ? rg_gcg_run(grad, s->cand, s->disallowed, q.ids, &layout, o, losses, &n_steps, NULL)
                  : rg_error_set("out of memory");
  if (rc == 0) {
    memcpy(c->suffix, q.ids + q.suffix_start, (size_t)c->n_suffix * sizeof *c->suffix);
    if (loss && n_steps > 0) *loss = losses[n_steps - 1];
  }
  free(losses);
  rg_test_case_seq_free(&q);
  return rc < 0 ? rg_error_prefix("GCG on %s", c->name) : 0;
}

typedef struct {
  int n_tokens, n_rows, n_seqs;
} batch_fill;

/* Appends one sequence with its supervised rows [label_from, n - 1). */
static int add_example(rg_r2d2_step *s, batch_fill *b, const int32_t *ids, int n, int label_from, rg_r2d2_kind kind) {
  if (n > s->max_tokens - b->n_tokens)
    return rg_error_set("a micro-batch of more than %d tokens (max_case_tokens, max_utility_tokens)", s->max_tokens);
  for (int i = 0; i < n; i++) {
    s->ids[b->n_tokens + i] = ids[i];
    s->seq[b->n_tokens + i] = b->n_seqs;
  }
  for (int r = label_from; r < n - 1; r++) {
    s->rows[b->n_rows] = b->n_tokens + r;
    s->targets[b->n_rows] = ids[r + 1];
    s->kinds[b->n_rows] = kind;
    b->n_rows++;
  }
  b->n_tokens += n;
  b->n_seqs++;
  return 0;
}

/* Every rank must have built the same batch (the same data, draws and GCG
 * suffixes): a sum over the ranks of its ids, compared with each rank's
 * own times the ranks, tells. A mismatch would train on a batch no rank
 * built. Returns 0, or -1 with the error set. */
static int same_batch(rg_comm *c, const int32_t *ids, int n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the ids */
  for (int i = 0; i < n; i++) h = (h ^ (uint32_t)ids[i]) * 1099511628211ull;
  double mine[2] = {(double)(h >> 40), (double)(h & 0xffffffffffull)}, all[2] = {mine[0], mine[1]};
  if (rg_comm_allreduce_sum_f64(c, all, 2) < 0) return rg_error_prefix("comparing the ranks' batches");
  const int P = rg_comm_size(c);
  if (all[0] != mine[0] * P || all[1] != mine[1] * P)
    return rg_error_set("rank %d built a batch that differs from another rank's", rg_comm_rank(c));
  return 0;
}

int rg_r2d2_accumulate(rg_r2d2_step *s, const rg_r2d2_case *cases, int n_cases, const rg_utility_example *const *utility,
                       int n_utility, const rg_r2d2_loss_opts *lo, rg_grads *g, rg_r2d2_losses *out, int *n_tokens) {
  batch_fill b = {0};
  for (int i = 0; i < n_cases; i++)
    for (int toward = 0; toward <= 1; toward++) {
      rg_test_case_seq q;
      if (case_seq(s, &cases[i], toward, &q) < 0) return -1;
      const int rc = add_example(s, &b, q.ids, q.n, q.target_start - 1, toward ? RG_R2D2_TOWARD : RG_R2D2_AWAY);
      rg_test_case_seq_free(&q);
      if (rc < 0) return -1;
    }
  for (int i = 0; i < n_utility; i++)
    if (add_example(s, &b, utility[i]->ids, utility[i]->n, utility[i]->label_from, RG_R2D2_UTILITY) < 0) return -1;
  rg_session_reset(s->train);
  /* this rank's part of the batch: its tokens, and the rows among them */
  int first = 0, n = b.n_tokens, r0 = 0, nr = b.n_rows;
  rg_r2d2_loss_opts o = *lo;
  if (s->sp) {
    const int P = rg_comm_size(s->sp), me = rg_comm_rank(s->sp);
    if (b.n_tokens < P) return rg_error_set("a micro-batch of %d tokens split over %d ranks", b.n_tokens, P);
    if (same_batch(s->sp, s->ids, b.n_tokens) < 0) return -1;
    first = (int)((long)b.n_tokens * me / P);
    n = (int)((long)b.n_tokens * (me + 1) / P) - first;
    while (r0 < b.n_rows && s->rows[r0] < first) r0++; /* rows are in token order */
    for (nr = 0; r0 + nr < b.n_rows && s->rows[r0 + nr] < first + n; nr++) s->rows[r0 + nr] -= first;
    o.sp = s->sp;
  }
  if (rg_session_eval(s->train, s->ids + first, s->seq + first, n, s->rows + r0, nr, NULL) < 0 ||
      rg_r2d2_loss(s->train, &o, s->kinds + r0, s->targets + r0, nr, out) < 0 ||
      rg_session_backward(s->train, g, NULL) < 0)
    return -1;
  if (n_tokens) *n_tokens = b.n_tokens;
  return 0;
}
