/* test_model_checkpoint: rg_hf_write_checkpoint (engine/hf_write.h), the
 * trainer's checkpoint writer, reloaded by refgeo's own loader.
 *
 * Independent references: the source model itself (a GGUF read by
 * llama.cpp's layout, an HF directory whose bytes transformers wrote) and
 * the bf16 rounding rule (round to nearest even). transformers reading the
 * same directories is tools/reference/check_checkpoint.py (dev-only).
 *  - SmolLM2 (GGUF, q/k rows permuted): a float32 checkpoint reloads as the
 *    same model although the directory uses HF's rotate-half layout; a bf16
 *    checkpoint holds exactly the bf16 rounding of those values; tokenizer
 *    ids agree on strings covering the pre-tokenizer's splits.
 *  - the tokenizer.json exported from the SmolLM2 and Qwen2.5 GGUFs gives
 *    transformers' ids (tests/fixtures/tokenizer, 300+ cases each).
 *  - the tiny HF qwen2 (bf16 on disk): its checkpoint reloads bit-identical.
 *  - atomicity: a stale checkpoint-<step>.tmp is replaced, an existing
 *    checkpoint is never written over, a run dir that cannot be written to
 *    fails with one line, and an export killed by SIGKILL leaves no
 *    checkpoint directory.
 */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor/dtype.h"
#include "engine/hf_write.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"
#include "util/error.h"
#include "util/fileio.h"

static const char *PROMPTS[] = {"The capital of France is", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
                                "def f(x):\n    return x ** 2  # 12345"};
enum { N_PROMPTS = 3, THREADS = 2 };

/* A fresh run directory REFGEO_TMP/NAME-PID (removed beforehand by rm -rf). */
static char *run_dir(const char *name) {
  char leaf[96];
  snprintf(leaf, sizeof leaf, "%s-%d", name, (int)getpid());
  char *dir = t_tmp_path(leaf);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(rg_mkdir_p(dir), 0);
  return dir;
}

static rg_model *load(const char *path) {
  rg_model *m = rg_model_load(path);
  if (!m) fail_msg("%s: %s", path, rg_error_get());
  return m;
}

/* Last-position logits of PROMPTS[p] on M, tokenized by M's own tokenizer. */
static float *logits(const rg_model *m, rg_weight_mode mode, int p) {
  int32_t *ids;
  int n;
  assert_int_equal(rg_tokenize(m->tokenizer, PROMPTS[p], strlen(PROMPTS[p]), true, true, &ids, &n), 0);
  rg_session *s = t_session(m, THREADS, mode, 1, n, NULL);
  float *lg = malloc((size_t)m->cfg.vocab_size * sizeof *lg);
  assert_non_null(lg);
  const int32_t *prompts[1] = {ids};
  assert_int_equal(rg_session_prefill(s, prompts, &n, 1, lg), 0);
  t_session_free(s);
  free(ids);
  return lg;
}

static double max_abs_diff(const float *a, const float *b, int n) {
  double d = 0;
  for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
  return d;
}

/* Writes M's checkpoint STEP into RUN in DTYPE and returns its path. */
static char *write_checkpoint(const rg_model *m, const char *run, long step, rg_hf_dtype dtype) {
  rg_backend_opts bo = {.threads = THREADS};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  rg_hf_write_opts o = {.dtype = dtype};
  if (rg_hf_write_checkpoint(w, run, step, &o) != 0) fail_msg("%s", rg_error_get());
  rg_weights_free(w);
  char name[48];
  snprintf(name, sizeof name, "checkpoint-%ld", step);
  char *dir = rg_path_join(run, name);
  static const char *FILES[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                "generation_config.json"};
  for (int k = 0; k < 5; k++) {
    char *f = rg_path_join(dir, FILES[k]);
    if (!rg_path_exists(f)) fail_msg("%s missing", f);
    free(f);
  }
  char *tmp = malloc(strlen(dir) + 8);
  sprintf(tmp, "%s.tmp", dir);
  assert_false(rg_path_exists(tmp)); /* renamed into place */
  free(tmp);
  return dir;
}

/* Every parameter of M as float32 (rg_weights_download), one array each. */
static float **params(const rg_model *m, int *n) {
  rg_backend_opts bo = {.threads = THREADS};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  assert_non_null(w);
  *n = rg_weights_count(w);
  float **p = calloc((size_t)*n, sizeof *p);
  for (int i = 0; i < *n; i++) {
    p[i] = malloc((size_t)rg_tensor_nelems(rg_weights_tensor(w, i)) * sizeof **p);
    assert_int_equal(rg_weights_download(w, i, p[i]), 0);
  }
  rg_weights_free(w);
  return p;
}

static void free_params(float **p, int n) {
  for (int i = 0; i < n; i++) free(p[i]);
  free(p);
}

/* ---------------------------------------------------------------- SmolLM2 */

static void check_same_tokens(const rg_tokenizer *a, const rg_tokenizer *b) {
  static const char *TEXTS[] = {"Hello world", "  two  spaces\n\nand lines", "numbers 1234567 and 3.14",
                                "It's they'll we've", "émigré 日本語 😀", "<|im_start|>user<|im_end|>",
                                "code: x = [i ** 2 for i in range(10)]"};
  for (size_t k = 0; k < sizeof TEXTS / sizeof TEXTS[0]; k++) {
    int32_t *ia, *ib;
    int na, nb;
    assert_int_equal(rg_tokenize(a, TEXTS[k], strlen(TEXTS[k]), true, true, &ia, &na), 0);
    assert_int_equal(rg_tokenize(b, TEXTS[k], strlen(TEXTS[k]), true, true, &ib, &nb), 0);
    if (na != nb || memcmp(ia, ib, (size_t)na * sizeof *ia) != 0) fail_msg("'%s': token ids differ", TEXTS[k]);
    free(ia);
    free(ib);
  }
}

static void test_smollm2_checkpoints(void **state) {
  (void)state;
  rg_model *orig = load(t_env("REFGEO_MODEL"));
  assert_true(orig->cfg.rope_adjacent_pairs); /* the case that needs un-permuting */
  char *run = run_dir("ckpt-smol");
  char *d32 = write_checkpoint(orig, run, 0, RG_HF_F32);
  char *d16 = write_checkpoint(orig, run, 10, RG_HF_BF16);
  rg_model *m32 = load(d32), *m16 = load(d16);
  assert_false(m32->cfg.rope_adjacent_pairs);
  assert_int_equal(m32->cfg.n_layers, orig->cfg.n_layers);
  assert_int_equal(m32->cfg.n_kv_heads, orig->cfg.n_kv_heads);
  assert_true(m32->cfg.tied_embeddings);
  assert_float_equal(m32->cfg.rms_eps, orig->cfg.rms_eps, 0);
  assert_float_equal(m32->cfg.rope_theta, orig->cfg.rope_theta, 0);
  check_same_tokens(orig->tokenizer, m32->tokenizer);
  assert_string_equal(m32->chat_template, orig->chat_template);
  assert_int_equal(rg_tokenizer_eos(m32->tokenizer), rg_tokenizer_eos(orig->tokenizer));

  /* The f32 checkpoint is the Q4_1 file's dequantized values in HF order
   * and rotate-half RoPE: the same function, only the summation order of
   * f32 matmuls (tiled Q4_1 vs f32) differs. Logits are O(10-30); 1e-3 is
   * ~30x the measured float32 accumulation noise (3.6e-5), while q/k left
   * permuted moves them by 27. */
  double worst = 0;
  for (int p = 0; p < N_PROMPTS; p++) {
    float *a = logits(orig, RG_WEIGHTS_AUTO, p), *b = logits(m32, RG_WEIGHTS_AUTO, p);
    worst = fmax(worst, max_abs_diff(a, b, orig->cfg.vocab_size));
    free(a);
    free(b);
  }
  print_message("f32 checkpoint: max |logit diff| vs the GGUF %.3g\n", worst);
  assert_true(worst < 1e-3);

  /* bf16: each value is exactly the f32 value rounded to nearest even. */
  int n32, n16;
  float **p32 = params(m32, &n32), **p16 = params(m16, &n16);
  assert_int_equal(n32, n16);
  {
    rg_backend_opts bo = {.threads = THREADS};
    rg_weights *w = rg_weights_open(m32, &bo, RG_WEIGHTS_AUTO);
    for (int i = 0; i < n32; i++) {
      const int64_t n = rg_tensor_nelems(rg_weights_tensor(w, i));
      for (int64_t j = 0; j < n; j++)
        if (p16[i][j] != rg_bf16_to_fp32(rg_fp32_to_bf16(p32[i][j])))
          fail_msg("%s[%lld]: %g is not bf16(%g)", rg_weights_tensor(w, i)->name, (long long)j, p16[i][j], p32[i][j]);
    }
    rg_weights_free(w);
  }
  free_params(p32, n32);
  free_params(p16, n16);

  /* And the bf16 model stays close: bf16 keeps 8 significant bits (relative
   * error <= 2^-9 per weight, unbiased), which moves SmolLM2's logits by
   * about 0.1 (measured 0.115 over the whole vocabulary); 0.5 leaves room
   * for that and still fails a wrong layout (q/k left permuted: 27). The
   * argmax must not change. */
  worst = 0;
  for (int p = 0; p < N_PROMPTS; p++) {
    float *a = logits(orig, RG_WEIGHTS_AUTO, p), *b = logits(m16, RG_WEIGHTS_AUTO, p);
    worst = fmax(worst, max_abs_diff(a, b, orig->cfg.vocab_size));
    int am = 0, bm = 0;
    for (int i = 1; i < orig->cfg.vocab_size; i++) {
      if (a[i] > a[am]) am = i;
      if (b[i] > b[bm]) bm = i;
    }
    assert_int_equal(am, bm);
    free(a);
    free(b);
  }
  print_message("bf16 checkpoint: max |logit diff| vs the GGUF %.3g\n", worst);
  assert_true(worst < 0.5);

  rg_model_free(m16);
  rg_model_free(m32);
  rg_model_free(orig);
  free(d16);
  free(d32);
  free(run);
}

/* The tokenizer.json + tokenizer_config.json exported from the GGUF at
 * $MODEL_ENV, reloaded by the tokenizer.json loader, against transformers'
 * ids for the 300+ cases of FIXTURE (tools/reference/
 * make_tokenizer_fixtures.py: the HF tokenizer of the same model; special
 * text parsed, as AutoTokenizer does). */
static void check_exported_tokenizer(const char *model_env, const char *fixture, const char *key) {
  rg_model *m = load(t_env(model_env));
  cJSON *tok, *cfg;
  if (rg_tokenizer_export(m->tokenizer, m->chat_template, &tok, &cfg) != 0) fail_msg("%s", rg_error_get());
  char *dir = run_dir(key);
  assert_int_equal(rg_hf_write_json(dir, "tokenizer.json", tok), 0);
  assert_int_equal(rg_hf_write_json(dir, "tokenizer_config.json", cfg), 0);
  cJSON_Delete(tok);
  cJSON_Delete(cfg);
  char *tj = rg_path_join(dir, "tokenizer.json"), *tc = rg_path_join(dir, "tokenizer_config.json");
  rg_tokenizer *t = rg_tokenizer_from_json(tj, tc);
  if (!t) fail_msg("%s", rg_error_get());
  assert_int_equal(rg_tokenizer_eos(t), rg_tokenizer_eos(m->tokenizer));
  assert_int_equal(rg_tokenizer_vocab_size(t), rg_tokenizer_vocab_size(m->tokenizer));

  cJSON *root = t_read_json_fixture(fixture);
  int n_cases = 0, bad = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
    const cJSON *want = cJSON_GetObjectItem(cJSON_GetObjectItem(c, key), "ids");
    size_t len = strlen(hex) / 2;
    char *text = malloc(len + 1);
    for (size_t k = 0; k < len; k++) {
      unsigned byte;
      sscanf(hex + 2 * k, "%2x", &byte);
      text[k] = (char)byte;
    }
    int32_t *ids;
    int n;
    assert_int_equal(rg_tokenize(t, text, len, true, true, &ids, &n), 0);
    bool same = n == cJSON_GetArraySize(want);
    for (int k = 0; k < n && same; k++) same = ids[k] == (int32_t)cJSON_GetArrayItem(want, k)->valuedouble;
    if (!same && bad++ < 5) print_message("%s case %s: ids differ from transformers'\n", key, hex);
    free(ids);
    free(text);
    n_cases++;
  }
  print_message("%s: exported tokenizer.json, %d cases, %d differ from transformers\n", key, n_cases, bad);
  assert_true(n_cases >= 300);
  assert_int_equal(bad, 0);
  cJSON_Delete(root);
  rg_tokenizer_free(t);
  free(tj);
  free(tc);
  free(dir);
  rg_model_free(m);
}

static void test_exported_tokenizers(void **state) {
  (void)state;
  check_exported_tokenizer("REFGEO_MODEL", "tokenizer/cases.json", "smollm");
  check_exported_tokenizer("REFGEO_MODEL_QWEN", "tokenizer/qwen_cases.json", "qwen"); /* NFC normalizer */
}

/* ---------------------------------------------------------------- tiny HF */

static void test_hf_source_round_trip(void **state) {
  (void)state;
  char *src = t_hf_tiny("qwen2_bf16");
  rg_model *orig = load(src);
  char *run = run_dir("ckpt-tiny");
  char *dir = write_checkpoint(orig, run, 3, RG_HF_BF16);
  rg_model *back = load(dir);
  assert_true(back->cfg.attn_qkv_bias);
  /* bf16 on disk, bf16 written: every parameter bit for bit. */
  int na, nb;
  float **a = params(orig, &na), **b = params(back, &nb);
  assert_int_equal(na, nb);
  rg_backend_opts bo = {.threads = THREADS};
  rg_weights *w = rg_weights_open(orig, &bo, RG_WEIGHTS_AUTO);
  for (int i = 0; i < na; i++)
    assert_memory_equal(a[i], b[i], (size_t)rg_tensor_nelems(rg_weights_tensor(w, i)) * sizeof(float));
  rg_weights_free(w);
  free_params(a, na);
  free_params(b, nb);
  /* The source's tokenizer.json is copied byte for byte. */
  char *f1 = rg_path_join(src, "tokenizer.json"), *f2 = rg_path_join(dir, "tokenizer.json");
  size_t l1, l2;
  char *t1 = rg_read_file(f1, &l1), *t2 = rg_read_file(f2, &l2);
  assert_int_equal(l1, l2);
  assert_memory_equal(t1, t2, l1);
  assert_string_equal(back->chat_template, orig->chat_template);
  free(t1);
  free(t2);
  free(f1);
  free(f2);
  rg_model_free(back);
  rg_model_free(orig);
  free(dir);
  free(run);
  free(src);
}

/* ---------------------------------------------------------------- atomicity */

static void test_atomic_and_never_overwritten(void **state) {
  (void)state;
  char *src = t_hf_tiny("llama_f32");
  rg_model *m = load(src);
  char *run = run_dir("ckpt-atomic");
  rg_backend_opts bo = {.threads = THREADS};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  assert_non_null(w);

  /* A stale .tmp from a killed run is removed and replaced. */
  char *stale = rg_path_join(run, "checkpoint-7.tmp");
  assert_int_equal(rg_mkdir_p(stale), 0);
  char *junk = rg_path_join(stale, "model.safetensors");
  assert_int_equal(rg_write_file_atomic(junk, "junk", 4), 0);
  assert_int_equal(rg_hf_write_checkpoint(w, run, 7, NULL), 0);
  assert_false(rg_path_exists(stale));

  /* An existing checkpoint is not written over. */
  char *dir = rg_path_join(run, "checkpoint-7");
  char *cfg = rg_path_join(dir, "config.json");
  size_t len_before, len_after;
  char *before = rg_read_file(cfg, &len_before);
  assert_int_equal(rg_hf_write_checkpoint(w, run, 7, &(rg_hf_write_opts){.dtype = RG_HF_F32}), -1);
  assert_non_null(strstr(rg_error_get(), "already exists"));
  char *after = rg_read_file(cfg, &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);

  /* A run dir that cannot be written to (a file: root may write anywhere
   * else): one line, nothing made. */
  char *ro = rg_path_join(run, "not-a-dir");
  assert_int_equal(rg_write_file_atomic(ro, "x", 1), 0);
  assert_int_equal(rg_hf_write_checkpoint(w, ro, 1, NULL), -1);
  assert_null(strchr(rg_error_get(), '\n'));
  assert_non_null(strstr(rg_error_get(), "not-a-dir"));

  rg_weights_free(w);
  rg_model_free(m);
  free(ro);
  free(before);
  free(after);
  free(cfg);
  free(dir);
  free(junk);
  free(stale);
  free(run);
  free(src);
}

/* `refgeo export` of SmolLM2 (about a second) killed with SIGKILL after a
 * moment: the output directory is absent or complete, never partial; a
 * second export then succeeds. */
static void test_killed_export_leaves_nothing(void **state) {
  (void)state;
  char *run = run_dir("ckpt-kill");
  char *out = rg_path_join(run, "checkpoint-0");
  char *tmp = rg_path_join(run, "checkpoint-0.tmp");
  int struck = 0;
  for (int delay_ms = 100; delay_ms <= 700; delay_ms += 300) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' export '%s' --out '%s' --threads 2 2>/dev/null & pid=$!; sleep %d.%03d; kill -9 $pid; "
             "wait $pid 2>/dev/null",
             t_env("REFGEO_BIN"), t_env("REFGEO_MODEL"), out, delay_ms / 1000, delay_ms % 1000);
    int rc = system(cmd);
    (void)rc; /* killed (or, on a fast machine, finished) */
    struck += rg_path_exists(tmp);
    if (rg_path_exists(out)) { /* finished before the kill: must be whole */
      rg_model *m = load(out);
      rg_model_free(m);
      snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
      assert_int_equal(system(cmd), 0);
    }
  }
  print_message("kills that struck mid-write (checkpoint-0.tmp left): %d of 3\n", struck);
  free(tmp);
  char args[4096];
  snprintf(args, sizeof args, "export '%s' --out '%s' --threads 2", t_env("REFGEO_MODEL"), out);
  char *err = NULL;
  assert_int_equal(t_run_cli(args, NULL, &err), 0);
  free(err);
  rg_model *m = load(out);
  rg_model_free(m);
  free(out);
  free(run);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_smollm2_checkpoints),
      cmocka_unit_test(test_exported_tokenizers),
      cmocka_unit_test(test_hf_source_round_trip),
      cmocka_unit_test(test_atomic_and_never_overwritten),
      cmocka_unit_test(test_killed_export_leaves_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
