/* test_backward.c: whole-model gradients of a training session against
 * transformers + torch.autograd in float64 (tests/fixtures/backward/, from
 * tools/reference/make_backward_fixtures.py), for the four tiny Hugging Face
 * models of tests/fixtures/hf_tiny/ (Llama with tied embeddings, Qwen2 with
 * q/k/v biases, Mistral with an untied head, Llama-3 RoPE scaling; all with
 * grouped-query attention). Like llm.c's test, every parameter tensor is
 * checked: its gradient's L2 norm over all elements, and every 29th element.
 * The two sequences of the batch are interleaved token by token (a ragged
 * batch), and the loss weights rows unevenly and skips one. The sliding
 * window is exercised by mistral_f16_window4: Mistral's weights with
 * sliding_window 4 in its config.json, on 12- and 9-token sequences, so most
 * queries attend to their last 4 keys only (ignoring the window changes the
 * reference's logits by up to 1.7).
 *
 * Tolerance 1e-4, relative to the largest reference magnitude of each
 * tensor: refgeo computes in float32 (sums of at most a few hundred terms,
 * ~1e-6 relative), the reference in float64; a wrong index, a missing term
 * or a dropped branch gives errors of order 1e-1 and more.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backward.h"
#include "engine/forward.h"
#include "model/model.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static const double TOL = 1e-4;

typedef struct {
  cJSON *fx;
  rg_model *m;
  rg_session *s;
  int n, R;
  int32_t *ids;
  int *seq, *rows, *first; /* first[si]: batch index of sequence si's token 0 */
  int32_t *targets;
  float *scale;
} batch;

static int arr_len(const cJSON *a) { return cJSON_GetArraySize(a); }
static const cJSON *get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  if (!v) fail_msg("fixture: missing '%s'", k);
  return v;
}

/* The fixture's model directory; when the fixture overrides sliding_window
 * (as make_backward_fixtures.py passes it to from_pretrained), a copy whose
 * config.json says so. */
static char *model_dir(const cJSON *fx) {
  char *dir = t_hf_tiny(get(fx, "model")->valuestring);
  const cJSON *window = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "config_overrides"), "sliding_window");
  if (!window) return dir;
  char *copy = malloc(strlen(dir) + 32), cmd[4096];
  sprintf(copy, "%s-window%d", dir, window->valueint);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, dir, copy);
  assert_int_equal(system(cmd), 0);
  char *path = rg_path_join(copy, "config.json"), *text = rg_read_file(path, NULL);
  cJSON *cfg = cJSON_Parse(text);
  assert_true(cJSON_ReplaceItemInObject(cfg, "sliding_window", cJSON_CreateNumber(window->valueint)));
  char *edited = cJSON_Print(cfg);
  assert_int_equal(rg_write_file_atomic(path, edited, strlen(edited)), 0);
  free(edited), free(text), free(path), free(dir);
  cJSON_Delete(cfg);
  return copy;
}

/* Loads the model and lays out the fixture's batch, sequences interleaved. */
static batch load(const char *name) {
  batch b = {0};
  char rel[128];
  snprintf(rel, sizeof rel, "backward/%s.json", name);
  b.fx = t_read_json_fixture(rel);
  char *dir = model_dir(b.fx);
  b.m = rg_model_load(dir);
  if (!b.m) fail_msg("%s", rg_error_get());
  free(dir);
  const cJSON *seqs = get(b.fx, "seqs");
  const int ns = arr_len(seqs);
  int len[2] = {0, 0};
  assert_int_equal(ns, 2);
  for (int si = 0; si < ns; si++) b.n += len[si] = arr_len(cJSON_GetArrayItem(seqs, si));
  b.ids = malloc((size_t)b.n * sizeof *b.ids);
  b.seq = malloc((size_t)b.n * sizeof *b.seq);
  int *index[2] = {malloc((size_t)len[0] * sizeof(int)), malloc((size_t)len[1] * sizeof(int))};
  for (int k = 0, p = 0; k < b.n; p++)
    for (int si = 0; si < ns; si++)
      if (p < len[si]) {
        b.ids[k] = cJSON_GetArrayItem(cJSON_GetArrayItem(seqs, si), p)->valueint;
        b.seq[k] = si;
        index[si][p] = k++;
      }
  const cJSON *rows = get(b.fx, "rows"), *targets = get(b.fx, "targets"), *scale = get(b.fx, "scale");
  b.R = arr_len(rows);
  b.rows = malloc((size_t)b.R * sizeof *b.rows);
  b.targets = malloc((size_t)b.R * sizeof *b.targets);
  b.scale = malloc((size_t)b.R * sizeof *b.scale);
  for (int r = 0; r < b.R; r++) {
    const cJSON *rp = cJSON_GetArrayItem(rows, r);
    b.rows[r] = index[cJSON_GetArrayItem(rp, 0)->valueint][cJSON_GetArrayItem(rp, 1)->valueint];
    b.targets[r] = cJSON_GetArrayItem(targets, r)->valueint;
    b.scale[r] = (float)cJSON_GetArrayItem(scale, r)->valuedouble;
  }
  b.first = malloc(2 * sizeof *b.first);
  b.first[0] = index[0][0];
  b.first[1] = index[1][0];
  free(index[0]), free(index[1]);
  rg_session_opts o = {.max_batch_tokens = b.n, .max_logit_rows = b.n, .train = true};
  b.s = t_session(b.m, 2, RG_WEIGHTS_F32, 2, len[0] > len[1] ? len[0] : len[1], &o);
  return b;
}

static void unload(batch *b) {
  t_session_free(b->s);
  rg_model_free(b->m);
  cJSON_Delete(b->fx);
  free(b->ids), free(b->seq), free(b->rows), free(b->first), free(b->targets), free(b->scale);
}

/* eval + loss: returns the max rel err of the losses vs the fixture. */
static double forward_loss(batch *b) {
  rg_session_reset(b->s);
  float *logits = malloc((size_t)b->R * rg_session_vocab(b->s) * sizeof *logits), *losses = malloc((size_t)b->R * sizeof *losses);
  if (rg_session_eval(b->s, b->ids, b->seq, b->n, b->rows, b->R, logits) != 0) fail_msg("%s", rg_error_get());
  if (rg_session_loss_ce(b->s, b->targets, b->scale, losses) != 0) fail_msg("%s", rg_error_get());
  const cJSON *ref = get(b->fx, "losses");
  double e = 0;
  for (int r = 0; r < b->R; r++) {
    double want = cJSON_GetArrayItem(ref, r)->valuedouble;
    e = fmax(e, fabs(losses[r] - want) / fabs(want));
  }
  free(logits), free(losses);
  return e;
}

/* Compares every gradient tensor with the fixture; FACTOR scales the
 * reference (2 after two accumulated backward passes). */
static void check_grads(batch *b, rg_grads *g, double factor, const char *name) {
  const cJSON *tensors = get(b->fx, "tensors");
  const int stride = get(b->fx, "stride")->valueint;
  assert_int_equal(rg_grads_count(g), arr_len(tensors)); /* one gradient per distinct parameter */
  double worst = 0;
  for (int i = 0; i < rg_grads_count(g); i++) {
    const rg_tensor *t = rg_grads_tensor(g, i);
    const cJSON *ref = cJSON_GetObjectItem(tensors, t->name);
    if (!ref) fail_msg("%s: no reference gradient for %s", name, t->name);
    const size_t n = (size_t)rg_tensor_nelems(t);
    assert_int_equal(n, (size_t)get(ref, "n")->valuedouble);
    float *got = malloc(n * sizeof *got);
    rg_grads_download(g, i, got);
    double ss = 0;
    for (size_t k = 0; k < n; k++) ss += (double)got[k] * got[k];
    const double want_norm = factor * get(ref, "norm")->valuedouble;
    double e_norm = fabs(sqrt(ss) - want_norm) / want_norm;
    const cJSON *sample = get(ref, "sample");
    double md = 0, mr = 1e-30;
    for (int k = 0; k < arr_len(sample); k++) {
      double want = factor * cJSON_GetArrayItem(sample, k)->valuedouble;
      md = fmax(md, fabs(got[(size_t)k * stride] - want));
      mr = fmax(mr, fabs(want));
    }
    /* The sample's scale is at least the tensor's RMS element: a k_proj
     * bias gradient is nearly zero (a key bias shifts all scores of a query
     * alike, up to RoPE), and the two sampled elements of a 32-element
     * bias can both be tiny cancellations. */
    mr = fmax(mr, want_norm / sqrt((double)n));
    const double e = fmax(e_norm, md / mr);
    if (!(e < TOL)) fail_msg("%s %s: gradient norm err %.2e, sample err %.2e (tol %.0e)", name, t->name, e_norm, md / mr, TOL);
    worst = fmax(worst, e);
    free(got);
  }
  print_message("%-12s %d gradient tensors, worst rel err %.2e\n", name, rg_grads_count(g), worst);
}

static void check_model(const char *name) {
  batch b = load(name);
  const double e_loss = forward_loss(&b);
  print_message("%-12s losses rel err %.2e\n", name, e_loss);
  assert_true(e_loss < TOL);

  rg_grads *g = rg_grads_new(b.s);
  assert_non_null(g);
  rg_grads_zero(g);
  const int d = b.m->cfg.d_model;
  float *d_embed = malloc((size_t)b.n * d * sizeof *d_embed);
  if (rg_session_backward(b.s, g, d_embed) != 0) fail_msg("%s", rg_error_get());
  check_grads(&b, g, 1.0, name);

  /* the gradient with respect to the input embeddings, per sequence */
  const cJSON *de = get(b.fx, "d_embed");
  double md = 0, mr = 1e-30;
  for (int si = 0; si < 2; si++) {
    const cJSON *ref = cJSON_GetArrayItem(de, si);
    for (int k = 0; k < arr_len(ref); k++) {
      const int p = k / d, j = k % d;
      int row = -1; /* batch index of (si, p) */
      for (int i = 0, seen = 0; i < b.n; i++)
        if (b.seq[i] == si && seen++ == p) row = i;
      const double want = cJSON_GetArrayItem(ref, k)->valuedouble;
      md = fmax(md, fabs(d_embed[(size_t)row * d + j] - want));
      mr = fmax(mr, fabs(want));
    }
  }
  print_message("%-12s d_embed rel err %.2e\n", name, md / mr);
  assert_true(md / mr < TOL);

  /* Gradients add up: a second pass doubles them. */
  assert_true(forward_loss(&b) < TOL);
  if (rg_session_backward(b.s, g, NULL) != 0) fail_msg("%s", rg_error_get());
  check_grads(&b, g, 2.0, name);

  /* One backward per loss. */
  assert_int_equal(rg_session_backward(b.s, g, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "no loss"));
  free(d_embed);
  rg_grads_free(g);
  unload(&b);
}

static void test_llama_tied(void **state) { check_model("llama_f32"); }
static void test_qwen2_bias(void **state) { check_model("qwen2_bf16"); }
static void test_mistral_untied(void **state) { check_model("mistral_f16"); }
static void test_llama3_rope_scaling(void **state) { check_model("llama3_bf16"); }
static void test_mistral_window(void **state) { check_model("mistral_f16_window4"); }

/* A batch that continues cached sequences cannot be differentiated (the
 * cached tokens' activations are gone); an inference session has no
 * gradients. Both are errors, not wrong numbers. */
static void test_errors(void **state) {
  batch b = load("llama_f32");
  rg_grads *g = rg_grads_new(b.s);
  assert_non_null(g);
  rg_session_reset(b.s);
  const int32_t ids[2] = {1, 2};
  const int seq[2] = {0, 0}, row = 0;
  float *logits = malloc((size_t)rg_session_vocab(b.s) * sizeof *logits), loss;
  const int32_t target = 3;
  const float one = 1;
  assert_int_equal(rg_session_eval(b.s, ids, seq, 1, &row, 0, NULL), 0);
  assert_int_equal(rg_session_eval(b.s, ids + 1, seq + 1, 1, &row, 1, logits), 0);
  assert_int_equal(rg_session_loss_ce(b.s, &target, &one, &loss), 0);
  assert_int_equal(rg_session_backward(b.s, g, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "whole sequences"));
  const int32_t bad = 100000;
  assert_int_equal(rg_session_loss_ce(b.s, &bad, &one, &loss), -1);
  assert_non_null(strstr(rg_error_get(), "out of range"));
  rg_grads_free(g);

  rg_session *inf = t_session(b.m, 1, RG_WEIGHTS_AUTO, 1, 8, NULL);
  assert_null(rg_grads_new(inf));
  assert_non_null(strstr(rg_error_get(), "training session"));
  t_session_free(inf);
  free(logits);
  unload(&b);
}

int main(void) {
  t_require_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_tied),     cmocka_unit_test(test_qwen2_bias),
      cmocka_unit_test(test_mistral_untied), cmocka_unit_test(test_llama3_rope_scaling),
      cmocka_unit_test(test_mistral_window),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
