/* test_model_hf: loading Hugging Face model directories.
 * References: the tiny transformers models of tests/fixtures/hf_tiny (weights
 * written at test time by t_hf_tiny, bit-identical to what transformers'
 * save_pretrained wrote in tools/reference/make_hf_tiny.py) and, per
 * model, <name>.expected.json with transformers' reading of the config and
 * torch's values of a few tensors (tools/reference/make_hf_tiny.py). Error
 * cases are variants of those directories made in REFGEO_TMP. */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "model/model.h"
#include "model/model_source.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/fileio.h"

static const char *MODELS[] = {"llama_f32", "mistral_f16", "qwen2_bf16", "llama3_bf16"};
enum { N_MODELS = sizeof MODELS / sizeof MODELS[0] };

static cJSON *read_json(const char *path) {
  char *text = rg_read_file(path, NULL);
  if (!text) fail_msg("%s", rg_error_get());
  cJSON *j = cJSON_Parse(text);
  if (!j) fail_msg("%s: not JSON", path);
  free(text);
  return j;
}

static cJSON *read_expected(const char *model) {
  char name[128];
  snprintf(name, sizeof name, "hf_tiny/%s.expected.json", model);
  char *path = t_fixture_path(name);
  cJSON *j = read_json(path);
  free(path);
  return j;
}

static rg_model *load_fixture(const char *model) {
  char *dir = t_hf_tiny(model);
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  free(dir);
  return m;
}

static double num(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(obj, key);
  if (!cJSON_IsNumber(v)) fail_msg("expected.json: no number '%s'", key);
  return v->valuedouble;
}

static int flag(const cJSON *obj, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItem(obj, key)); }

static float to_f32(int type, const void *data, int64_t i) {
  float f;
  assert_int_equal(rg_dequantize_row(type, (const char *)data + i * rg_dtype_get(type)->block_bytes, &f, 1), 0);
  return f;
}

/* ---------------------------------------------------------------- good models */

/* The config as transformers reads it. Integers exactly; floats after the
 * same double -> float rounding refgeo applies, so also exactly. */
static void check_config(const rg_model *m, const cJSON *want) {
  const rg_config *c = &m->cfg;
  assert_int_equal(c->n_layers, (int)num(want, "n_layers"));
  assert_int_equal(c->d_model, (int)num(want, "d_model"));
  assert_int_equal(c->n_heads, (int)num(want, "n_heads"));
  assert_int_equal(c->n_kv_heads, (int)num(want, "n_kv_heads"));
  assert_int_equal(c->head_dim, (int)num(want, "head_dim"));
  assert_int_equal(c->d_ff, (int)num(want, "d_ff"));
  assert_int_equal(c->vocab_size, (int)num(want, "vocab_size"));
  assert_int_equal(c->max_ctx, (int)num(want, "max_ctx"));
  assert_true(c->rms_eps == (float)num(want, "rms_eps"));
  assert_true(c->rope_theta == (float)num(want, "rope_theta"));
  const char *scaling = cJSON_GetObjectItem(want, "rope_scaling")->valuestring;
  rg_rope_scaling kind = strcmp(scaling, "llama3") == 0   ? RG_ROPE_SCALING_LLAMA3
                         : strcmp(scaling, "linear") == 0 ? RG_ROPE_SCALING_LINEAR
                                                          : RG_ROPE_SCALING_NONE;
  assert_int_equal(c->rope_scaling, kind);
  assert_true(c->rope_factor == (float)num(want, "rope_factor"));
  assert_true(c->rope_low_freq_factor == (float)num(want, "rope_low_freq_factor"));
  assert_true(c->rope_high_freq_factor == (float)num(want, "rope_high_freq_factor"));
  assert_int_equal(c->rope_orig_max_ctx, (int)num(want, "rope_orig_max_ctx"));
  assert_int_equal(c->sliding_window, (int)num(want, "sliding_window"));
  assert_int_equal(c->tied_embeddings, flag(want, "tied_embeddings"));
  assert_int_equal(c->attn_qkv_bias, flag(want, "attn_qkv_bias"));
  assert_false(c->rope_adjacent_pairs);
}

/* Tensor dtype, HF shape and values equal torch's. Exact: f16/bf16 widen to
 * float32 losslessly on both sides. */
static void check_tensors(const rg_model *m, const cJSON *want) {
  for (const cJSON *w = cJSON_GetObjectItem(want, "tensors")->child; w; w = w->next) {
    const char *name = cJSON_GetObjectItem(w, "name")->valuestring;
    const rg_tensor *t = rg_model_find_tensor(m, name);
    if (!t) fail_msg("%s: tensor %s not found", m->path, name);
    assert_string_equal(rg_safetensors_dtype_name(t->type), cJSON_GetObjectItem(w, "dtype")->valuestring);
    const cJSON *shape = cJSON_GetObjectItem(w, "shape");
    int rank = cJSON_GetArraySize(shape);
    assert_int_equal(t->n_dims, rank);
    for (int d = 0; d < rank; d++) assert_int_equal(t->ne[d], cJSON_GetArrayItem(shape, rank - 1 - d)->valueint);
    const int64_t n = rg_tensor_nelems(t);
    int64_t i = 0;
    for (const cJSON *v = cJSON_GetObjectItem(w, "first")->child; v; v = v->next, i++)
      if (to_f32(t->type, t->data, i) != (float)v->valuedouble)
        fail_msg("%s %s[%lld] = %g, torch has %g", m->id, name, (long long)i, to_f32(t->type, t->data, i), v->valuedouble);
    i = n - cJSON_GetArraySize(cJSON_GetObjectItem(w, "last"));
    for (const cJSON *v = cJSON_GetObjectItem(w, "last")->child; v; v = v->next, i++)
      if (to_f32(t->type, t->data, i) != (float)v->valuedouble)
        fail_msg("%s %s[%lld] = %g, torch has %g", m->id, name, (long long)i, to_f32(t->type, t->data, i), v->valuedouble);
  }
}

/* The named roles point at the right tensors. */
static void check_binding(const rg_model *m) {
  const rg_config *c = &m->cfg;
  assert_ptr_equal(m->tok_embd, rg_model_find_tensor(m, "model.embed_tokens.weight"));
  assert_ptr_equal(m->out_norm, rg_model_find_tensor(m, "model.norm.weight"));
  assert_ptr_equal(m->lm_head, c->tied_embeddings ? m->tok_embd : rg_model_find_tensor(m, "lm_head.weight"));
  assert_null(m->rope_freqs);
  char name[96];
  for (int il = 0; il < c->n_layers; il++) {
    const rg_layer_weights *L = &m->layers[il];
    snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", il);
    assert_ptr_equal(L->wk, rg_model_find_tensor(m, name));
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", il);
    assert_ptr_equal(L->w_down, rg_model_find_tensor(m, name));
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", il);
    assert_ptr_equal(L->ffn_norm, rg_model_find_tensor(m, name));
    snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.bias", il);
    assert_ptr_equal(L->bv, rg_model_find_tensor(m, name)); /* NULL == NULL without biases */
    assert_true((L->bq != NULL) == c->attn_qkv_bias);
  }
}

static void test_tiny_models_load(void **state) {
  (void)state;
  rg_model *ref = load_fixture("llama_f32");
  for (int k = 0; k < N_MODELS; k++) {
    rg_model *m = load_fixture(MODELS[k]);
    cJSON *want = read_expected(MODELS[k]);
    assert_string_equal(m->format, "hf");
    assert_string_equal(m->id, MODELS[k]);
    assert_non_null(m->tokenizer);
    check_config(m, cJSON_GetObjectItem(want, "config"));
    check_tensors(m, want);
    check_binding(m);
    assert_true(rg_model_n_params(m) == (long long)num(want, "n_params"));
    /* All four carry the same ChatML template; qwen2_bf16 stores it as a
     * list of named templates, of which "default" must be chosen. */
    assert_non_null(m->chat_template);
    assert_string_equal(m->chat_template, ref->chat_template);
    assert_non_null(strstr(m->chat_template, "<|im_start|>"));
    if (strcmp(MODELS[k], "mistral_f16") == 0) assert_int_equal(m->source->n_shards, 4);
    cJSON_Delete(want);
    rg_model_free(m);
  }
  rg_model_free(ref);
}

/* A trailing slash does not change the id. */
static void test_id_with_trailing_slash(void **state) {
  (void)state;
  char *base = t_hf_tiny("llama3_bf16"), dir[1024];
  snprintf(dir, sizeof dir, "%s/", base);
  free(base);
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  assert_string_equal(m->id, "llama3_bf16");
  rg_model_free(m);
}

/* ---------------------------------------------------------------- bad dirs */

/* Copies fixture model SRC into REFGEO_TMP/NAME (all files, or only those in
 * ONLY when given), then lets EDIT change config.json. Returns the dir. */
static char *make_variant(const char *name, const char *src, const char *const *only, void (*edit)(cJSON *)) {
  static const char *ALL[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors",
                              "model.safetensors.index.json", "model-00001-of-00004.safetensors",
                              "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors",
                              "model-00004-of-00004.safetensors", NULL};
  char *from_dir = t_hf_tiny(src), *dir = t_tmp_path(name);
  assert_int_equal(rg_mkdir_p(dir), 0);
  for (const char *const *f = only ? only : ALL; *f; f++) {
    char *from = rg_path_join(from_dir, *f), *to = rg_path_join(dir, *f);
    if (rg_path_exists(from)) {
      size_t len;
      char *data = rg_read_file(from, &len);
      assert_non_null(data);
      if (edit && strcmp(*f, "config.json") == 0) {
        cJSON *j = cJSON_Parse(data);
        edit(j);
        free(data);
        data = cJSON_Print(j);
        len = strlen(data);
        cJSON_Delete(j);
      }
      assert_int_equal(rg_write_file_atomic(to, data, len), 0);
      free(data);
    }
    free(from);
    free(to);
  }
  free(from_dir);
  return dir;
}

/* Loading DIR fails with an error that contains each of WANT1, WANT2. */
static void expect_load_error(char *dir, const char *want1, const char *want2) {
  rg_error_clear();
  rg_model *m = rg_model_load(dir);
  if (m) fail_msg("%s loaded, expected an error containing '%s'", dir, want1);
  const char *e = rg_error_get();
  if (!strstr(e, want1) || (want2 && !strstr(e, want2)))
    fail_msg("error '%s' should contain '%s' and '%s'", e, want1, want2 ? want2 : "");
  free(dir);
}

static void drop_hidden_size(cJSON *j) { cJSON_DeleteItemFromObject(j, "hidden_size"); }
static void bump_intermediate(cJSON *j) { cJSON_ReplaceItemInObject(j, "intermediate_size", cJSON_CreateNumber(97)); }
static void make_gemma(cJSON *j) { cJSON_ReplaceItemInObject(j, "model_type", cJSON_CreateString("gemma")); }
static void untie(cJSON *j) { cJSON_ReplaceItemInObject(j, "tie_word_embeddings", cJSON_CreateFalse()); }
static void yarn(cJSON *j) {
  cJSON *r = cJSON_GetObjectItem(j, "rope_scaling");
  cJSON_ReplaceItemInObject(r, "rope_type", cJSON_CreateString("yarn"));
}
static void drop_llama3_factor(cJSON *j) { cJSON_DeleteItemFromObject(cJSON_GetObjectItem(j, "rope_scaling"), "low_freq_factor"); }

static void test_config_errors(void **state) {
  (void)state;
  char *dir = make_variant("hf_no_hidden", "llama_f32", NULL, drop_hidden_size);
  char want[512];
  snprintf(want, sizeof want, "%s/config.json: missing key 'hidden_size'", dir);
  expect_load_error(dir, want, NULL);
  expect_load_error(make_variant("hf_gemma", "llama_f32", NULL, make_gemma), "config.json: model_type 'gemma' is not supported",
                    NULL);
  expect_load_error(make_variant("hf_yarn", "llama3_bf16", NULL, yarn), "rope_scaling type 'yarn' is not supported", NULL);
  expect_load_error(make_variant("hf_llama3_partial", "llama3_bf16", NULL, drop_llama3_factor),
                    "missing key 'low_freq_factor' (in rope_scaling)", NULL);
  const char *config_only[] = {"config.json", NULL};
  dir = make_variant("hf_no_config", "llama_f32", (const char *[]){"model.safetensors", NULL}, NULL);
  expect_load_error(dir, "config.json", "No such file");
  expect_load_error(make_variant("hf_no_weights", "llama_f32", config_only, NULL),
                    "no model.safetensors or model.safetensors.index.json", NULL);
}

static void test_shape_and_tensor_errors(void **state) {
  (void)state;
  expect_load_error(make_variant("hf_bad_dff", "llama_f32", NULL, bump_intermediate),
                    "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [96, 64] but config.json implies [97, 64]",
                    NULL);
  expect_load_error(make_variant("hf_untied", "llama_f32", NULL, untie),
                    "missing tensor 'lm_head.weight' (config.json: tie_word_embeddings is false)", NULL);
  const char *no_tok[] = {"config.json", "model.safetensors", NULL};
  expect_load_error(make_variant("hf_no_tok", "llama_f32", no_tok, NULL), "no tokenizer.json", NULL);
}

static void billion_layers(cJSON *j) { cJSON_ReplaceItemInObject(j, "num_hidden_layers", cJSON_CreateNumber(1e9)); }
static void three_layers(cJSON *j) { cJSON_ReplaceItemInObject(j, "num_hidden_layers", cJSON_CreateNumber(3)); }

/* Issue 17, defect 2: num_hidden_layers sized a calloc before any tensor was
 * looked at, so 10^9 layers gave "out of memory" (under ASan an abort). It
 * is now checked against the layers the weights hold first (llama_f32 has
 * 2); one layer too many is refused the same way, not as a missing tensor. */
static void test_layer_count_bounded_by_weights(void **state) {
  (void)state;
  expect_load_error(make_variant("hf_1e9_layers", "llama_f32", NULL, billion_layers),
                    "num_hidden_layers (config.json) is 1000000000 but the weights hold tensors for 2 layers", NULL);
  expect_load_error(make_variant("hf_3_layers", "llama_f32", NULL, three_layers),
                    "num_hidden_layers (config.json) is 3 but the weights hold tensors for 2 layers", NULL);
}

static void test_nonexistent_path(void **state) {
  (void)state;
  char *dir = t_tmp_path("hf_does_not_exist");
  char want[512];
  snprintf(want, sizeof want, "%s: No such file or directory", dir);
  expect_load_error(dir, want, NULL);
}

static void write_index(const char *dir, const char *text) {
  char *p = rg_path_join(dir, "model.safetensors.index.json");
  assert_int_equal(rg_write_file_atomic(p, text, strlen(text)), 0);
  free(p);
}

static void test_bad_index(void **state) {
  (void)state;
  char *dir = make_variant("hf_index_json", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"weight_map\": {");
  expect_load_error(dir, "model.safetensors.index.json: not valid JSON", NULL);

  dir = make_variant("hf_index_nomap", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"metadata\": {}}");
  expect_load_error(dir, "missing or empty object 'weight_map'", NULL);

  dir = make_variant("hf_index_missing_file", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"weight_map\": {\"model.norm.weight\": \"model-00009-of-00009.safetensors\"}}");
  expect_load_error(dir, "model-00009-of-00009.safetensors", "No such file");

  dir = make_variant("hf_index_wrong_shard", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00004.safetensors\"}}");
  expect_load_error(dir, "weight_map entry 'lm_head.weight' is not in model-00001-of-00004.safetensors", NULL);

  dir = make_variant("hf_index_escape", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"weight_map\": {\"lm_head.weight\": \"../x.safetensors\"}}");
  expect_load_error(dir, "must be a file name in the same directory", NULL);

  /* An index that lists only some shards: the unlisted tensors are missing. */
  dir = make_variant("hf_index_partial", "mistral_f16", NULL, NULL);
  write_index(dir, "{\"weight_map\": {\"lm_head.weight\": \"model-00004-of-00004.safetensors\"}}");
  expect_load_error(dir, "missing tensor 'model.embed_tokens.weight'", NULL);
}

/* `refgeo info` on a tiny HF directory succeeds and names the architecture. */
static void test_cli_info(void **state) {
  (void)state;
  char *dir = t_hf_tiny("qwen2_bf16");
  char args[1024], *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "info '%s'", dir);
  int rc = t_run_cli(args, &out, &err);
  if (rc != 0) fail_msg("refgeo %s: exit %d: %s", args, rc, err);
  assert_non_null(strstr(out, "qwen2"));
  free(out);
  free(err);
  free(dir);
}

/* `refgeo synth-model` on a small Mistral config: the directory loads, the
 * shard split follows --max-shard-size, norms are exactly 1 and other weights
 * have the requested normal(0, 0.02) statistics, and the byte-level
 * tokenizer maps text to its byte values (what HF tokenizers gives for the
 * same tokenizer.json, checked by hand when the command was written). */
static void test_synth_model(void **state) {
  (void)state;
  static const char CONFIG[] =
      "{\"model_type\": \"mistral\", \"hidden_size\": 256, \"intermediate_size\": 512, \"num_hidden_layers\": 2,"
      " \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"vocab_size\": 1000, \"max_position_embeddings\": 512,"
      " \"rms_norm_eps\": 1e-5, \"sliding_window\": 64, \"tie_word_embeddings\": false}";
  char *config = t_write_tmp("synth_config.json", CONFIG, strlen(CONFIG));
  char *dir = t_tmp_path("synth_mistral");
  char args[2048], *err = NULL;
  snprintf(args, sizeof args, "synth-model --config '%s' --out '%s' --seed 7 --max-shard-size 1MB", config, dir);
  int rc = t_run_cli(args, NULL, &err);
  if (rc != 0) fail_msg("refgeo %s: exit %d: %s", args, rc, err);
  assert_non_null(strstr(err, "shard 4/4"));
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s", rg_error_get());
  assert_int_equal(m->source->n_shards, 4); /* 3.25 MB of bf16 in 1 MB shards, tensors kept whole */
  assert_int_equal(m->n_tensors, 1 + 2 * 9 + 2);
  assert_int_equal(m->cfg.sliding_window, 64);
  assert_ptr_not_equal(m->lm_head, m->tok_embd);
  for (int i = 0; i < m->n_tensors; i++) {
    const rg_tensor *t = &m->tensors[i];
    assert_int_equal(t->type, RG_BF16);
    const int64_t n = rg_tensor_nelems(t);
    double sum = 0, sum2 = 0;
    for (int64_t j = 0; j < n; j++) {
      double v = to_f32(t->type, t->data, j);
      sum += v;
      sum2 += v * v;
    }
    double mean = sum / (double)n, sd = sqrt(sum2 / (double)n - mean * mean);
    if (strstr(t->name, "norm.weight")) {
      assert_true(mean == 1.0 && sd == 0.0);
    } else {
      /* n >= 65536 draws: the sample mean's sd is 0.02/sqrt(n) <= 8e-5 and the
       * sample sd's is 0.02/sqrt(2n) <= 6e-5; 5 sigma bounds, plus bf16
       * rounding (relative 2^-9 ~ 0.2%, covered by 2% on the sd). */
      if (fabs(mean) > 5 * 0.02 / sqrt((double)n) || fabs(sd - 0.02) > 0.02 * 0.02)
        fail_msg("%s: mean %g sd %g, want normal(0, 0.02)", t->name, mean, sd);
    }
  }
  int32_t *ids = NULL;
  int n_ids = 0;
  const char *text = "Hi, w\xc3\xb6rld<|im_end|>";
  assert_int_equal(rg_tokenize(m->tokenizer, text, strlen(text), true, false, &ids, &n_ids), 0);
  const int32_t want[] = {'H', 'i', ',', ' ', 'w', 0xc3, 0xb6, 'r', 'l', 'd', 258};
  assert_int_equal(n_ids, 11);
  assert_memory_equal(ids, want, sizeof want);
  free(ids);
  rg_model_free(m);
  free(err);
  free(dir);
  free(config);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiny_models_load),
      cmocka_unit_test(test_id_with_trailing_slash),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_shape_and_tensor_errors),
      cmocka_unit_test(test_layer_count_bounded_by_weights),
      cmocka_unit_test(test_nonexistent_path),
      cmocka_unit_test(test_bad_index),
      cmocka_unit_test(test_cli_info),
      cmocka_unit_test(test_synth_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
