/* test_recompute: a training session that recomputes block activations in
 * the backward pass (rg_session_opts.recompute, gradient checkpointing:
 * each block from its input, or all but attention) gives bitwise the
 * gradients of one that keeps them all.
 *
 * Bitwise, not within a tolerance: the recomputation runs the same kernels
 * on the same block inputs with the same thread count, so any difference is
 * a bug (a block recomputed from the wrong input, an intervention applied
 * twice to the block input, a shared buffer overwritten before its block's
 * backward read it). Checked on the tiny Qwen2 (biases, tied head) with
 * every parameter's gradient and the input-embedding gradient, plain, with
 * directional ablation and activation addition set (the in-place edits of
 * a block's input that a recomputation must not repeat), and with LoRA
 * adapters (B set nonzero so that every adapter gradient is nonzero).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/backward.h"
#include "engine/forward.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"
#include "util/rng.h"

enum { B = 2, T = 24 };

static float urand(uint64_t *r) { return (float)((double)(rg_splitmix64(r) >> 11) / 9007199254740992.0 * 2 - 1); }

/* One CE loss over every next-token row of a fixed two-sequence batch, on a
 * new session (*out): the parameter gradients into a new rg_grads
 * (returned) and the input-embedding gradient into d_embed[B*T*d]. */
static rg_grads *gradients(rg_weights *w, rg_recompute recompute, const rg_intervention *iv, float *d_embed,
                           rg_session **out) {
  rg_session_opts so = {.max_batch_tokens = B * T, .max_logit_rows = B * (T - 1), .train = true, .recompute = recompute};
  rg_session *s = rg_session_new(w, B, T, &so);
  if (!s) fail_msg("%s", rg_error_get());
  if (rg_session_set_intervention(s, iv) != 0) fail_msg("%s", rg_error_get());
  const int V = rg_weights_model(w)->cfg.vocab_size;
  int32_t ids[B * T], targets[B * (T - 1)];
  int seq[B * T], rows[B * (T - 1)];
  float scale[B * (T - 1)], losses[B * (T - 1)];
  uint64_t r = 99;
  for (int i = 0; i < B * T; i++) ids[i] = (int32_t)(rg_splitmix64(&r) % (uint64_t)V), seq[i] = i / T;
  int R = 0;
  for (int b = 0; b < B; b++)
    for (int p = 0; p + 1 < T; p++, R++) rows[R] = b * T + p, targets[R] = ids[b * T + p + 1], scale[R] = 1.0f / (B * (T - 1));
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  if (rg_session_eval(s, ids, seq, B * T, rows, R, NULL) != 0 || rg_session_loss_ce(s, targets, scale, losses) != 0 ||
      rg_session_backward(s, g, d_embed) != 0)
    fail_msg("%s", rg_error_get());
  *out = s;
  return g;
}

/* Compares every parameter gradient and the input gradients of POLICY
 * with those of a session that keeps everything, bitwise. */
static void compare_policy(rg_weights *w, const rg_intervention *iv, const char *what, rg_recompute policy) {
  const int d = rg_weights_model(w)->cfg.d_model;
  float *e1 = malloc((size_t)B * T * d * sizeof *e1), *e2 = malloc((size_t)B * T * d * sizeof *e2);
  rg_session *s1, *s2;
  rg_grads *g1 = gradients(w, RG_RECOMPUTE_NONE, iv, e1, &s1), *g2 = gradients(w, policy, iv, e2, &s2);
  assert_int_equal(rg_grads_count(g1), rg_grads_count(g2));
  size_t nonzero = 0, total = 0;
  for (int i = 0; i < rg_grads_count(g1); i++) {
    const size_t n = (size_t)rg_tensor_nelems(rg_grads_tensor(g1, i));
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_int_equal(rg_grads_download(g1, i, a), 0);
    assert_int_equal(rg_grads_download(g2, i, b), 0);
    if (memcmp(a, b, n * sizeof *a) != 0) fail_msg("%s: the gradient of %s differs", what, rg_grads_tensor(g1, i)->name);
    for (size_t k = 0; k < n; k++) nonzero += a[k] != 0;
    total += n;
    free(a), free(b);
  }
  if (memcmp(e1, e2, (size_t)B * T * d * sizeof *e1) != 0) fail_msg("%s: the input-embedding gradient differs", what);
  if (nonzero < total / 2) fail_msg("%s: only %zu of %zu gradient values are nonzero", what, nonzero, total);
  print_message("%s, %s: %d gradients (%zu values, %zu nonzero) and the input gradient bitwise equal\n", what,
                policy == RG_RECOMPUTE_FULL ? "recompute full" : "recompute all but attention", rg_grads_count(g1),
                total, nonzero);
  free(e1), free(e2);
  rg_grads_free(g1); /* a session's gradients go first */
  rg_grads_free(g2);
  rg_session_free(s1);
  rg_session_free(s2);
}

static void compare(rg_weights *w, const rg_intervention *iv, const char *what) {
  compare_policy(w, iv, what, RG_RECOMPUTE_FULL);
  compare_policy(w, iv, what, RG_RECOMPUTE_MATMULS);
}

static void test_recompute_bitwise(void **state) {
  (void)state;
  char *dir = t_hf_tiny("qwen2_bf16");
  rg_model *m = rg_model_load(dir);
  free(dir);
  if (!m) fail_msg("%s", rg_error_get());
  const int d = m->cfg.d_model;
  rg_weights *w = rg_weights_open(m, &(rg_backend_opts){.threads = 2}, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  assert_int_equal(rg_weights_make_trainable(w), 0);
  compare(w, NULL, "full, plain");
  float *dir_v = malloc((size_t)d * sizeof *dir_v), *add = malloc((size_t)d * sizeof *add);
  uint64_t r = 5;
  for (int i = 0; i < d; i++) dir_v[i] = urand(&r), add[i] = 0.5f * urand(&r);
  const rg_intervention iv = {.ablate_dir = dir_v, .actadd_vec = add, .actadd_layer = 1, .actadd_coeff = 2.0f};
  compare(w, &iv, "full, ablation + actadd");
  rg_weights_free(w);

  w = rg_weights_open(m, &(rg_backend_opts){.threads = 2}, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  rg_lora_opts lo = {.rank = 3, .alpha = 6.0f};
  assert_int_equal(rg_lora_targets_parse("q,v,o,gate,down", &lo.targets), 0);
  assert_int_equal(rg_weights_add_lora(w, &lo, 11), 0);
  for (int i = 0; i < rg_weights_count(w); i++) { /* B nonzero, so every adapter gets a gradient */
    const size_t n = (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
    float *v = malloc(n * sizeof *v);
    for (size_t k = 0; k < n; k++) v[k] = 0.1f * urand(&r);
    assert_int_equal(rg_weights_upload(w, i, v), 0);
    free(v);
  }
  compare(w, &iv, "LoRA, ablation + actadd");
  rg_weights_free(w);
  free(dir_v), free(add);
  rg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_recompute_bitwise)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
