/* test_optimizer.c: training steps end to end (rg_weights_make_trainable,
 * a training session, rg_session_loss_ce / rg_session_backward, rg_optimizer_step)
 * against the same steps in transformers + torch.optim.AdamW in float64
 * (tests/fixtures/train/, from tools/reference/make_train_fixtures.py), on
 * two tiny Hugging Face models: 5 updates of one batch with clipping at a
 * global norm of 1 and weight decay.
 *
 * Each step's loss (before its update) and gradient norm (before clipping)
 * must match torch's within 1e-4 relative. Adam's first updates move every
 * parameter by about lr whatever its gradient's size, so float32 noise in
 * the smallest gradients flips a few update signs and the runs drift apart
 * slowly, while a wrong moment, bias correction, decay or
 * clipping changes the losses by 1e-2 and more. (Measured: below 1e-5.)
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/optimizer.h"
#include "backend/backend.h"
#include "engine/backward.h"
#include "engine/forward.h"
#include "model/model.h"
#include "testlib.h"
#include "util/error.h"

static const double TOL = 1e-4;

static void check_training(const char *name) {
  char rel[128];
  snprintf(rel, sizeof rel, "train/%s.json", name);
  cJSON *fx = t_read_json_fixture(rel);
  char *dir = t_hf_tiny(name);
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  free(dir);
  /* Making the weights trainable (f32 copies) must not change the logits
   * of a session made before (bf16 and f32 values are exact in f32). */
  const int32_t probe[3] = {5, 17, 250};
  const int probe_seq[3] = {0, 0, 0}, probe_row = 2;
  const int V = m->cfg.vocab_size;
  rg_backend_opts bo = {.threads = 2};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(w);
  rg_session *is = rg_session_new(w, 1, 8, NULL);
  assert_non_null(is);
  float *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
  assert_int_equal(rg_session_eval(is, probe, probe_seq, 3, &probe_row, 1, before), 0);
  if (rg_weights_make_trainable(w) != 0) fail_msg("%s", rg_error_get());
  assert_int_equal(rg_weights_make_trainable(w), 0); /* idempotent */
  rg_session_reset(is);
  assert_int_equal(rg_session_eval(is, probe, probe_seq, 3, &probe_row, 1, after), 0);
  rg_session_free(is);
  for (int v = 0; v < V; v++) assert_true(fabsf(before[v] - after[v]) <= 1e-6f * (1 + fabsf(before[v])));
  free(before), free(after);

  const cJSON *seqs = cJSON_GetObjectItem(fx, "seqs");
  int n = 0, R = 0;
  int32_t ids[64], targets[64];
  int seq[64], rows[64];
  for (int si = 0; si < cJSON_GetArraySize(seqs); si++) {
    const cJSON *s = cJSON_GetArrayItem(seqs, si);
    const int len = cJSON_GetArraySize(s);
    for (int p = 0; p < len; p++) {
      if (p + 1 < len) {
        rows[R] = n;
        targets[R++] = cJSON_GetArrayItem(s, p + 1)->valueint;
      }
      ids[n] = cJSON_GetArrayItem(s, p)->valueint;
      seq[n++] = si;
    }
  }
  float scale[64], losses[64];
  for (int r = 0; r < R; r++) scale[r] = 1.0f / (float)R; /* the mean over rows */

  rg_session_opts so = {.max_batch_tokens = n, .max_logit_rows = R, .train = true};
  rg_session *s = rg_session_new(w, 2, 16, &so);
  assert_non_null(s);
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  rg_adamw_hparams h = rg_adamw_defaults();
  h.weight_decay = cJSON_GetObjectItem(fx, "weight_decay")->valuedouble;
  rg_optimizer *o = rg_optimizer_new(w, g, &h);
  if (!o) fail_msg("%s", rg_error_get());
  const double lr = cJSON_GetObjectItem(fx, "lr")->valuedouble, max_norm = cJSON_GetObjectItem(fx, "max_norm")->valuedouble;
  float *logits = malloc((size_t)R * rg_session_vocab(s) * sizeof *logits);

  const cJSON *steps = cJSON_GetObjectItem(fx, "steps");
  for (int t = 0; t < cJSON_GetArraySize(steps); t++) {
    const cJSON *st = cJSON_GetArrayItem(steps, t);
    rg_session_reset(s);
    assert_int_equal(rg_session_eval(s, ids, seq, n, rows, R, logits), 0);
    assert_int_equal(rg_session_loss_ce(s, targets, scale, losses), 0);
    double loss = 0;
    for (int r = 0; r < R; r++) loss += (double)losses[r] / R;
    rg_grads_zero(g);
    assert_int_equal(rg_session_backward(s, g, NULL), 0);
    double norm;
    assert_int_equal(rg_optimizer_step(o, lr, max_norm, &norm), 0);
    const double want_loss = cJSON_GetObjectItem(st, "loss")->valuedouble;
    const double want_norm = cJSON_GetObjectItem(st, "grad_norm")->valuedouble;
    const double el = fabs(loss - want_loss) / want_loss, en = fabs(norm - want_norm) / want_norm;
    print_message("%-11s step %d: loss %.6f (torch %.6f, rel err %.1e), grad norm %.4f (rel err %.1e)\n", name, t + 1,
                  loss, want_loss, el, norm, en);
    assert_true(el < TOL);
    assert_true(en < TOL);
  }
  free(logits);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  cJSON_Delete(fx);
}

static void test_llama(void **state) { check_training("llama_f32"); }
static void test_qwen2(void **state) { check_training("qwen2_bf16"); }

/* An optimizer needs trainable weights (the f32 copies it can write). */
static void test_needs_f32(void **state) {
  char *dir = t_hf_tiny("llama3_bf16");
  rg_model *m = rg_model_load(dir);
  assert_non_null(m);
  free(dir);
  rg_session_opts so = {.train = true};
  rg_session *s = t_session(m, 1, RG_WEIGHTS_AUTO, 1, 8, &so);
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  rg_adamw_hparams h = rg_adamw_defaults();
  assert_null(rg_optimizer_new((rg_weights *)rg_session_weights(s), g, &h));
  assert_non_null(strstr(rg_error_get(), "rg_weights_make_trainable"));
  rg_grads_free(g);
  t_session_free(s);
  rg_model_free(m);
}

/* optimizer = sgd (rg_optimizer_use_sgd): one step on the tiny Llama's
 * gradients of a short sequence, against the update computed here by hand
 * in double from the same gradients: torch.optim.SGD without momentum,
 * p - lr (s g + wd p), s = min(1, max_norm / (|g| + 1e-6)) (clip_grad_norm_),
 * with lr 0.1, weight decay 0.01 and max_norm 0.5 (so the clip acts: the
 * norm is printed). float32 against double: within 2 float32 ulps of the
 * terms' sizes. A missing clip, decay or sign is off by far more; the
 * parameters must also move (lr s |g| is ~1e-2 here). */
static void test_sgd(void **state) {
  (void)state;
  char *dir = t_hf_tiny("llama_f32");
  rg_model *m = rg_model_load(dir);
  assert_non_null(m);
  free(dir);
  rg_backend_opts bo = {.threads = 1};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(w);
  assert_int_equal(rg_weights_make_trainable(w), 0);
  const int32_t ids[5] = {5, 17, 250, 3, 9}, targets[4] = {17, 250, 3, 9};
  const int seq[5] = {0}, rows[4] = {0, 1, 2, 3};
  const float scale[4] = {0.25f, 0.25f, 0.25f, 0.25f};
  rg_session_opts so = {.max_batch_tokens = 5, .max_logit_rows = 4, .train = true};
  rg_session *s = rg_session_new(w, 1, 8, &so);
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  float *logits = malloc(4 * (size_t)rg_session_vocab(s) * sizeof *logits), losses[4];
  assert_int_equal(rg_session_eval(s, ids, seq, 5, rows, 4, logits), 0);
  assert_int_equal(rg_session_loss_ce(s, targets, scale, losses), 0);
  rg_grads_zero(g);
  assert_int_equal(rg_session_backward(s, g, NULL), 0);
  const int P = rg_weights_count(w);
  float **p0 = calloc((size_t)P, sizeof *p0), **gr = calloc((size_t)P, sizeof *gr);
  double ss = 0;
  for (int i = 0; i < P; i++) {
    const size_t n = (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
    p0[i] = malloc(n * sizeof **p0), gr[i] = malloc(n * sizeof **gr);
    assert_int_equal(rg_weights_download(w, i, p0[i]), 0);
    assert_int_equal(rg_buf_download(rg_weights_backend(w), rg_grads_buf(g, i), 0, gr[i], n), 0);
    for (size_t k = 0; k < n; k++) ss += (double)gr[i][k] * gr[i][k];
  }
  const double lr = 0.1, wd = 0.01, max_norm = 0.5, norm = sqrt(ss), clip = fmin(1.0, max_norm / (norm + 1e-6));
  rg_adamw_hparams h = rg_adamw_defaults();
  h.weight_decay = wd;
  rg_optimizer *o = rg_optimizer_new(w, g, &h);
  assert_non_null(o);
  assert_int_equal(rg_optimizer_use_sgd(o), 0);
  double got_norm, moved = 0;
  assert_int_equal(rg_optimizer_step(o, lr, max_norm, &got_norm), 0);
  print_message("sgd: gradient norm %.6f (here %.6f), clip factor %.4f\n", got_norm, norm, clip);
  assert_true(fabs(got_norm - norm) <= 1e-6 * norm);
  assert_true(clip < 1);
  for (int i = 0; i < P; i++) {
    const size_t n = (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
    float *p1 = malloc(n * sizeof *p1);
    assert_int_equal(rg_weights_download(w, i, p1), 0);
    for (size_t k = 0; k < n; k++) {
      const double step = lr * (clip * gr[i][k] + wd * p0[i][k]), want = p0[i][k] - step;
      const double tol = 2.4e-7 * (fabs(p0[i][k]) + fabs(lr * clip * gr[i][k]) + fabs(lr * wd * p0[i][k])) + 1e-30;
      if (fabs(p1[k] - want) > tol) fail_msg("%s[%zu]: %.9g, by hand %.9g", rg_weights_tensor(w, i)->name, k, p1[k], want);
      moved = fmax(moved, fabs((double)p1[k] - p0[i][k]));
    }
    free(p1), free(p0[i]), free(gr[i]);
  }
  assert_true(moved > 1e-4);
  free(p0), free(gr), free(logits);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd),
      cmocka_unit_test(test_llama),
      cmocka_unit_test(test_qwen2),
      cmocka_unit_test(test_needs_f32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
