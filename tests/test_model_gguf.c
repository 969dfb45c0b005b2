/* test_model_gguf: loading the real SmolLM2-135M-Instruct GGUF, checked
 * against gguf-py's GGUFReader view of the same file
 * (tests/fixtures/dequant/model_gguf.json from make_dequant_fixtures.py). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static cJSON *facts;
static rg_model *model;

static int setup(void **state) {
  (void)state;
  char *path = t_fixture_path("dequant/model_gguf.json");
  char *text = rg_read_file(path, NULL);
  free(path);
  if (!text) return -1;
  facts = cJSON_Parse(text);
  free(text);
  model = rg_model_load(t_env("REFGEO_MODEL"));
  if (!model) print_error("%s\n", rg_error_get());
  return facts && model ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  rg_model_free(model);
  cJSON_Delete(facts);
  return 0;
}

static double fact(const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(facts, key);
  if (!cJSON_IsNumber(v) && !cJSON_IsBool(v)) fail_msg("fixture key %s missing", key);
  return cJSON_IsBool(v) ? (double)cJSON_IsTrue(v) : v->valuedouble;
}

static void test_config(void **state) {
  (void)state;
  const rg_config *c = &model->cfg;
  assert_string_equal(c->arch, cJSON_GetObjectItemCaseSensitive(facts, "arch")->valuestring);
  assert_string_equal(model->id, cJSON_GetObjectItemCaseSensitive(facts, "name")->valuestring);
  assert_string_equal(model->format, "gguf");
  assert_int_equal(c->n_layers, (int)fact("n_layers"));
  assert_int_equal(c->d_model, (int)fact("d_model"));
  assert_int_equal(c->d_ff, (int)fact("d_ff"));
  assert_int_equal(c->n_heads, (int)fact("n_heads"));
  assert_int_equal(c->n_kv_heads, (int)fact("n_kv_heads"));
  assert_int_equal(c->head_dim, (int)fact("head_dim"));
  assert_int_equal(c->max_ctx, (int)fact("max_ctx"));
  assert_int_equal(c->vocab_size, (int)fact("vocab_size"));
  /* The file stores f32; the fixture holds that f32 widened to double, so
   * narrowing it back must give exactly the same float. */
  assert_true(c->rms_eps == (float)fact("rms_eps"));
  assert_true(c->rope_theta == (float)fact("rope_theta"));
  assert_int_equal(c->rope_scaling, RG_ROPE_SCALING_NONE);
  assert_null(model->rope_freqs);
  assert_true(c->rope_adjacent_pairs); /* arch llama: q/k rows permuted by the converter */
  assert_int_equal(c->tied_embeddings, (int)fact("tied_embeddings"));
  assert_false(c->attn_qkv_bias);
  assert_int_equal(c->sliding_window, 0);
  assert_non_null(model->chat_template);
  assert_int_equal(strlen(model->chat_template), (size_t)fact("chat_template_len"));
  assert_non_null(model->tokenizer);
}

static void test_tensors(void **state) {
  (void)state;
  assert_int_equal(model->n_tensors, (int)fact("n_tensors"));
  assert_int_equal(model->n_tensors, 272);
  assert_true(rg_model_n_params(model) == (long long)fact("n_params"));

  /* Tensor count per dtype, as gguf-py counts them. */
  const cJSON *types = cJSON_GetObjectItemCaseSensitive(facts, "tensor_types"), *e;
  int total = 0;
  cJSON_ArrayForEach(e, types) {
    int n = 0;
    for (int i = 0; i < model->n_tensors; i++) n += strcmp(rg_dtype_get(model->tensors[i].type)->name, e->string) == 0;
    assert_int_equal(n, e->valueint);
    total += n;
  }
  assert_int_equal(total, model->n_tensors);

  /* Tied: the head is the embedding, and no lm_head tensor exists. */
  assert_ptr_equal(model->lm_head, model->tok_embd);
  assert_null(rg_model_find_tensor(model, "lm_head.weight"));
  assert_ptr_equal(rg_model_find_tensor(model, "model.embed_tokens.weight"), model->tok_embd);
  assert_int_equal(model->tok_embd->ne[0], model->cfg.d_model);
  assert_int_equal(model->tok_embd->ne[1], model->cfg.vocab_size);
  assert_int_equal(model->tok_embd->type, RG_Q8_0);
  assert_ptr_equal(rg_model_find_tensor(model, "model.norm.weight"), model->out_norm);

  /* Every tensor has its Hugging Face name and is bound to its layer slot. */
  char name[96];
  for (int il = 0; il < model->cfg.n_layers; il++) {
    const rg_layer_weights *L = &model->layers[il];
    const struct { const char *hf; const rg_tensor *t; } slots[] = {
        {"input_layernorm.weight", L->attn_norm},        {"self_attn.q_proj.weight", L->wq},
        {"self_attn.k_proj.weight", L->wk},              {"self_attn.v_proj.weight", L->wv},
        {"self_attn.o_proj.weight", L->wo},              {"post_attention_layernorm.weight", L->ffn_norm},
        {"mlp.gate_proj.weight", L->w_gate},             {"mlp.up_proj.weight", L->w_up},
        {"mlp.down_proj.weight", L->w_down},
    };
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
      snprintf(name, sizeof name, "model.layers.%d.%s", il, slots[k].hf);
      assert_non_null(slots[k].t);
      assert_ptr_equal(rg_model_find_tensor(model, name), slots[k].t);
    }
    assert_null(L->bq);
    assert_int_equal(L->wk->ne[1], model->cfg.n_kv_heads * model->cfg.head_dim);
    assert_int_equal(L->w_down->ne[0], model->cfg.d_ff);
  }
  /* 2 globals + 9 per layer = all 272: nothing kept a GGUF name. */
  for (int i = 0; i < model->n_tensors; i++) assert_true(strncmp(model->tensors[i].name, "blk.", 4) != 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_config), cmocka_unit_test(test_tensors)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
