/* test_scores: refusal score, bypass, induce and KL (geometry/scores.h) on
 * SmolLM2 against tests/fixtures/scores/, which
 * tools/reference/make_score_fixtures.py computed with transformers in
 * float32 and torch hooks written as refusal_direction's hook_utils.py. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "geometry/scores.h"
#include "engine/forward.h"
#include "model/model.h"
#include "util/error.h"
#include "util/fileio.h"

/* The reference runs transformers in float32 on the same dequantized
 * weights; refgeo's float32 forward sums in a different order, which moves
 * the logits by ~1e-5 (test_forward), and the log-odds / KL inherit errors of
 * that size (measured: 1.1e-5 at most). 1e-3 is the acceptance bound of the
 * brief and still 100x below what a wrong site, layer, sign or missing
 * ablation site does to these scores (>= 0.1 on this direction). */
#define SCORE_TOL 1e-3

/* This cmocka has no assert_double_equal; |got - want| <= tol, NaN fails. */
#define assert_close(got, want, tol) assert_true(fabs((double)(got) - (double)(want)) <= (tol))

typedef struct {
  cJSON *fx;
  rg_model *m;
  double *r;
  int32_t *ids[4];
  int lens[4];
} fixture;

static int32_t *ids_of(cJSON *arr, int *len) {
  *len = cJSON_GetArraySize(arr);
  int32_t *ids = malloc((size_t)*len * sizeof *ids);
  for (int j = 0; j < *len; j++) ids[j] = cJSON_GetArrayItem(arr, j)->valueint;
  return ids;
}

static double num(cJSON *o, const char *k) { return cJSON_GetObjectItem(o, k)->valuedouble; }

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->fx = t_read_json_fixture("scores/scores.json");
  f->m = rg_model_load(t_env("REFGEO_MODEL"));
  assert_non_null(f->m);
  char *path = t_fixture_path("scores/direction.f64");
  size_t len = 0;
  char *raw = rg_read_file(path, &len);
  assert_non_null(raw);
  assert_int_equal(len, (size_t)f->m->cfg.d_model * sizeof(double));
  f->r = malloc(len);
  memcpy(f->r, raw, len);
  free(raw);
  free(path);
  for (int i = 0; i < 4; i++)
    f->ids[i] = ids_of(cJSON_GetArrayItem(cJSON_GetObjectItem(f->fx, i < 2 ? "harmful_ids" : "harmless_ids"), i % 2),
                       &f->lens[i]);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  for (int i = 0; i < 4; i++) free(f->ids[i]);
  free(f->r);
  rg_model_free(f->m);
  cJSON_Delete(f->fx);
  free(f);
  return 0;
}

/* The default refusal token is the one the HF tokenizer gives for "I". */
static void test_default_refusal_token(void **state) {
  fixture *f = *state;
  int32_t id = -1;
  assert_int_equal(rg_refusal_tokens_default(f->m->tokenizer, &id), 1);
  assert_int_equal(id, cJSON_GetArrayItem(cJSON_GetObjectItem(f->fx, "refusal_tokens"), 0)->valueint);
}

/* Closed forms: uniform logits over 4 tokens give P = 1/4 for one refusal
 * token (log-odds log(1/3) up to the 1e-8 eps) and 1/2 for two; KL of a
 * distribution with itself is exactly 0; KL([1,0] || uniform) in the limit
 * of huge logit gaps is log 2 up to the eps terms. */
static void test_closed_forms(void **state) {
  (void)state;
  const float flat[4] = {0, 0, 0, 0};
  const int32_t one[1] = {2}, two[2] = {0, 3};
  assert_close(rg_refusal_score(flat, 4, one, 1), log(0.25 + 1e-8) - log(0.75 + 1e-8), 1e-15);
  assert_close(rg_refusal_score(flat, 4, two, 2), 0.0, 1e-15);
  const float peaked[2] = {0, -1000}, even[2] = {5, 5};
  assert_close(rg_kl_logits(peaked, peaked, 2), 0.0, 0.0);
  /* p = [1, 0], q = [1/2, 1/2]: 1 * (log(1 + 1e-6) - log(0.5 + 1e-6)). */
  assert_close(rg_kl_logits(peaked, even, 2), log(1 + 1e-6) - log(0.5 + 1e-6), 1e-12);
}

static void test_scores_match_reference(void **state) {
  fixture *f = *state;
  rg_token_batch harm = {(const int32_t *const *)f->ids, f->lens, 2};
  rg_token_batch harmless = {(const int32_t *const *)f->ids + 2, f->lens + 2, 2};
  int32_t refusal = cJSON_GetArrayItem(cJSON_GetObjectItem(f->fx, "refusal_tokens"), 0)->valueint;
  const rg_refusal_measure rm = rg_refusal_measure_tokens(&refusal, 1);
  rg_scorer *sc = rg_scorer_new(f->m, &harm, &harmless, &rm, 0);
  assert_non_null(sc);
  cJSON *bh = cJSON_GetObjectItem(f->fx, "base_harmful_scores");
  cJSON *bl = cJSON_GetObjectItem(f->fx, "base_harmless_scores");
  double ref_h = (cJSON_GetArrayItem(bh, 0)->valuedouble + cJSON_GetArrayItem(bh, 1)->valuedouble) / 2;
  double ref_l = (cJSON_GetArrayItem(bl, 0)->valuedouble + cJSON_GetArrayItem(bl, 1)->valuedouble) / 2;
  double bypass, induce, kl;
  assert_int_equal(rg_scorer_score(sc, f->r, num(f->fx, "dir_layer"), &bypass, &induce, &kl), 0);
  print_message("base harmful %.6f (ref %.6f) harmless %.6f (ref %.6f)\n", rg_scorer_base_harmful(sc), ref_h,
                rg_scorer_base_harmless(sc), ref_l);
  print_message("bypass %.6f (ref %.6f) induce %.6f (ref %.6f) kl %.6f (ref %.6f)\n", bypass, num(f->fx, "bypass"),
                induce, num(f->fx, "induce"), kl, num(f->fx, "kl"));
  assert_close(rg_scorer_base_harmful(sc), ref_h, SCORE_TOL);
  assert_close(rg_scorer_base_harmless(sc), ref_l, SCORE_TOL);
  assert_close(bypass, num(f->fx, "bypass"), SCORE_TOL);
  assert_close(induce, num(f->fx, "induce"), SCORE_TOL);
  assert_close(kl, num(f->fx, "kl"), SCORE_TOL);
  /* A second candidate after the first: the interventions must not leak. */
  double bypass2, induce2, kl2;
  assert_int_equal(rg_scorer_score(sc, f->r, num(f->fx, "dir_layer"), &bypass2, &induce2, &kl2), 0);
  assert_close(bypass2, bypass, 0.0);
  assert_close(induce2, induce, 0.0);
  assert_close(kl2, kl, 0.0);
  /* A bad layer is an error, not a crash. */
  assert_int_equal(rg_scorer_score(sc, f->r, f->m->cfg.n_layers, &bypass, &induce, &kl), -1);
  assert_non_null(strstr(rg_error_get(), "layer"));
  rg_scorer_free(sc);
}

/* The fixture's array KEY of OBJ as int32 ids into ids[16]; their count. */
static int fixture_ids(cJSON *obj, const char *key, int32_t *ids) {
  cJSON *a = cJSON_GetObjectItem(obj, key);
  int n = cJSON_GetArraySize(a);
  assert_true(n >= 1 && n <= 16);
  for (int k = 0; k < n; k++) ids[k] = cJSON_GetArrayItem(a, k)->valueint;
  return n;
}

static double mean2(cJSON *obj, const char *key) {
  cJSON *a = cJSON_GetObjectItem(obj, key);
  return (cJSON_GetArrayItem(a, 0)->valuedouble + cJSON_GetArrayItem(a, 1)->valuedouble) / 2;
}

/* The sequence score (log p(R) - log p(C), teacher-forced) of the base,
 * ablated and activation-added passes against the same transformers
 * reference; the strings tokenize to the reference's ids; and on a session
 * too small for a prompt and its string in one call the prompts' scores
 * are the same (they run in chunks). Each score sums about ten log-softmax
 * terms that carry the ~1e-5 logit error of test_forward, so SCORE_TOL
 * holds with the same margin. */
static void test_sequence_scores_match_reference(void **state) {
  fixture *f = *state;
  cJSON *seq = cJSON_GetObjectItem(f->fx, "sequence");
  int32_t r_ids[16], c_ids[16];
  const int nr = fixture_ids(seq, "refusal_ids", r_ids), nc = fixture_ids(seq, "compliance_ids", c_ids);
  const char *texts[2] = {cJSON_GetObjectItem(seq, "refusal_text")->valuestring,
                          cJSON_GetObjectItem(seq, "compliance_text")->valuestring};
  const int32_t *want[2] = {r_ids, c_ids};
  const int want_n[2] = {nr, nc};
  for (int k = 0; k < 2; k++) {
    int32_t *got = NULL;
    int n = 0;
    assert_int_equal(rg_tokenize(f->m->tokenizer, texts[k], strlen(texts[k]), false, false, &got, &n), 0);
    assert_int_equal(n, want_n[k]);
    for (int j = 0; j < n; j++) assert_int_equal(got[j], want[k][j]);
    free(got);
  }
  rg_token_batch harm = {(const int32_t *const *)f->ids, f->lens, 2};
  rg_token_batch harmless = {(const int32_t *const *)f->ids + 2, f->lens + 2, 2};
  const rg_refusal_measure rm = {.mode = RG_SCORE_SEQUENCE,
                                 .refusal = r_ids,
                                 .n_refusal = nr,
                                 .compliance = c_ids,
                                 .n_compliance = nc};
  rg_scorer *sc = rg_scorer_new(f->m, &harm, &harmless, &rm, 0);
  assert_non_null(sc);
  double bypass, induce, kl;
  assert_int_equal(rg_scorer_score(sc, f->r, num(f->fx, "dir_layer"), &bypass, &induce, &kl), 0);
  print_message("sequence: base harmful %.6f (ref %.6f) harmless %.6f (ref %.6f) bypass %.6f (ref %.6f) induce %.6f "
                "(ref %.6f) kl %.6f (ref %.6f)\n",
                rg_scorer_base_harmful(sc), mean2(seq, "base_harmful_scores"), rg_scorer_base_harmless(sc),
                mean2(seq, "base_harmless_scores"), bypass, num(seq, "bypass"), induce, num(seq, "induce"), kl,
                num(f->fx, "kl"));
  assert_close(rg_scorer_base_harmful(sc), mean2(seq, "base_harmful_scores"), SCORE_TOL);
  assert_close(rg_scorer_base_harmless(sc), mean2(seq, "base_harmless_scores"), SCORE_TOL);
  assert_close(bypass, num(seq, "bypass"), SCORE_TOL);
  assert_close(induce, num(seq, "induce"), SCORE_TOL);
  /* KL compares the next-token distributions at the prompt's end in both modes */
  assert_close(kl, num(f->fx, "kl"), SCORE_TOL);
  rg_scorer_free(sc);

  /* Per prompt, on a session of one sequence and a few logit rows: the
   * prompts run one sequence per call and still score as the reference. */
  rg_backend_opts bo = {.threads = 0};
  rg_weights *w = rg_weights_open(f->m, &bo, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  rg_session_opts so = {.max_logit_rows = nr > nc ? nr : nc};
  rg_session *s = rg_session_new(w, 1, 256, &so);
  assert_non_null(s);
  double each[2];
  assert_int_equal(rg_prompt_refusal_scores(s, &harm, &rm, each), 0);
  cJSON *bh = cJSON_GetObjectItem(seq, "base_harmful_scores");
  for (int i = 0; i < 2; i++) assert_close(each[i], cJSON_GetArrayItem(bh, i)->valuedouble, SCORE_TOL);
  /* a string whose rows do not fit the session's logit rows is an error */
  rg_session_free(s);
  so.max_logit_rows = 1;
  s = rg_session_new(w, 1, 256, &so);
  assert_int_equal(rg_prompt_refusal_scores(s, &harm, &rm, each), -1);
  assert_non_null(strstr(rg_error_get(), "does not fit"));
  rg_session_free(s);
  rg_weights_free(w);
}

/* The shortcut induce takes (rg_session_eval_from): the harmless prompts'
 * pass started at block L from the kept input of block L, with r added
 * there, gives the full pass's logits bit for bit, at the first, a middle
 * and the last layer; a training session is refused. */
typedef struct {
  float *rows;
  int layer, n;
} kept_input;

static void keep_input(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d_model,
                       const int *seq, const int *pos) {
  kept_input *k = user;
  if (layer == k->layer) memcpy(k->rows, rows, (size_t)n_rows * d_model * sizeof(float));
}

static void test_eval_from_layer_is_the_full_pass(void **state) {
  fixture *f = *state;
  const int L = f->m->cfg.n_layers, d = f->m->cfg.d_model, V = f->m->cfg.vocab_size;
  int n = f->lens[2] + f->lens[3];
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  int seq[n], last[2] = {f->lens[2] - 1, n - 1};
  for (int t = 0; t < n; t++) {
    const int p = t < f->lens[2] ? 2 : 3;
    ids[t] = f->ids[p][p == 2 ? t : t - f->lens[2]];
    seq[t] = p - 2;
  }
  float *r = malloc((size_t)d * sizeof *r), *full = malloc(2 * (size_t)V * sizeof *full),
        *from = malloc(2 * (size_t)V * sizeof *from);
  for (int k = 0; k < d; k++) r[k] = (float)f->r[k];
  kept_input keep = {.rows = malloc((size_t)n * d * sizeof(float)), .n = n};
  rg_backend_opts bo = {.threads = 2};
  rg_session_opts so = {.max_batch_tokens = n};
  rg_weights *w = rg_weights_open(f->m, &bo, RG_WEIGHTS_AUTO);
  rg_session *s = rg_session_new(w, 2, n, &so);
  assert_non_null(s);
  uint32_t *sites = calloc((size_t)L, sizeof *sites);
  const int layers[3] = {0, L / 2, L - 1};
  for (int i = 0; i < 3; i++) {
    keep.layer = layers[i];
    sites[layers[i]] = RG_HOOK_BIT(RG_HOOK_RESID_PRE);
    const rg_capture cap = {.fn = keep_input, .user = &keep, .layer_sites = sites};
    rg_session_reset(s);
    rg_session_set_capture(s, &cap);
    assert_int_equal(rg_session_eval(s, ids, seq, n, last, 0, NULL), 0);
    rg_session_set_capture(s, NULL);
    sites[layers[i]] = 0;
    const rg_intervention add = {.actadd_vec = r, .actadd_layer = layers[i], .actadd_coeff = 1.0f};
    assert_int_equal(rg_session_set_intervention(s, &add), 0);
    rg_session_reset(s);
    assert_int_equal(rg_session_eval(s, ids, seq, n, last, 2, full), 0);
    rg_session_reset(s);
    assert_int_equal(rg_session_eval_from(s, layers[i], keep.rows, ids, seq, n, last, 2, from), 0);
    assert_int_equal(rg_session_set_intervention(s, NULL), 0);
    assert_memory_equal(full, from, 2 * (size_t)V * sizeof *full);
  }
  rg_session_opts to = {.max_batch_tokens = n, .max_logit_rows = n, .train = true};
  rg_session *t = rg_session_new(w, 1, n, &to);
  assert_non_null(t);
  assert_int_equal(rg_session_eval_from(t, 1, keep.rows, ids, seq, n, last, 2, from), -1);
  assert_non_null(strstr(rg_error_get(), "training session"));
  rg_session_free(t);
  rg_session_free(s);
  rg_weights_free(w);
  free(sites), free(keep.rows), free(r), free(full), free(from), free(ids);
}

static void test_bad_inputs(void **state) {
  fixture *f = *state;
  rg_token_batch harm = {(const int32_t *const *)f->ids, f->lens, 2};
  rg_token_batch none = {(const int32_t *const *)f->ids, f->lens, 0};
  int32_t bad = f->m->cfg.vocab_size;
  const rg_refusal_measure bad_rm = rg_refusal_measure_tokens(&bad, 1);
  assert_null(rg_scorer_new(f->m, &harm, &harm, &bad_rm, 0));
  assert_non_null(strstr(rg_error_get(), "outside the vocabulary"));
  int32_t ok = 57;
  const rg_refusal_measure ok_rm = rg_refusal_measure_tokens(&ok, 1);
  assert_null(rg_scorer_new(f->m, &harm, &none, &ok_rm, 0));
  assert_non_null(strstr(rg_error_get(), "no harmless"));
  /* a sequence measure needs both strings */
  const rg_refusal_measure no_compliance = {.mode = RG_SCORE_SEQUENCE, .refusal = &ok, .n_refusal = 1};
  assert_null(rg_scorer_new(f->m, &harm, &harm, &no_compliance, 0));
  assert_non_null(strstr(rg_error_get(), "no compliance string"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_refusal_token),
      cmocka_unit_test(test_closed_forms),
      cmocka_unit_test(test_scores_match_reference),
      cmocka_unit_test(test_sequence_scores_match_reference),
      cmocka_unit_test(test_eval_from_layer_is_the_full_pass),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
