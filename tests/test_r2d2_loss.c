/* test_r2d2_loss.c: R2D2's away, toward and utility losses (adv_ft/r2d2_loss.h)
 * and their gradients against torch implementations of HarmBench's formulas
 * (tests/fixtures/r2d2_loss/, from tools/reference/make_r2d2_loss_fixtures.py:
 * HarmBench's log_1_minus_p_loss and CrossEntropyLoss in float64 through
 * transformers), on two tiny Hugging Face models (Llama with a tied head,
 * Mistral with an untied one). One batch holds two away, two toward and two
 * utility examples; 4 of the 9 away tokens have log p < -5 and must be
 * dropped but still counted in the away loss's denominator. Three cases:
 * the away loss alone, the toward loss alone, and the total utility + 0.5
 * away + 0.5 toward, seeded as a cross entropy and an away term into one
 * loss gradient and differentiated by one backward pass. Every case checks
 * the four loss values, every parameter's gradient (its L2 norm and every
 * 61st element) and every 7th element of the gradient with respect to the
 * token embeddings.
 *
 * Tolerance 1e-5, relative to the reference's largest magnitude (per loss,
 * per tensor): refgeo computes in float32 with the loss rows' softmax sums
 * in double, the reference in float64; float32 rounding over the few hundred
 * terms of a 64-wide, 2-layer model stays near 1e-6. The bugs this guards
 * against are far larger: counting only the kept away tokens doubles the
 * away loss, a flipped threshold keeps the other 4 tokens, a missing term
 * of the away gradient changes it by order 1.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/r2d2_loss.h"
#include "engine/backward.h"
#include "engine/forward.h"
#include "model/model.h"
#include "testlib.h"
#include "util/error.h"

static const double TOL = 1e-5;

typedef struct {
  cJSON *fx;
  rg_model *m;
  rg_session *s;
  int n, R, ns;
  int32_t *ids;
  int *seq, *rows, *start; /* start[si]: batch index of sequence si's token 0 */
  int32_t *targets;
  rg_r2d2_kind *kind;
} batch;

static const cJSON *get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  if (!v) fail_msg("fixture: missing '%s'", k);
  return v;
}
static int len_of(const cJSON *a) { return cJSON_GetArraySize(a); }

static rg_r2d2_kind kind_named(const char *k) {
  if (!strcmp(k, "away")) return RG_R2D2_AWAY;
  if (!strcmp(k, "toward")) return RG_R2D2_TOWARD;
  if (!strcmp(k, "utility")) return RG_R2D2_UTILITY;
  fail_msg("fixture: unknown kind '%s'", k);
  return RG_R2D2_UTILITY;
}

/* Loads the model and lays the fixture's sequences one after another in one
 * batch; row r is a supervised position p >= first of a sequence,
 * predicting its token p + 1. */
static batch load(const char *name) {
  batch b = {0};
  char rel[128];
  snprintf(rel, sizeof rel, "r2d2_loss/%s.json", name);
  b.fx = t_read_json_fixture(rel);
  char *dir = t_hf_tiny(get(b.fx, "model")->valuestring);
  b.m = rg_model_load(dir);
  if (!b.m) fail_msg("%s", rg_error_get());
  free(dir);
  const cJSON *seqs = get(b.fx, "seqs");
  b.ns = len_of(seqs);
  int max_len = 0;
  for (int si = 0; si < b.ns; si++) {
    const cJSON *sq = cJSON_GetArrayItem(seqs, si);
    const int len = len_of(get(sq, "ids"));
    b.n += len;
    b.R += len - 1 - get(sq, "first")->valueint;
    if (len > max_len) max_len = len;
  }
  b.ids = malloc((size_t)b.n * sizeof *b.ids);
  b.seq = malloc((size_t)b.n * sizeof *b.seq);
  b.start = malloc((size_t)b.ns * sizeof *b.start);
  b.rows = malloc((size_t)b.R * sizeof *b.rows);
  b.targets = malloc((size_t)b.R * sizeof *b.targets);
  b.kind = malloc((size_t)b.R * sizeof *b.kind);
  for (int si = 0, k = 0, r = 0; si < b.ns; si++) {
    const cJSON *sq = cJSON_GetArrayItem(seqs, si), *ids = get(sq, "ids");
    const int len = len_of(ids), first = get(sq, "first")->valueint;
    const rg_r2d2_kind kind = kind_named(get(sq, "kind")->valuestring);
    b.start[si] = k;
    for (int p = 0; p < len; p++, k++) {
      b.ids[k] = cJSON_GetArrayItem(ids, p)->valueint;
      b.seq[k] = si;
      if (p >= first && p < len - 1) {
        b.rows[r] = k;
        b.targets[r] = cJSON_GetArrayItem(ids, p + 1)->valueint;
        b.kind[r++] = kind;
      }
    }
  }
  rg_session_opts o = {.max_batch_tokens = b.n, .max_logit_rows = b.R, .train = true};
  b.s = t_session(b.m, 2, RG_WEIGHTS_F32, b.ns, max_len, &o);
  return b;
}

static void unload(batch *b) {
  t_session_free(b->s);
  rg_model_free(b->m);
  cJSON_Delete(b->fx);
  free(b->ids), free(b->seq), free(b->start), free(b->rows), free(b->targets), free(b->kind);
}

static double rel_err(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-30); }

/* Worst relative error of every parameter gradient against the case's
 * tensors (norm, and the sample relative to its largest magnitude, at least
 * the tensor's RMS element as in test_backward.c). */
static double grads_err(const batch *b, const rg_grads *g, const cJSON *tensors, const char *what) {
  const int stride = get(b->fx, "stride")->valueint;
  assert_int_equal(rg_grads_count(g), len_of(tensors));
  double worst = 0;
  for (int i = 0; i < rg_grads_count(g); i++) {
    const rg_tensor *t = rg_grads_tensor(g, i);
    const cJSON *ref = cJSON_GetObjectItem(tensors, t->name);
    if (!ref) fail_msg("%s: no reference gradient for %s", what, t->name);
    const size_t n = (size_t)rg_tensor_nelems(t);
    assert_int_equal(n, (size_t)get(ref, "n")->valuedouble);
    float *got = malloc(n * sizeof *got);
    assert_int_equal(rg_grads_download(g, i, got), 0);
    double ss = 0, md = 0, mr = 0;
    for (size_t k = 0; k < n; k++) ss += (double)got[k] * got[k];
    const double want_norm = get(ref, "norm")->valuedouble;
    const cJSON *sample = get(ref, "sample");
    for (int k = 0; k < len_of(sample); k++) {
      const double want = cJSON_GetArrayItem(sample, k)->valuedouble;
      md = fmax(md, fabs(got[(size_t)k * stride] - want));
      mr = fmax(mr, fabs(want));
    }
    mr = fmax(mr, want_norm / sqrt((double)n));
    const double e = fmax(rel_err(sqrt(ss), want_norm), md / fmax(mr, 1e-30));
    if (!(e < TOL)) fail_msg("%s %s: gradient rel err %.2e (tol %.0e)", what, t->name, e, TOL);
    worst = fmax(worst, e);
    free(got);
  }
  return worst;
}

/* Relative error of the token-embedding gradient's sampled elements. */
static double d_embed_err(const batch *b, const float *d_embed, const cJSON *ref) {
  const int d = b->m->cfg.d_model, stride = get(b->fx, "d_stride")->valueint;
  double md = 0, mr = 1e-30;
  for (int si = 0; si < b->ns; si++) {
    const cJSON *r = cJSON_GetArrayItem(ref, si);
    for (int k = 0; k < len_of(r); k++) {
      const int e = k * stride, p = e / d, j = e % d;
      const double want = cJSON_GetArrayItem(r, k)->valuedouble;
      md = fmax(md, fabs(d_embed[(size_t)(b->start[si] + p) * d + j] - want));
      mr = fmax(mr, fabs(want));
    }
  }
  return md / mr;
}

/* Runs one case: eval, the R2D2 loss with the case's weights, backward. */
static void check_case(batch *b, const char *what) {
  const cJSON *c = get(get(b->fx, "cases"), what), *w = get(c, "weights");
  rg_r2d2_loss_opts o = {.w_utility = (float)cJSON_GetArrayItem(w, 0)->valuedouble,
                         .w_away = (float)cJSON_GetArrayItem(w, 1)->valuedouble,
                         .w_toward = (float)cJSON_GetArrayItem(w, 2)->valuedouble,
                         .away_log_p_min = (float)get(b->fx, "log_p_min")->valuedouble};
  if (!strcmp(what, "total")) { /* the total is HarmBench's, with the library's defaults */
    const rg_r2d2_loss_opts def = rg_r2d2_loss_defaults();
    assert_true(def.w_utility == o.w_utility && def.w_away == o.w_away && def.w_toward == o.w_toward &&
                def.away_log_p_min == o.away_log_p_min);
  }
  rg_session_reset(b->s);
  if (rg_session_eval(b->s, b->ids, b->seq, b->n, b->rows, b->R, NULL) != 0) fail_msg("%s", rg_error_get());
  rg_r2d2_losses L;
  if (rg_r2d2_loss(b->s, &o, b->kind, b->targets, b->R, &L) != 0) fail_msg("%s", rg_error_get());
  assert_int_equal(L.n_away, get(c, "away_rows")->valueint);
  const double got[4] = {L.utility, L.away, L.toward, L.total};
  const char *names[4] = {"utility", "away", "toward", "loss"};
  double e_loss = 0;
  for (int k = 0; k < 4; k++) {
    const double e = rel_err(got[k], get(c, names[k])->valuedouble);
    e_loss = fmax(e_loss, e);
  }
  if (!(e_loss < TOL))
    fail_msg("%s case: losses (utility, away, toward, differentiated) %.8g %.8g %.8g %.8g, rel err %.2e vs torch",
             what, got[0], got[1], got[2], got[3], e_loss);

  rg_grads *g = rg_grads_new(b->s);
  assert_non_null(g);
  rg_grads_zero(g);
  float *d_embed = malloc((size_t)b->n * b->m->cfg.d_model * sizeof *d_embed);
  if (rg_session_backward(b->s, g, d_embed) != 0) fail_msg("%s", rg_error_get());
  const double e_grad = grads_err(b, g, get(c, "tensors"), what);
  const double e_embed = d_embed_err(b, d_embed, get(c, "d_embed"));
  print_message("%-12s %-7s losses rel err %.2e, %d gradient tensors worst %.2e, d_embed %.2e\n",
                get(b->fx, "model")->valuestring, what, e_loss, rg_grads_count(g), e_grad, e_embed);
  if (!(e_embed < TOL)) fail_msg("%s case: d_embed rel err %.2e (tol %.0e)", what, e_embed, TOL);
  free(d_embed);
  rg_grads_free(g);
}

static void check_model(const char *name) {
  batch b = load(name);
  check_case(&b, "away");
  check_case(&b, "toward");
  check_case(&b, "total");
  unload(&b);
}

static void test_llama_tied(void **state) { check_model("llama_f32"); }
static void test_mistral_untied(void **state) { check_model("mistral_f16"); }

/* A row count that is not the eval's and an unknown kind are errors. */
static void test_errors(void **state) {
  batch b = load("llama_f32");
  rg_session_reset(b.s);
  assert_int_equal(rg_session_eval(b.s, b.ids, b.seq, b.n, b.rows, b.R, NULL), 0);
  rg_r2d2_losses L;
  const rg_r2d2_loss_opts o = rg_r2d2_loss_defaults();
  assert_int_equal(rg_r2d2_loss(b.s, &o, b.kind, b.targets, b.R - 1, &L), -1);
  assert_non_null(strstr(rg_error_get(), "rows"));
  b.kind[3] = (rg_r2d2_kind)7;
  assert_int_equal(rg_r2d2_loss(b.s, &o, b.kind, b.targets, b.R, &L), -1);
  assert_non_null(strstr(rg_error_get(), "unknown kind 7"));
  unload(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_tied),
      cmocka_unit_test(test_mistral_untied),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
