/* test_r2d2_update.c: two R2D2 updates of the trainer's own pieces against
 * torch (tests/fixtures/r2d2_update/, from
 * tools/reference/make_r2d2_update_fixtures.py, which writes HarmBench's
 * formulas in float64 torch on the tiny Qwen2 model of hf_tiny).
 *
 * The pieces are built as src/adv_ft/trainer.c builds them (open_weights,
 * open_sessions, open_optimizer, one_update, micro_batch): trainable
 * weights, a training session and a candidate session, gradients, AdamW,
 * an rg_r2d2_step. Per update, rg_r2d2_refresh runs 2 GCG steps on each of
 * two test cases with a sampler that serves torch's candidate sets (so the
 * token gradient's top-k is not what is tested here; test_gcg does that),
 * then rg_r2d2_accumulate and rg_optimizer_step. Checked per update:
 *   - the suffix GCG starts each step from, and ends with, is torch's; in
 *     the last step of update 2 every candidate is worse than the current
 *     suffix and the argmin is taken anyway (HarmBench's quirk i);
 *   - every candidate's loss (refgeo's candidate session) and the refresh's
 *     loss;
 *   - the away and toward sequences, token for token, with their suffix and
 *     target offsets (this pins test_case.c's layout to HarmBench's);
 *   - the three losses and their row counts, the gradient norm;
 *   - every parameter's gradient and its change by the update, norm-
 *     relative per tensor: ||x_refgeo - x_torch|| / ||x_torch||.
 * The second update clips (max_norm about half the gradient norm) and its
 * GCG runs on the updated weights, so a wrong update shows twice.
 *
 * Tolerances. The C side computes in float32, torch in float64; the
 * reference script also runs torch in float32 on the same inputs and
 * prints how far that lands: the floor for any float32 code. Measured
 * (largest of both updates): [float32 torch] refgeo.
 *   CAND_TOL 1e-5    candidate losses [1.7e-7] 1.6e-7
 *   LOSS_TOL 1e-5    utility, toward, total losses [1.1e-7] 3.0e-7;
 *                    the gradient norm 7.5e-7
 *   AWAY_TOL 1e-4    the away loss (~5e-3) sums log(1 - p) = lse' - lse,
 *                    differences of two ~5-nat numbers, so float32's 1e-7
 *                    of each is ~1e-4 of the result [1.0e-5] 4.5e-7
 *   GRAD_TOL 1e-5    gradients [1.1e-6] 1.6e-6 (update 2's are taken at
 *                    refgeo's updated weights)
 *   CHANGE_TOL 1e-5  parameter changes [7.3e-6] 7.3e-6. The floor is in
 *                    the norm weights: a change of a float32 weight near 1
 *                    is known to ulp/2 (3e-8 to 6e-8), and the script's
 *                    lr 1e-2 makes the change ~1e-2 (the matrices' floor is
 *                    ~1e-6, refgeo's matrices 1.8e-6). Before cpu_adamw took
 *                    1 - beta in double, 1 - (float)0.999 = 9.9998713e-4
 *                    (1.3e-5 below torch's 0.001) made sqrt(v) 6.4e-6 low
 *                    and the changes 1.07e-5 off: this test found it.
 * The script's eps is 1e-3, about a quarter of the median |gradient|, so
 * that AdamW's first step depends on the gradient's value; with torch's
 * eps 1e-8 it is lr * sign(g), and float32 torch lands 1.1e-2 away from
 * float64 torch (the smallest gradients' signs flip), so no float32 code
 * could meet 1e-5 there.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/gcg.h"
#include "adv_ft/optimizer.h"
#include "adv_ft/r2d2_loss.h"
#include "adv_ft/r2d2_step.h"
#include "adv_ft/test_case.h"
#include "adv_ft/utility_data.h"
#include "engine/backward.h"
#include "model/prompt_encode.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"

static const double CAND_TOL = 1e-5, LOSS_TOL = 1e-5, AWAY_TOL = 1e-4, GRAD_TOL = 1e-5, CHANGE_TOL = 1e-5;

enum { N_CASES = 2 };

/* The trainer's size keys for this micro-batch (train_config.h). */
static const int CASES_PER_STEP = N_CASES, UTILITY_PER_STEP = 2, MAX_CASE_TOKENS = 96, MAX_UTILITY_TOKENS = 64;
static const int GCG_BATCH = 5; /* fewer than the 16 candidates: they go in several calls */
static const int GRAD_ACCUM = 1;

static const cJSON *item(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) fail_msg("fixture: no \"%s\"", key);
  return v;
}

static double num(const cJSON *o, const char *key) { return item(o, key)->valuedouble; }

/* The int array A into a malloc'd buffer; *n gets its length. */
static int32_t *ids_of(const cJSON *a, int *n) {
  *n = cJSON_GetArraySize(a);
  int32_t *ids = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *ids);
  assert_non_null(ids);
  for (int i = 0; i < *n; i++) ids[i] = cJSON_GetArrayItem(a, i)->valueint;
  return ids;
}

static void assert_ids(const int32_t *got, int n, const cJSON *want, const char *what) {
  if (cJSON_GetArraySize(want) != n) fail_msg("%s: %d tokens, torch %d", what, n, cJSON_GetArraySize(want));
  for (int i = 0; i < n; i++)
    if (got[i] != cJSON_GetArrayItem(want, i)->valueint)
      fail_msg("%s: token %d is %d, torch %d", what, i, got[i], cJSON_GetArrayItem(want, i)->valueint);
}

static double rel_err(double got, double want) { return fabs(got - want) / fabs(want); }

/* The GCG steps of one test case in one update, as the sampler serves them. */
typedef struct {
  const cJSON *steps;
  int width; /* rg_gcg_opts.search_width: the room in cands */
  int n_served;
} served_steps;

/* rg_gcg_opts.sample: torch's candidates of STEP, after checking that GCG
 * stands where torch stood (step 1's suffix is step 0's argmin). */
static int serve_candidates(void *user, int step, const int32_t *suffix, int n_suffix, int32_t *cands) {
  served_steps *s = user;
  const cJSON *st = cJSON_GetArrayItem(s->steps, step);
  const cJSON *in = item(st, "suffix_in"), *pairs = item(st, "pairs");
  if (cJSON_GetArraySize(pairs) != s->width || cJSON_GetArraySize(in) != n_suffix)
    return rg_error_set("fixture: step %d has %d candidates of %d tokens, GCG wants %d of %d", step,
                        cJSON_GetArraySize(pairs), cJSON_GetArraySize(in), s->width, n_suffix);
  for (int i = 0; i < n_suffix; i++)
    if (suffix[i] != cJSON_GetArrayItem(in, i)->valueint)
      return rg_error_set("GCG step %d starts from another suffix than torch's (position %d: %d, torch %d)", step, i,
                          suffix[i], cJSON_GetArrayItem(in, i)->valueint);
  for (int j = 0; j < cJSON_GetArraySize(pairs); j++) {
    const cJSON *pt = cJSON_GetArrayItem(pairs, j);
    int32_t *c = cands + (size_t)j * n_suffix;
    memcpy(c, suffix, (size_t)n_suffix * sizeof *c);
    c[cJSON_GetArrayItem(pt, 0)->valueint] = cJSON_GetArrayItem(pt, 1)->valueint;
  }
  s->n_served++;
  return 0;
}

/* Every candidate loss of each step (the weights GCG ran on are still the
 * current ones): refgeo's candidate session on torch's sets. */
static void check_candidate_losses(rg_r2d2_step *st, const rg_r2d2_case *c, const cJSON *steps, double *worst) {
  for (int k = 0; k < cJSON_GetArraySize(steps); k++) {
    const cJSON *s = cJSON_GetArrayItem(steps, k), *pairs = item(s, "pairs"), *want = item(s, "losses");
    int n_in = 0;
    int32_t *in = ids_of(item(s, "suffix_in"), &n_in);
    rg_test_case_seq q;
    if (rg_test_case_build(st->m, st->frame, c->behavior, in, n_in, c->target, false, &q) < 0)
      fail_msg("%s", rg_error_get());
    const int W = cJSON_GetArraySize(pairs);
    int32_t *cands = malloc((size_t)W * n_in * sizeof *cands);
    float *losses = malloc((size_t)W * sizeof *losses);
    assert_non_null(cands);
    assert_non_null(losses);
    served_steps one = {steps, W, 0};
    assert_int_equal(serve_candidates(&one, k, in, n_in, cands), 0);
    const rg_gcg_case layout = {.ids = q.ids,
                                .n = q.n,
                                .suffix_start = q.suffix_start,
                                .n_suffix = q.n_suffix,
                                .n_target = q.n - q.target_start};
    if (rg_gcg_candidate_losses(st->cand, &layout, cands, W, losses) < 0) fail_msg("%s", rg_error_get());
    int best = 0;
    for (int j = 0; j < W; j++) {
      const double e = rel_err(losses[j], cJSON_GetArrayItem(want, j)->valuedouble);
      if (e > *worst) *worst = e;
      if (e > CAND_TOL) fail_msg("%s step %d candidate %d: loss %.7f, torch %.7f", c->name, k, j, losses[j],
                                 cJSON_GetArrayItem(want, j)->valuedouble);
      if (losses[j] < losses[best]) best = j;
    }
    assert_int_equal(best, (int)num(s, "argmin"));
    free(cands), free(losses), free(in);
    rg_test_case_seq_free(&q);
  }
}

/* The away and toward sequences of C must be torch's, offsets included. */
static void check_layout(const rg_r2d2_step *st, const rg_r2d2_case *c, const cJSON *seqs) {
  for (int toward = 0; toward <= 1; toward++) {
    const cJSON *want = item(seqs, toward ? "toward" : "away");
    rg_test_case_seq q;
    if (rg_test_case_build(st->m, st->frame, c->behavior, c->suffix, c->n_suffix, toward ? st->refusal : c->target,
                           toward, &q) < 0)
      fail_msg("%s", rg_error_get());
    char what[96];
    snprintf(what, sizeof what, "%s %s sequence", c->name, toward ? "toward" : "away");
    assert_ids(q.ids, q.n, item(want, "ids"), what);
    assert_int_equal(q.suffix_start, (int)num(want, "suffix_start"));
    assert_int_equal(q.target_start, (int)num(want, "target_start"));
    rg_test_case_seq_free(&q);
  }
}

/* ||(got - base) - want|| / ||want|| over N values (BASE NULL: zeros). */
static double norm_rel(const float *got, const float *base, const float *want, size_t n) {
  double d = 0, w = 0;
  for (size_t i = 0; i < n; i++) {
    const double x = (double)got[i] - (base ? (double)base[i] : 0.0);
    d += (x - want[i]) * (x - want[i]);
    w += (double)want[i] * want[i];
  }
  return sqrt(d / w);
}

/* The offset of the values of the tensor named NAME within the fixture's
 * block of all parameters (in its "params" order). */
static size_t param_offset(const cJSON *params, const char *name) {
  size_t off = 0;
  for (int j = 0; j < cJSON_GetArraySize(params); j++) {
    const cJSON *p = cJSON_GetArrayItem(params, j), *shape = item(p, "shape");
    size_t n = 1;
    for (int d = 0; d < cJSON_GetArraySize(shape); d++) n *= (size_t)cJSON_GetArrayItem(shape, d)->valueint;
    if (strcmp(item(p, "name")->valuestring, name) == 0) return off;
    off += n;
  }
  fail_msg("fixture: no parameter %s", name);
  return 0;
}

static void test_two_updates(void **state) {
  (void)state;
  cJSON *fx = t_read_json_fixture("r2d2_update/qwen2_bf16.json");
  size_t n_ref = 0;
  float *ref = t_read_f32("r2d2_update/qwen2_bf16.f32", &n_ref);
  char *dir = t_hf_tiny(item(fx, "model")->valuestring);
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  free(dir);

  /* rg_trainer_open: the model's own template and its frame */
  rg_chat_template tmpl;
  char *before = NULL, *after = NULL;
  if (rg_prompt_template(m, NULL, &tmpl) < 0 || rg_prompt_frame(&tmpl, &before, &after) < 0)
    fail_msg("%s", rg_error_get());
  assert_string_equal(before, item(fx, "before")->valuestring); /* the split torch made of its template */
  assert_string_equal(after, item(fx, "after")->valuestring);
  const rg_test_case_frame frame = {.before = before, .after = after, .add_bos = rg_prompt_wants_bos(&tmpl)};

  /* open_weights, open_sessions, open_optimizer */
  rg_backend_opts bo = {.threads = 2};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  if (!w || rg_weights_make_trainable(w) < 0) fail_msg("%s", rg_error_get());
  const int n_seqs = 2 * CASES_PER_STEP + UTILITY_PER_STEP;
  const int tokens = 2 * CASES_PER_STEP * MAX_CASE_TOKENS + UTILITY_PER_STEP * MAX_UTILITY_TOKENS;
  const int max_ctx = MAX_CASE_TOKENS > MAX_UTILITY_TOKENS ? MAX_CASE_TOKENS : MAX_UTILITY_TOKENS;
  rg_session_opts to = {.max_batch_tokens = tokens, .max_logit_rows = tokens, .train = true};
  rg_session_opts co = {.max_batch_tokens = GCG_BATCH * MAX_CASE_TOKENS,
                        .max_logit_rows = GCG_BATCH * (MAX_CASE_TOKENS / 2)};
  rg_session *train = rg_session_new(w, n_seqs, max_ctx, &to);
  rg_session *cand = rg_session_new(w, GCG_BATCH + 1, MAX_CASE_TOKENS, &co); /* + 1: a shared prefix, as the trainer */
  assert_non_null(train);
  assert_non_null(cand);
  rg_grads *g = rg_grads_new(train);
  assert_non_null(g);
  unsigned char *disallowed = malloc((size_t)m->cfg.vocab_size);
  assert_non_null(disallowed);
  rg_gcg_disallowed_tokens(m, disallowed);
  rg_r2d2_step st = {.m = m,
                     .frame = &frame,
                     .train = train,
                     .cand = cand,
                     .disallowed = disallowed,
                     .refusal = item(fx, "refusal")->valuestring,
                     .max_case_tokens = MAX_CASE_TOKENS};
  if (rg_r2d2_step_init(&st, tokens) < 0) fail_msg("%s", rg_error_get());
  const cJSON *adamw = item(fx, "adamw");
  const rg_adamw_hparams h = {.beta1 = num(adamw, "beta1"),
                              .beta2 = num(adamw, "beta2"),
                              .eps = num(adamw, "eps"),
                              .weight_decay = num(adamw, "weight_decay")};
  rg_optimizer *opt = rg_optimizer_new(w, g, &h);
  if (!opt) fail_msg("%s", rg_error_get());

  /* the pool entries (their suffixes carry over between updates) and the
   * utility examples */
  const cJSON *fcases = item(fx, "cases"), *futil = item(fx, "utility");
  assert_int_equal(cJSON_GetArraySize(fcases), N_CASES);
  rg_r2d2_case cases[N_CASES];
  for (int i = 0; i < N_CASES; i++) {
    const cJSON *c = cJSON_GetArrayItem(fcases, i);
    cases[i] = (rg_r2d2_case){.name = item(c, "name")->valuestring,
                              .behavior = item(c, "behavior")->valuestring,
                              .target = item(c, "target")->valuestring};
    cases[i].suffix = ids_of(item(c, "suffix"), &cases[i].n_suffix);
  }
  assert_int_equal(cJSON_GetArraySize(futil), UTILITY_PER_STEP);
  rg_utility_example util[2];
  const rg_utility_example *utility[2];
  for (int i = 0; i < UTILITY_PER_STEP; i++) {
    const cJSON *u = cJSON_GetArrayItem(futil, i);
    util[i].ids = ids_of(item(u, "ids"), &util[i].n);
    util[i].label_from = (int)num(u, "label_from");
    utility[i] = &util[i];
  }
  const cJSON *weights = item(fx, "loss_weights");
  /* micro_batch: the weights divided by grad_accum */
  const float scale = 1.0f / (float)GRAD_ACCUM;
  const rg_r2d2_loss_opts lo = {.w_utility = (float)cJSON_GetArrayItem(weights, 0)->valuedouble * scale,
                                .w_away = (float)cJSON_GetArrayItem(weights, 1)->valuedouble * scale,
                                .w_toward = (float)cJSON_GetArrayItem(weights, 2)->valuedouble * scale,
                                .away_log_p_min = (float)num(fx, "away_log_p_min")};

  const cJSON *params = item(fx, "params"), *updates = item(fx, "updates");
  const int n_params = rg_weights_count(w);
  assert_int_equal(n_params, cJSON_GetArraySize(params));
  assert_int_equal(rg_grads_count(g), n_params);
  size_t block = 0; /* floats of all parameters */
  for (int i = 0; i < n_params; i++) block += rg_tensor_nelems(rg_weights_tensor(w, i));
  assert_int_equal(n_ref, 2 * block * (size_t)cJSON_GetArraySize(updates));

  for (int u = 0; u < cJSON_GetArraySize(updates); u++) {
    const cJSON *fu = cJSON_GetArrayItem(updates, u);
    const float *ref_grad = ref + 2 * block * (size_t)u, *ref_change = ref_grad + block;
    rg_grads_zero(g); /* one_update */
    double cand_worst = 0;
    for (int i = 0; i < N_CASES; i++) {
      const cJSON *steps = cJSON_GetArrayItem(item(fu, "gcg"), i);
      served_steps serve = {steps, (int)num(fx, "search_width"), 0};
      const rg_gcg_opts o = {.steps = (int)num(fx, "gcg_steps"),
                             .search_width = (int)num(fx, "search_width"),
                             .top_k = 4, /* unused: the sampler replaces the top-k draw */
                             .sample = serve_candidates,
                             .sample_user = &serve};
      double loss = NAN;
      if (rg_r2d2_refresh(&st, &cases[i], &o, &loss) < 0) fail_msg("update %d: %s", u + 1, rg_error_get());
      assert_int_equal(serve.n_served, o.steps);
      const cJSON *last = cJSON_GetArrayItem(steps, o.steps - 1);
      char what[96];
      snprintf(what, sizeof what, "update %d, %s: the suffix after GCG", u + 1, cases[i].name);
      assert_ids(cases[i].suffix, cases[i].n_suffix, item(last, "suffix_out"), what);
      if (!(rel_err(loss, num(last, "loss")) <= CAND_TOL))
        fail_msg("%s: GCG's loss %.7f, torch %.7f", what, loss, num(last, "loss"));
      check_candidate_losses(&st, &cases[i], steps, &cand_worst);
      check_layout(&st, &cases[i], cJSON_GetArrayItem(item(fu, "sequences"), i));
    }

    rg_r2d2_losses L;
    int n_tokens = 0;
    if (rg_r2d2_accumulate(&st, cases, N_CASES, utility, UTILITY_PER_STEP, &lo, g, &L, &n_tokens) < 0)
      fail_msg("%s", rg_error_get());
    const cJSON *want = item(fu, "losses");
    assert_int_equal(L.n_utility, (int)num(want, "n_utility"));
    assert_int_equal(L.n_away, (int)num(want, "n_away"));
    assert_int_equal(L.n_toward, (int)num(want, "n_toward"));
    const double eu = rel_err(L.utility, num(want, "utility")), ea = rel_err(L.away, num(want, "away")),
                 et = rel_err(L.toward, num(want, "toward")), etot = rel_err(L.total, num(want, "total"));
    print_message("update %d: GCG suffixes equal torch's, candidate losses rel err <= %.1e; losses utility %.6f "
                  "(%.1e) away %.6f (%.1e) toward %.6f (%.1e) total (%.1e)\n",
                  u + 1, cand_worst, L.utility, eu, L.away, ea, L.toward, et, etot);
    assert_true(eu <= LOSS_TOL);
    assert_true(ea <= AWAY_TOL);
    assert_true(et <= LOSS_TOL);
    assert_true(etot <= LOSS_TOL);

    /* the gradients, then the update's change of every parameter */
    double grad_worst = 0, change_worst = 0;
    const char *grad_worst_name = "", *change_worst_name = "";
    float **prev = calloc((size_t)n_params, sizeof *prev); /* the parameters before the update */
    float **grad = calloc((size_t)n_params, sizeof *grad);
    assert_non_null(prev);
    assert_non_null(grad);
    for (int i = 0; i < n_params; i++) {
      const size_t n = rg_tensor_nelems(rg_weights_tensor(w, i));
      prev[i] = malloc(n * sizeof *prev[i]);
      grad[i] = malloc(n * sizeof *grad[i]);
      assert_non_null(prev[i]);
      assert_non_null(grad[i]);
      assert_int_equal(rg_grads_download(g, i, grad[i]), 0);
      assert_int_equal(rg_weights_download(w, i, prev[i]), 0);
    }
    double norm = 0;
    if (rg_optimizer_step(opt, num(fu, "lr"), num(fu, "max_norm"), &norm) < 0) fail_msg("%s", rg_error_get());
    const double en = rel_err(norm, num(fu, "grad_norm"));
    for (int i = 0; i < n_params; i++) {
      const rg_tensor *t = rg_weights_tensor(w, i);
      assert_string_equal(rg_grads_tensor(g, i)->name, t->name);
      const size_t n = rg_tensor_nelems(t);
      const size_t off = param_offset(params, t->name);
      float *now = malloc(n * sizeof *now);
      assert_non_null(now);
      assert_int_equal(rg_weights_download(w, i, now), 0);
      const double eg = norm_rel(grad[i], NULL, ref_grad + off, n), ec = norm_rel(now, prev[i], ref_change + off, n);
      print_message("  %-44s gradient %.1e  change %.1e\n", t->name, eg, ec);
      if (eg > grad_worst) grad_worst = eg, grad_worst_name = t->name;
      if (ec > change_worst) change_worst = ec, change_worst_name = t->name;
      free(now), free(prev[i]), free(grad[i]);
    }
    free(prev), free(grad);
    print_message("update %d (max_norm %g): grad norm %.6f (%.1e); max rel gradient err %.2e (%s); max rel change "
                  "err %.2e (%s)\n",
                  u + 1, num(fu, "max_norm"), norm, en, grad_worst, grad_worst_name, change_worst, change_worst_name);
    assert_true(en <= LOSS_TOL);
    assert_true(grad_worst <= GRAD_TOL);
    assert_true(change_worst <= CHANGE_TOL);
  }

  for (int i = 0; i < N_CASES; i++) free(cases[i].suffix);
  for (int i = 0; i < UTILITY_PER_STEP; i++) free(util[i].ids);
  rg_optimizer_free(opt);
  rg_r2d2_step_free(&st);
  free(disallowed);
  rg_grads_free(g);
  rg_session_free(cand);
  rg_session_free(train);
  rg_weights_free(w);
  free(before), free(after);
  rg_chat_template_free(&tmpl);
  rg_model_free(m);
  free(ref);
  cJSON_Delete(fx);
}

int main(void) {
  t_require_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_updates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
