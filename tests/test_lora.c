/* test_lora.c: LoRA adapters (weights.h, "LoRA").
 *
 * 1. Against Hugging Face peft (tests/fixtures/lora/, from
 *    tools/reference/make_lora_fixtures.py): the tiny llama_f32 (all seven
 *    modules adapted, rank 4, alpha 6) and qwen2_bf16 (q v o up down, rank
 *    3, alpha 12: q/k/v biases, base kept in bf16 tiles) and SmolLM2-135M
 *    (its Q4_1 GGUF kept in tiles, rank 2 on q and v of all 30 layers, B in
 *    the GGUF's permuted q row order). With peft's A and a random nonzero B
 *    uploaded, the mean next-token cross entropy of one two-sequence batch
 *    (from a training session and from an inference session) and the
 *    gradient of every adapter matrix must match peft's float64 autograd.
 *    Tolerance 1e-4, relative: the loss, and per tensor the L2 norm of the
 *    difference over the reference's norm. refgeo computes in float32
 *    against peft's float64. Measured: losses within 2.1e-8; gradients
 *    within 9.1e-7 (llama_f32), 7.3e-7 (qwen2_bf16) and 3.0e-5 (SmolLM2,
 *    worst at layer 0, whose gradient passes back through 30 float32
 *    layers). A wrong scale, a transposed or missing term is off by 1e-2
 *    and more.
 * 2. The merged export is W + (alpha / r) B A, computed here in double from
 *    the base weights and the adapters, and a checkpoint (hf_write.h) holds
 *    exactly the merged values; the adapted SmolLM2's checkpoint, reloaded,
 *    gives peft's loss (the GGUF's q row order undone for the merge).
 * 3. The base stays frozen: adding adapters to tiled weights grows
 *    rg_weights_bytes by the adapters' float32 bytes only.
 * 4. An optimizer step changes every adapter and no base weight.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/optimizer.h"
#include "engine/backward.h"
#include "engine/forward.h"
#include "engine/hf_write.h"
#include "model/model.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static const double TOL = 1e-4;

/* A fixture case: its JSON, and its .f32 (per tensor the values, then per
 * tensor the gradients, then the gradient with respect to the batch's input
 * embeddings). */
typedef struct {
  cJSON *fx;
  float *data;
  int n_tensors;
  size_t *offset; /* [2 * n_tensors]: values of tensor i at offset[i], its gradient at offset[n + i] */
  size_t d_embed; /* offset of the embedding gradient */
  rg_model *m;
  rg_weights *w;
  rg_lora_opts lo;
} lcase;

static const cJSON *get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  if (!v) fail_msg("fixture: missing '%s'", k);
  return v;
}

static size_t tensor_len(const cJSON *t) {
  const cJSON *shape = get(t, "shape");
  return (size_t)cJSON_GetArrayItem(shape, 0)->valueint * (size_t)cJSON_GetArrayItem(shape, 1)->valueint;
}

static rg_model *load_model(const char *name) {
  char *dir = strcmp(name, "gguf") == 0 ? strdup(t_env("REFGEO_MODEL")) : t_hf_tiny(name);
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  free(dir);
  return m;
}

/* Loads case NAME, its model, tiled weights with the case's adapters, and
 * uploads the fixture's A and B values. */
static lcase load_case(const char *name) {
  lcase c = {0};
  char rel[128];
  snprintf(rel, sizeof rel, "lora/%s.json", name);
  c.fx = t_read_json_fixture(rel);
  snprintf(rel, sizeof rel, "lora/%s.f32", name);
  size_t n_floats;
  c.data = t_read_f32(rel, &n_floats);
  const cJSON *tensors = get(c.fx, "tensors");
  c.n_tensors = cJSON_GetArraySize(tensors);
  c.offset = malloc(2 * (size_t)c.n_tensors * sizeof *c.offset);
  size_t at = 0;
  for (int k = 0; k < 2 * c.n_tensors; k++) {
    c.offset[k] = at;
    at += tensor_len(cJSON_GetArrayItem(tensors, k % c.n_tensors));
  }
  c.d_embed = at;
  c.m = load_model(get(c.fx, "model")->valuestring);
  int n_tokens = 0;
  for (int si = 0; si < cJSON_GetArraySize(get(c.fx, "seqs")); si++)
    n_tokens += cJSON_GetArraySize(cJSON_GetArrayItem(get(c.fx, "seqs"), si));
  assert_int_equal(at + (size_t)n_tokens * c.m->cfg.d_model, n_floats);
  const rg_backend_opts bo = {.threads = 2};
  c.w = rg_weights_open(c.m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(c.w);
  char list[128] = "";
  const cJSON *targets = get(c.fx, "targets");
  for (int k = 0; k < cJSON_GetArraySize(targets); k++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "," : "", cJSON_GetArrayItem(targets, k)->valuestring);
  c.lo.rank = get(c.fx, "rank")->valueint;
  c.lo.alpha = (float)get(c.fx, "alpha")->valuedouble;
  if (rg_lora_targets_parse(list, &c.lo.targets) != 0) fail_msg("%s", rg_error_get());
  if (rg_weights_add_lora(c.w, &c.lo, 1) != 0) fail_msg("%s", rg_error_get());
  /* the parameters are peft's adapters, in peft's order, under its names */
  assert_int_equal(rg_weights_count(c.w), c.n_tensors);
  for (int i = 0; i < c.n_tensors; i++) {
    const cJSON *t = cJSON_GetArrayItem(tensors, i);
    const rg_tensor *p = rg_weights_tensor(c.w, i);
    assert_string_equal(p->name, get(t, "name")->valuestring);
    assert_int_equal((size_t)rg_tensor_nelems(p), tensor_len(t));
    assert_int_equal(rg_tensor_nrows(p), cJSON_GetArrayItem(get(t, "shape"), 0)->valueint);
    if (rg_weights_upload(c.w, i, c.data + c.offset[i]) != 0) fail_msg("%s", rg_error_get());
  }
  return c;
}

static void free_case(lcase *c) {
  rg_weights_free(c->w);
  rg_model_free(c->m);
  cJSON_Delete(c->fx);
  free(c->data);
  free(c->offset);
}

/* ---------------------------------------------------------------- 1. peft */

typedef struct {
  int n, R;
  int32_t ids[64], targets[64];
  int seq[64], rows[64];
  float scale[64];
} batch;

/* The fixture's sequences one after the other; every position but each
 * sequence's last predicts the next token, weighted 1/R (the mean). */
static batch fixture_batch(const cJSON *fx) {
  batch b = {0};
  const cJSON *seqs = get(fx, "seqs");
  for (int si = 0; si < cJSON_GetArraySize(seqs); si++) {
    const cJSON *s = cJSON_GetArrayItem(seqs, si);
    const int len = cJSON_GetArraySize(s);
    for (int p = 0; p < len; p++) {
      if (p + 1 < len) {
        b.rows[b.R] = b.n;
        b.targets[b.R++] = cJSON_GetArrayItem(s, p + 1)->valueint;
      }
      b.ids[b.n] = cJSON_GetArrayItem(s, p)->valueint;
      b.seq[b.n++] = si;
    }
  }
  for (int r = 0; r < b.R; r++) b.scale[r] = 1.0f / (float)b.R;
  return b;
}

static double mean_loss(const float *losses, int R) {
  double sum = 0;
  for (int r = 0; r < R; r++) sum += losses[r];
  return sum / R;
}

/* |got - want| / |want| over N floats (L2 norms). */
static double norm_rel_err(const float *got, const float *want, size_t n) {
  double dd = 0, ww = 0;
  for (size_t k = 0; k < n; k++) {
    dd += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
    ww += (double)want[k] * want[k];
  }
  return sqrt(dd / ww);
}

static void check_against_peft(const char *name) {
  lcase c = load_case(name);
  const batch b = fixture_batch(c.fx);
  const double want = get(c.fx, "loss")->valuedouble;
  float losses[64];

  /* an inference session on the adapted weights computes the adapted model */
  rg_session_opts io = {.max_batch_tokens = b.n, .max_logit_rows = b.R};
  rg_session *is = rg_session_new(c.w, 2, 16, &io);
  assert_non_null(is);
  if (rg_session_eval_ce(is, b.ids, b.seq, b.n, b.rows, b.targets, b.R, losses) != 0) fail_msg("%s", rg_error_get());
  const double e_infer = fabs(mean_loss(losses, b.R) - want) / want;
  rg_session_free(is);

  rg_session_opts so = {.max_batch_tokens = b.n, .max_logit_rows = b.R, .train = true};
  rg_session *s = rg_session_new(c.w, 2, 16, &so);
  assert_non_null(s);
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  assert_int_equal(rg_grads_count(g), c.n_tensors); /* gradients of the adapters only */
  rg_grads_zero(g);
  float *d_embed = malloc((size_t)b.n * c.m->cfg.d_model * sizeof *d_embed);
  if (rg_session_eval(s, b.ids, b.seq, b.n, b.rows, b.R, NULL) != 0 ||
      rg_session_loss_ce(s, b.targets, b.scale, losses) != 0 || rg_session_backward(s, g, d_embed) != 0)
    fail_msg("%s", rg_error_get());
  const double e_loss = fabs(mean_loss(losses, b.R) - want) / want;
  print_message("%-10s loss %.6f (peft %.6f): rel err %.1e train, %.1e inference\n", name, mean_loss(losses, b.R),
                want, e_loss, e_infer);
  assert_true(e_loss < TOL);
  assert_true(e_infer < TOL);

  double worst = 0;
  const char *worst_name = "";
  for (int i = 0; i < c.n_tensors; i++) {
    const rg_tensor *t = rg_grads_tensor(g, i);
    const size_t n = (size_t)rg_tensor_nelems(t);
    float *got = malloc(n * sizeof *got);
    assert_int_equal(rg_grads_download(g, i, got), 0);
    const double e = norm_rel_err(got, c.data + c.offset[c.n_tensors + i], n);
    if (!(e < TOL)) fail_msg("%s %s: gradient rel err %.2e (tol %.0e)", name, t->name, e, TOL);
    if (e > worst) worst = e, worst_name = t->name;
    free(got);
  }
  /* what an attack on the adapted model differentiates */
  const double e_embed = norm_rel_err(d_embed, c.data + c.d_embed, (size_t)b.n * c.m->cfg.d_model);
  print_message("%-10s %d adapter gradients, worst rel err %.2e (%s); input embeddings %.2e\n", name, c.n_tensors,
                worst, worst_name, e_embed);
  assert_true(e_embed < TOL);
  free(d_embed);
  rg_grads_free(g);
  rg_session_free(s);
  free_case(&c);
}

static void test_peft_llama(void **state) { check_against_peft("llama_f32"); }
static void test_peft_qwen2(void **state) { check_against_peft("qwen2_bf16"); }
static void test_peft_smollm2(void **state) { check_against_peft("smollm2"); }

/* ---------------------------------------------------------------- 2. export */

/* Every model tensor of W (rg_weights_export_download), one array each. */
static float **export_all(const rg_weights *w) {
  const int n = rg_weights_export_count(w);
  float **v = calloc((size_t)n, sizeof *v);
  for (int i = 0; i < n; i++) {
    v[i] = malloc((size_t)rg_tensor_nelems(rg_weights_export_tensor(w, i)) * sizeof **v);
    if (rg_weights_export_download(w, i, v[i]) != 0) fail_msg("%s", rg_error_get());
  }
  return v;
}

static void free_all(float **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* The adapter parameter named BASE's module + ".lora_<which>.weight", or -1. */
static int adapter_index(const rg_weights *w, const char *base, char which) {
  char want[160];
  snprintf(want, sizeof want, "%.*s.lora_%c.weight", (int)(strlen(base) - strlen(".weight")), base, which);
  for (int i = 0; i < rg_weights_count(w); i++)
    if (strcmp(rg_weights_tensor(w, i)->name, want) == 0) return i;
  return -1;
}

static void test_merged_export(void **state) {
  lcase c = load_case("llama_f32");
  /* the base: the same model's weights without adapters */
  const rg_backend_opts bo = {.threads = 2};
  rg_weights *plain = rg_weights_open(c.m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(plain);
  const int n = rg_weights_export_count(c.w);
  assert_int_equal(n, rg_weights_count(plain));
  float **merged = export_all(c.w);
  const double s = (double)c.lo.alpha / c.lo.rank;
  int adapted = 0;
  double worst = 0;
  for (int i = 0; i < n; i++) {
    const rg_tensor *t = rg_weights_export_tensor(c.w, i);
    assert_string_equal(t->name, rg_weights_tensor(plain, i)->name);
    const size_t len = (size_t)rg_tensor_nelems(t);
    float *base = malloc(len * sizeof *base);
    assert_int_equal(rg_weights_download(plain, i, base), 0);
    const int ia = adapter_index(c.w, t->name, 'A'), ib = adapter_index(c.w, t->name, 'B');
    if (ia < 0) { /* not adapted: the base itself */
      assert_memory_equal(merged[i], base, len * sizeof *base);
    } else {
      adapted++;
      const float *A = c.data + c.offset[ia], *B = c.data + c.offset[ib];
      const int64_t in = t->ne[0], out = rg_tensor_nrows(t);
      double err = 0, scale = 0; /* the largest error over the largest value */
      for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++) {
          double want = base[o * in + k];
          for (int j = 0; j < c.lo.rank; j++) want += s * B[o * c.lo.rank + j] * A[j * in + k];
          err = fmax(err, fabs(merged[i][o * in + k] - want));
          scale = fmax(scale, fabs(want));
        }
      worst = fmax(worst, err / scale);
    }
    free(base);
  }
  /* float32 sums of rank products: float32 rounding, ~1e-7 of the largest
   * value; a wrong scale or a transposed product is off by 1e-1 */
  print_message("merged export: %d adapted tensors, worst err %.1e of the largest value\n", adapted, worst);
  assert_int_equal(adapted, 7 * c.m->cfg.n_layers);
  assert_true(worst < 1e-6);

  /* a checkpoint holds the merged values (f32: bit for bit) */
  char *dir = t_tmp_path("lora-checkpoint");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  const rg_hf_write_opts wo = {.dtype = RG_HF_F32};
  if (rg_hf_write_model(c.w, dir, &wo) != 0) fail_msg("%s", rg_error_get());
  rg_model *saved = rg_model_load(dir);
  if (!saved) fail_msg("%s", rg_error_get());
  rg_weights *sw = rg_weights_open(saved, &bo, RG_WEIGHTS_TILED);
  assert_non_null(sw);
  assert_int_equal(rg_weights_count(sw), n);
  float **reloaded = export_all(sw);
  for (int i = 0; i < n; i++)
    assert_memory_equal(reloaded[i], merged[i], (size_t)rg_tensor_nelems(rg_weights_tensor(sw, i)) * sizeof(float));
  free_all(reloaded, n);
  rg_weights_free(sw);
  rg_model_free(saved);
  free(dir);
  free_all(merged, n);
  rg_weights_free(plain);
  free_case(&c);
}

/* The adapted SmolLM2 GGUF saved as a checkpoint: the merged q_proj, whose
 * rows (base and lora_B alike) are in the GGUF's RoPE order, is written
 * un-permuted with the base (hf_write.h), and the directory, reloaded as a
 * Hugging Face model, gives peft's loss within 1e-5: the merge in float32
 * changes the model by rounding only. (Measured: 2.0e-7; lora_B merged as
 * if its rows were in the Hugging Face order gives 5.6e-4.) */
static void test_gguf_checkpoint(void **state) {
  lcase c = load_case("smollm2");
  char *dir = t_tmp_path("lora-smollm2-checkpoint");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  const rg_hf_write_opts wo = {.dtype = RG_HF_F32};
  if (rg_hf_write_model(c.w, dir, &wo) != 0) fail_msg("%s", rg_error_get());
  rg_model *saved = rg_model_load(dir);
  if (!saved) fail_msg("%s", rg_error_get());
  const batch b = fixture_batch(c.fx);
  rg_session_opts io = {.max_batch_tokens = b.n, .max_logit_rows = b.R};
  rg_session *s = t_session(saved, 2, RG_WEIGHTS_TILED, 2, 16, &io);
  float losses[64];
  if (rg_session_eval_ce(s, b.ids, b.seq, b.n, b.rows, b.targets, b.R, losses) != 0) fail_msg("%s", rg_error_get());
  const double want = get(c.fx, "loss")->valuedouble, e = fabs(mean_loss(losses, b.R) - want) / want;
  print_message("checkpoint of the adapted GGUF: loss %.6f (peft %.6f), rel err %.1e\n", mean_loss(losses, b.R), want, e);
  assert_true(e < 1e-5);
  t_session_free(s);
  rg_model_free(saved);
  assert_int_equal(system(cmd), 0);
  free(dir);
  free_case(&c);
}

/* ---------------------------------------------------------------- 3., 4. frozen base */

static void test_base_stays_in_file_form(void **state) {
  rg_model *m = load_model("qwen2_bf16");
  const rg_backend_opts bo = {.threads = 2};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(w);
  const size_t before = rg_weights_bytes(w);
  const rg_lora_opts lo = {.rank = 4, .alpha = 8, .targets = RG_LORA_Q | RG_LORA_V | RG_LORA_DOWN};
  assert_int_equal(rg_weights_add_lora(w, &lo, 3), 0);
  assert_true(rg_weights_trainable(w));
  size_t adapters = 0, matrices = 0;
  for (int i = 0; i < rg_weights_count(w); i++) adapters += (size_t)rg_tensor_nelems(rg_weights_tensor(w, i)) * 4;
  for (int i = 0; i < rg_weights_export_count(w); i++)
    if (rg_weights_export_tensor(w, i)->n_dims == 2) matrices += (size_t)rg_tensor_nelems(rg_weights_export_tensor(w, i)) * 4;
  print_message("bytes: %zu before, %zu after (+%zu of adapters; the matrices as f32 would be %zu)\n", before,
                rg_weights_bytes(w), adapters, matrices);
  assert_int_equal(rg_weights_bytes(w), before + adapters);
  assert_int_equal(rg_weights_make_trainable(w), 0); /* a no-op: converts no base weight */
  assert_int_equal(rg_weights_bytes(w), before + adapters);
  rg_weights_free(w);
  rg_model_free(m);
}

/* One optimizer step on the llama_f32 fixture's adapters with the base
 * weights as float32 copies (RG_WEIGHTS_F32: writable memory an update
 * could wrongly touch): every adapter changes, and with B zeroed afterwards
 * the export (W + s * 0 * A) is the base bit for bit. */
static void test_optimizer_step(void **state) {
  lcase c = load_case("llama_f32");
  rg_weights_free(c.w); /* again, with float32 base copies */
  const rg_backend_opts bo = {.threads = 2};
  c.w = rg_weights_open(c.m, &bo, RG_WEIGHTS_F32);
  assert_non_null(c.w);
  float **base = export_all(c.w);
  const int n_model = rg_weights_export_count(c.w);
  assert_int_equal(rg_weights_add_lora(c.w, &c.lo, 1), 0);
  for (int i = 0; i < c.n_tensors; i++) assert_int_equal(rg_weights_upload(c.w, i, c.data + c.offset[i]), 0);

  const batch b = fixture_batch(c.fx);
  rg_session_opts so = {.max_batch_tokens = b.n, .max_logit_rows = b.R, .train = true};
  rg_session *s = rg_session_new(c.w, 2, 16, &so);
  rg_grads *g = rg_grads_new(s);
  assert_non_null(g);
  rg_adamw_hparams h = rg_adamw_defaults();
  h.weight_decay = 0.1;
  rg_optimizer *o = rg_optimizer_new(c.w, g, &h);
  if (!o) fail_msg("%s", rg_error_get());
  float losses[64];
  rg_grads_zero(g);
  assert_int_equal(rg_session_eval(s, b.ids, b.seq, b.n, b.rows, b.R, NULL), 0);
  assert_int_equal(rg_session_loss_ce(s, b.targets, b.scale, losses), 0);
  assert_int_equal(rg_session_backward(s, g, NULL), 0);
  assert_int_equal(rg_optimizer_step(o, 1e-3, 1.0, NULL), 0);

  for (int i = 0; i < c.n_tensors; i++) {
    const size_t len = (size_t)rg_tensor_nelems(rg_weights_tensor(c.w, i));
    float *now = malloc(len * sizeof *now);
    assert_int_equal(rg_weights_download(c.w, i, now), 0);
    size_t changed = 0;
    for (size_t k = 0; k < len; k++) changed += now[k] != c.data[c.offset[i] + k];
    if (changed < len / 2) fail_msg("%s: %zu of %zu values changed", rg_weights_tensor(c.w, i)->name, changed, len);
    if (strstr(rg_weights_tensor(c.w, i)->name, "lora_B")) { /* zero B: the export is the base again */
      memset(now, 0, len * sizeof *now);
      assert_int_equal(rg_weights_upload(c.w, i, now), 0);
    }
    free(now);
  }
  float **after = export_all(c.w);
  for (int i = 0; i < n_model; i++)
    assert_memory_equal(after[i], base[i], (size_t)rg_tensor_nelems(rg_weights_export_tensor(c.w, i)) * sizeof(float));
  free_all(after, n_model);
  free_all(base, n_model);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  free_case(&c);
}

/* ---------------------------------------------------------------- API */

/* peft's init: A uniform within 1/sqrt(in), B zero, so the adapted model
 * starts as the base (logits bit for bit). */
static void test_init(void **state) {
  rg_model *m = load_model("llama_f32");
  const rg_backend_opts bo = {.threads = 2};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  assert_non_null(w);
  const int32_t ids[4] = {5, 17, 250, 3};
  const int seq[4] = {0}, row = 3;
  const int V = m->cfg.vocab_size;
  float *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
  rg_session *s = rg_session_new(w, 1, 8, NULL);
  assert_int_equal(rg_session_eval(s, ids, seq, 4, &row, 1, before), 0);
  const rg_lora_opts lo = {.rank = 8, .alpha = 16, .targets = RG_LORA_Q | RG_LORA_GATE | RG_LORA_DOWN};
  assert_int_equal(rg_weights_add_lora(w, &lo, 42), 0);
  assert_int_equal(rg_weights_lora_rank(w), 8);
  /* a session made before the adapters cannot compute them */
  rg_session_reset(s);
  assert_int_equal(rg_session_eval(s, ids, seq, 4, &row, 1, after), -1);
  assert_non_null(strstr(rg_error_get(), "after this session was made"));
  rg_session_free(s);
  s = rg_session_new(w, 1, 8, NULL);
  assert_int_equal(rg_session_eval(s, ids, seq, 4, &row, 1, after), 0);
  assert_memory_equal(before, after, (size_t)V * sizeof *before);
  rg_session_free(s);

  assert_int_equal(rg_weights_count(w), 2 * 3 * m->cfg.n_layers);
  for (int i = 0; i < rg_weights_count(w); i++) {
    const rg_tensor *t = rg_weights_tensor(w, i);
    const size_t len = (size_t)rg_tensor_nelems(t);
    float *v = malloc(len * sizeof *v);
    assert_int_equal(rg_weights_download(w, i, v), 0);
    const bool is_a = strstr(t->name, "lora_A") != NULL;
    assert_int_equal(is_a, i % 2 == 0); /* A then B */
    assert_int_equal(is_a ? rg_tensor_nrows(t) : t->ne[0], 8);
    double lo_v = 1, hi_v = -1, sum = 0;
    for (size_t k = 0; k < len; k++) lo_v = fmin(lo_v, v[k]), hi_v = fmax(hi_v, v[k]), sum += v[k];
    if (is_a) { /* uniform(-b, b), b = 1/sqrt(in): spread over the range, mean ~0 */
      const double bound = 1 / sqrt((double)t->ne[0]);
      assert_true(lo_v >= -bound && hi_v <= bound);
      assert_true(lo_v < -0.9 * bound && hi_v > 0.9 * bound);
      assert_true(fabs(sum / len) < 0.1 * bound);
    } else {
      assert_true(lo_v == 0 && hi_v == 0);
    }
    free(v);
  }
  assert_string_equal(rg_weights_tensor(w, 0)->name, "model.layers.0.self_attn.q_proj.lora_A.weight");
  assert_string_equal(rg_weights_tensor(w, 5)->name, "model.layers.0.mlp.down_proj.lora_B.weight");
  free(before), free(after);
  rg_weights_free(w);
  rg_model_free(m);
}

static void test_errors(void **state) {
  unsigned t = 0;
  assert_int_equal(rg_lora_targets_parse("q, v_proj,down", &t), 0);
  assert_int_equal(t, RG_LORA_Q | RG_LORA_V | RG_LORA_DOWN);
  assert_int_equal(rg_lora_targets_parse("q,k,v,o,gate,up,down", &t), 0);
  assert_int_equal(t, 0x7fu);
  assert_int_equal(rg_lora_targets_parse("q,lm_head", &t), -1);
  assert_non_null(strstr(rg_error_get(), "'lm_head'"));
  assert_int_equal(rg_lora_targets_parse("q,,v", &t), -1);
  assert_non_null(strstr(rg_error_get(), "empty"));

  rg_model *m = load_model("llama_f32");
  const rg_backend_opts bo = {.threads = 1};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  rg_lora_opts lo = {.rank = 0, .alpha = 1, .targets = RG_LORA_Q};
  assert_int_equal(rg_weights_add_lora(w, &lo, 1), -1);
  assert_non_null(strstr(rg_error_get(), "rank 0"));
  lo = (rg_lora_opts){.rank = 2, .alpha = 1, .targets = 0};
  assert_int_equal(rg_weights_add_lora(w, &lo, 1), -1);
  assert_non_null(strstr(rg_error_get(), "targets"));
  assert_false(rg_weights_trainable(w));
  lo.targets = RG_LORA_K;
  assert_int_equal(rg_weights_add_lora(w, &lo, 1), 0);
  assert_int_equal(rg_weights_add_lora(w, &lo, 1), -1);
  assert_non_null(strstr(rg_error_get(), "already"));
  rg_weights_free(w);
  /* full fine-tuning and adapters exclude each other */
  w = rg_weights_open(m, &bo, RG_WEIGHTS_TILED);
  assert_int_equal(rg_weights_make_trainable(w), 0);
  assert_int_equal(rg_weights_add_lora(w, &lo, 1), -1);
  assert_non_null(strstr(rg_error_get(), "trainable"));
  rg_weights_free(w);
  rg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_init),
      cmocka_unit_test(test_peft_llama),
      cmocka_unit_test(test_peft_qwen2),
      cmocka_unit_test(test_peft_smollm2),
      cmocka_unit_test(test_merged_export),
      cmocka_unit_test(test_gguf_checkpoint),
      cmocka_unit_test(test_base_stays_in_file_form),
      cmocka_unit_test(test_optimizer_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
