/* test_weights.c: weights shared by sessions (engine/weights.h) and backends
 * with their own thread counts, on SmolLM2-135M (Q4_1).
 *
 * 1. An update reaches every session. Sessions made before the weights are
 *    converted to trainable f32 copies and updated by an optimizer step
 *    must compute exactly what a session made afterwards computes: same
 *    weights, same kernels, so the logits are compared bit for bit. This is
 *    the stale-weights bug of issue 8 (a session kept computing with the
 *    tiled Q4_1 bytes, or its own f32 copy, after the model changed, 42.4
 *    off in the logits, without an error). A control shows the comparison
 *    can fail: a session on a second rg_weights of the same model (what
 *    every session used to be) does not see the update.
 * 2. Thread counts belong to backends: two sessions on backends of 1 and 2
 *    threads, used from two threads at once, give the same bits as each
 *    used alone.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/optimizer.h"
#include "engine/backward.h"
#include "engine/forward.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"

/* "The capital of France is" in SmolLM2's vocabulary, any ids will do. */
static const int32_t PROBE[6] = {504, 3575, 282, 4649, 314, 1};
enum { N_PROBE = 6 };

static rg_model *load(void) {
  rg_model *m = rg_model_load(t_env("REFGEO_MODEL"));
  if (!m) fail_msg("%s", rg_error_get());
  return m;
}

/* The last-position logits of PROBE. */
static void probe(rg_session *s, float *logits) {
  const int seq[N_PROBE] = {0}, row = N_PROBE - 1;
  rg_session_reset(s);
  if (rg_session_eval(s, PROBE, seq, N_PROBE, &row, 1, logits) != 0) fail_msg("%s", rg_error_get());
}

static double max_abs_diff(const float *a, const float *b, int n) {
  double md = 0;
  for (int i = 0; i < n; i++) md = fmax(md, fabs((double)a[i] - b[i]));
  return md;
}

/* One optimizer step of next-token loss on PROBE through a training session. */
static void train_step(rg_weights *w) {
  rg_session_opts so = {.max_batch_tokens = N_PROBE, .max_logit_rows = N_PROBE - 1, .train = true};
  rg_session *t = rg_session_new(w, 1, N_PROBE, &so);
  assert_non_null(t);
  rg_grads *g = rg_grads_new(t);
  assert_non_null(g);
  rg_adamw_hparams h = rg_adamw_defaults();
  rg_optimizer *o = rg_optimizer_new(w, g, &h);
  if (!o) fail_msg("%s", rg_error_get());
  int seq[N_PROBE] = {0}, rows[N_PROBE - 1];
  float scale[N_PROBE - 1], losses[N_PROBE - 1];
  for (int r = 0; r < N_PROBE - 1; r++) rows[r] = r, scale[r] = 1.0f / (N_PROBE - 1);
  assert_int_equal(rg_session_eval(t, PROBE, seq, N_PROBE, rows, N_PROBE - 1, NULL), 0);
  assert_int_equal(rg_session_loss_ce(t, PROBE + 1, scale, losses), 0);
  assert_int_equal(rg_session_backward(t, g, NULL), 0);
  double norm;
  /* Adam moves every parameter by about lr: 1e-3 changes the logits by
   * far more than float32 noise. */
  assert_int_equal(rg_optimizer_step(o, 1e-3, 0, &norm), 0);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(t);
}

static void check_update_reaches_sessions(rg_weight_mode mode, const char *what) {
  rg_model *m = load();
  const int V = m->cfg.vocab_size;
  rg_backend_opts bo = {.threads = 2};
  rg_weights *w = rg_weights_open(m, &bo, mode), *other = rg_weights_open(m, &bo, mode);
  assert_non_null(w);
  assert_non_null(other);
  rg_session *early = rg_session_new(w, 1, N_PROBE, NULL), *elsewhere = rg_session_new(other, 1, N_PROBE, NULL);
  assert_non_null(early);
  assert_non_null(elsewhere);
  float *before = malloc((size_t)V * sizeof *before), *got = malloc((size_t)V * sizeof *got);
  float *want = malloc((size_t)V * sizeof *want), *stale = malloc((size_t)V * sizeof *stale);
  probe(early, before);

  if (rg_weights_make_trainable(w) != 0) fail_msg("%s", rg_error_get());
  train_step(w);

  rg_session *fresh = rg_session_new(w, 1, N_PROBE, NULL);
  assert_non_null(fresh);
  probe(fresh, want);
  probe(early, got);
  probe(elsewhere, stale);
  const double moved = max_abs_diff(before, want, V), early_err = max_abs_diff(got, want, V);
  const double stale_err = max_abs_diff(stale, want, V);
  print_message("%s: the update moved the logits by up to %.3g; session made before it: max |diff| %.3g from a "
                "fresh one; a session on other weights (control): %.3g\n",
                what, moved, early_err, stale_err);
  assert_true(moved > 1e-2);
  assert_memory_equal(got, want, (size_t)V * sizeof *got); /* exactly */
  assert_true(stale_err > 1e-2);
  free(before), free(got), free(want), free(stale);
  rg_session_free(fresh);
  rg_session_free(early);
  rg_session_free(elsewhere);
  rg_weights_free(w);
  rg_weights_free(other);
  rg_model_free(m);
}

static void test_update_tiled(void **state) { check_update_reaches_sessions(RG_WEIGHTS_TILED, "tiled Q4_1"); }
static void test_update_f32(void **state) { check_update_reaches_sessions(RG_WEIGHTS_F32, "f32 copies"); }

/* ---------------------------------------------------------------- threads */

typedef struct {
  rg_session *s;
  const float *want;
  int vocab, repeats, mismatches;
} worker;

static void *run_worker(void *arg) {
  worker *wk = arg;
  float *got = malloc((size_t)wk->vocab * sizeof *got);
  const int seq[N_PROBE] = {0}, row = N_PROBE - 1;
  for (int r = 0; r < wk->repeats; r++) {
    rg_session_reset(wk->s);
    if (rg_session_eval(wk->s, PROBE, seq, N_PROBE, &row, 1, got) != 0 ||
        memcmp(got, wk->want, (size_t)wk->vocab * sizeof *got) != 0)
      wk->mismatches++;
  }
  free(got);
  return NULL;
}

static void test_threads_per_backend(void **state) {
  rg_model *m = load();
  const int V = m->cfg.vocab_size;
  rg_backend_opts one = {.threads = 1}, two = {.threads = 2};
  rg_weights *w1 = rg_weights_open(m, &one, RG_WEIGHTS_TILED), *w2 = rg_weights_open(m, &two, RG_WEIGHTS_TILED);
  assert_non_null(w1);
  assert_non_null(w2);
  assert_int_equal(rg_backend_threads(rg_weights_backend(w1)), 1);
  assert_int_equal(rg_backend_threads(rg_weights_backend(w2)), 2);
  rg_session *s1 = rg_session_new(w1, 1, N_PROBE, NULL), *s2 = rg_session_new(w2, 1, N_PROBE, NULL);
  assert_non_null(s1);
  assert_non_null(s2);
  float *alone1 = malloc((size_t)V * sizeof *alone1), *alone2 = malloc((size_t)V * sizeof *alone2);
  probe(s1, alone1);
  probe(s2, alone2);
  worker a = {s1, alone1, V, 4, 0}, b = {s2, alone2, V, 4, 0};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, run_worker, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, run_worker, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  print_message("two sessions (1 and 2 threads) at once: %d and %d of 4 runs differ from alone\n", a.mismatches,
                b.mismatches);
  assert_int_equal(a.mismatches, 0);
  assert_int_equal(b.mismatches, 0);
  free(alone1), free(alone2);
  rg_session_free(s1);
  rg_session_free(s2);
  rg_weights_free(w1);
  rg_weights_free(w2);
  rg_model_free(m);
}

static void test_unknown_backend(void **state) {
  rg_backend_opts o = {.name = "tpu"};
  assert_null(rg_backend_new(&o));
  assert_non_null(strstr(rg_error_get(), "unknown device 'tpu' (this build has: cpu"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_update_tiled),
      cmocka_unit_test(test_update_f32),
      cmocka_unit_test(test_threads_per_backend),
      cmocka_unit_test(test_unknown_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
