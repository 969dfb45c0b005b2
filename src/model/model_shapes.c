/* model_shapes.c: a model's tensors from its configuration (model_shapes.h). */
#include "model/model_shapes.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "formats/hf_config.h"
#include "util/error.h"
#include "util/json.h"

/* One block's tensors in transformers' state_dict order: [rows, cols] of
 * the Hugging Face shape (cols 0: a vector), and where rg_layer_weights
 * points at it. */
typedef enum { DIM_D, DIM_Q, DIM_KV, DIM_FF, DIM_NONE } dim;
static const struct {
  const char *suffix;
  dim rows, cols;
  bool bias; /* only with attn_qkv_bias */
  size_t field;
} PARTS[] = {
    {"self_attn.q_proj.weight", DIM_Q, DIM_D, false, offsetof(rg_layer_weights, wq)},
    {"self_attn.q_proj.bias", DIM_Q, DIM_NONE, true, offsetof(rg_layer_weights, bq)},
    {"self_attn.k_proj.weight", DIM_KV, DIM_D, false, offsetof(rg_layer_weights, wk)},
    {"self_attn.k_proj.bias", DIM_KV, DIM_NONE, true, offsetof(rg_layer_weights, bk)},
    {"self_attn.v_proj.weight", DIM_KV, DIM_D, false, offsetof(rg_layer_weights, wv)},
    {"self_attn.v_proj.bias", DIM_KV, DIM_NONE, true, offsetof(rg_layer_weights, bv)},
    {"self_attn.o_proj.weight", DIM_D, DIM_Q, false, offsetof(rg_layer_weights, wo)},
    {"mlp.gate_proj.weight", DIM_FF, DIM_D, false, offsetof(rg_layer_weights, w_gate)},
    {"mlp.up_proj.weight", DIM_FF, DIM_D, false, offsetof(rg_layer_weights, w_up)},
    {"mlp.down_proj.weight", DIM_D, DIM_FF, false, offsetof(rg_layer_weights, w_down)},
    {"input_layernorm.weight", DIM_D, DIM_NONE, false, offsetof(rg_layer_weights, attn_norm)},
    {"post_attention_layernorm.weight", DIM_D, DIM_NONE, false, offsetof(rg_layer_weights, ffn_norm)},
};
enum { N_PARTS = sizeof PARTS / sizeof PARTS[0] };

static int64_t size_of(const rg_config *c, dim k) {
  switch (k) {
  case DIM_D: return c->d_model;
  case DIM_Q: return (int64_t)c->n_heads * c->head_dim;
  case DIM_KV: return (int64_t)c->n_kv_heads * c->head_dim;
  case DIM_FF: return c->d_ff;
  default: return 0;
  }
}

static int add_tensor(rg_tensor *t, int type, const char *name, int64_t rows, int64_t cols) {
  *t = (rg_tensor){.name = strdup(name), .type = type, .n_dims = cols ? 2 : 1,
                   .ne = {cols ? cols : rows, cols ? rows : 1, 1, 1}};
  if (!t->name) return rg_error_set("out of memory");
  t->nbytes = rg_dtype_row_bytes(type, t->ne[0]) * (size_t)t->ne[1];
  return 0;
}

int rg_model_shape_tensors(const rg_config *c, int type, rg_tensor **out, int *n) {
  const int64_t d = c->d_model;
  rg_tensor *t = calloc((size_t)c->n_layers * N_PARTS + 3, sizeof *t);
  *out = t;
  *n = 0;
  if (!t) return rg_error_set("out of memory");
  char name[96];
  int rc = add_tensor(&t[(*n)++], type, "model.embed_tokens.weight", c->vocab_size, d);
  for (int l = 0; l < c->n_layers && rc == 0; l++)
    for (int k = 0; k < N_PARTS && rc == 0; k++) {
      if (PARTS[k].bias && !c->attn_qkv_bias) continue;
      snprintf(name, sizeof name, "model.layers.%d.%s", l, PARTS[k].suffix);
      rc = add_tensor(&t[(*n)++], type, name, size_of(c, PARTS[k].rows), size_of(c, PARTS[k].cols));
    }
  if (rc == 0) rc = add_tensor(&t[(*n)++], type, "model.norm.weight", d, 0);
  if (rc == 0 && !c->tied_embeddings) rc = add_tensor(&t[(*n)++], type, "lm_head.weight", c->vocab_size, d);
  return rc;
}

/* torch_dtype of CONFIG_JSON as an rg_dtype; bfloat16 when absent. */
static int config_dtype(const char *config_json, int *type) {
  cJSON *root = rg_json_read_file(config_json);
  if (!root) return -1;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
  int rc = 0;
  if (!dt || cJSON_IsNull(dt) || (cJSON_IsString(dt) && strcmp(dt->valuestring, "bfloat16") == 0))
    *type = RG_BF16;
  else if (cJSON_IsString(dt) && strcmp(dt->valuestring, "float16") == 0)
    *type = RG_F16;
  else if (cJSON_IsString(dt) && strcmp(dt->valuestring, "float32") == 0)
    *type = RG_F32;
  else
    rc = rg_error_set("%s: torch_dtype is not bfloat16, float16 or float32", config_json);
  cJSON_Delete(root);
  return rc;
}

/* Points the model's weight fields at its tensors, by name. */
static void link_tensors(rg_model *m) {
  char name[96];
  for (int l = 0; l < m->cfg.n_layers; l++)
    for (int k = 0; k < N_PARTS; k++) {
      snprintf(name, sizeof name, "model.layers.%d.%s", l, PARTS[k].suffix);
      *(const rg_tensor **)((char *)&m->layers[l] + PARTS[k].field) = rg_model_find_tensor(m, name);
    }
  m->tok_embd = rg_model_find_tensor(m, "model.embed_tokens.weight");
  m->out_norm = rg_model_find_tensor(m, "model.norm.weight");
  m->lm_head = m->cfg.tied_embeddings ? m->tok_embd : rg_model_find_tensor(m, "lm_head.weight");
}

rg_model *rg_model_load_shapes(const char *config_json) {
  rg_model *m = calloc(1, sizeof *m);
  int type = RG_BF16;
  int rc = m && (m->path = strdup(config_json)) && (m->id = strdup(config_json)) && (m->format = strdup("shapes"))
               ? 0
               : rg_error_set("%s: out of memory", config_json);
  if (rc == 0) rc = rg_hf_config_load(config_json, &m->cfg);
  if (rc == 0) rc = config_dtype(config_json, &type);
  if (rc == 0) rc = rg_model_shape_tensors(&m->cfg, type, &m->tensors, &m->n_tensors);
  if (rc == 0 && !(m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers)))
    rc = rg_error_set("%s: out of memory", config_json);
  if (rc < 0) {
    rg_model_free(m);
    return NULL;
  }
  link_tensors(m);
  for (int i = 0; i < m->n_tensors; i++) m->n_params += rg_tensor_nelems(&m->tensors[i]);
  return m;
}
