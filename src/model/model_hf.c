/* model_hf.c: rg_model from a Hugging Face model directory.
 *
 * DIR holds config.json, the weights as model.safetensors or as shards listed
 * by model.safetensors.index.json, tokenizer.json and optionally
 * tokenizer_config.json (chat_template, special tokens). Tensor names are
 * already Hugging Face names; tensors keep their file dtype and point into
 * the shards' maps, which m->source owns. The chat template is the
 * "chat_template" of tokenizer_config.json (a string, or a list of
 * {name, template} of which "default" is taken) or, as transformers 5 saves
 * it, the file chat_template.jinja.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "model/model_source.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* ---------------------------------------------------------------- shards */

static int add_shard(rg_model *m, const char *path) {
  rg_model_source *src = m->source;
  rg_safetensors **grown = realloc(src->shards, (size_t)(src->n_shards + 1) * sizeof *grown);
  if (!grown) return rg_error_set("%s: out of memory", path);
  src->shards = grown;
  rg_safetensors *st = rg_safetensors_open(path);
  if (!st) return -1;
  src->shards[src->n_shards++] = st;
  return 0;
}

/* The open shard whose file name is FILE, or NULL. */
static rg_safetensors *shard_named(const rg_model *m, const char *dir, const char *file) {
  for (int i = 0; i < m->source->n_shards; i++) {
    const char *p = rg_safetensors_path(m->source->shards[i]);
    size_t dl = strlen(dir);
    if (strncmp(p, dir, dl) == 0 && p[dl] == '/' && strcmp(p + dl + 1, file) == 0) return m->source->shards[i];
  }
  return NULL;
}

/* Opens every shard named in the index once, then checks that every
 * weight_map entry names a tensor present in its shard. */
static int open_indexed(rg_model *m, const char *dir, const char *index_path) {
  cJSON *root = rg_json_read_file(index_path);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  int rc = 0;
  if (!root) rc = -1;
  else if (!cJSON_IsObject(map) || !map->child) rc = rg_error_set("%s: missing or empty object 'weight_map'", index_path);
  for (const cJSON *e = map ? map->child : NULL; e && rc == 0; e = e->next) {
    if (!cJSON_IsString(e) || !*e->valuestring || strchr(e->valuestring, '/') || strcmp(e->valuestring, "..") == 0) {
      rc = rg_error_set("%s: weight_map entry '%s' must be a file name in the same directory", index_path, e->string);
      break;
    }
    if (shard_named(m, dir, e->valuestring)) continue;
    char *path = rg_path_join(dir, e->valuestring);
    rc = path ? add_shard(m, path) : rg_error_set("%s: out of memory", index_path);
    free(path);
  }
  for (const cJSON *e = map ? map->child : NULL; e && rc == 0; e = e->next)
    if (!rg_safetensors_find(shard_named(m, dir, e->valuestring), e->string))
      rc = rg_error_set("%s: weight_map entry '%s' is not in %s", index_path, e->string, e->valuestring);
  cJSON_Delete(root);
  return rc;
}

static int open_weights(rg_model *m, const char *dir) {
  char *index = rg_path_join(dir, "model.safetensors.index.json");
  char *single = rg_path_join(dir, "model.safetensors");
  int rc;
  if (!index || !single) rc = rg_error_set("%s: out of memory", dir);
  else if (rg_path_exists(index)) rc = open_indexed(m, dir, index);
  else if (rg_path_exists(single)) rc = add_shard(m, single);
  else rc = rg_error_set("%s: no model.safetensors or model.safetensors.index.json", dir);
  free(index);
  free(single);
  return rc;
}

/* m->tensors: every tensor of every shard, names copied (rg_model_free frees
 * them); a name in two shards is an error. */
static int expose_tensors(rg_model *m, const char *dir) {
  int total = 0;
  for (int s = 0; s < m->source->n_shards; s++) {
    int n = rg_safetensors_n_tensors(m->source->shards[s]);
    if (n > 0x7fffffff - total) return rg_error_set("%s: too many tensors", dir);
    total += n;
  }
  m->tensors = calloc(total ? (size_t)total : 1, sizeof *m->tensors);
  if (!m->tensors) return rg_error_set("%s: out of memory", dir);
  for (int s = 0; s < m->source->n_shards; s++) {
    const rg_safetensors *st = m->source->shards[s];
    for (int i = 0; i < rg_safetensors_n_tensors(st); i++) {
      const rg_tensor *t = rg_safetensors_tensor(st, i);
      if (rg_model_find_tensor(m, t->name))
        return rg_error_set("%s: tensor '%s' appears in more than one shard", rg_safetensors_path(st), t->name);
      m->tensors[m->n_tensors] = *t;
      m->tensors[m->n_tensors].name = strdup(t->name);
      if (!m->tensors[m->n_tensors++].name) return rg_error_set("%s: out of memory", dir);
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- binding */

/* "[576, 1536]" in Hugging Face (row-major) order. */
static void format_hf_shape(char *buf, size_t size, const int64_t *ne, int n_dims) {
  size_t k = (size_t)snprintf(buf, size, "[");
  for (int d = n_dims - 1; d >= 0 && k < size; d--)
    k += (size_t)snprintf(buf + k, size - k, d == n_dims - 1 ? "%lld" : ", %lld", (long long)ne[d]);
  if (k < size) snprintf(buf + k, size - k, "]");
}

/* The tensor NAME, checked against the HF shape [rows, cols] the config
 * implies (cols = 0 for a vector of length rows). */
static int bind(const rg_model *m, const char *name, int64_t rows, int64_t cols, const rg_tensor **out) {
  const rg_tensor *t = rg_model_find_tensor(m, name);
  if (!t) return rg_error_set("%s: missing tensor '%s'", m->path, name);
  const int n_dims = cols ? 2 : 1;
  const int64_t want[RG_MAX_DIMS] = {cols ? cols : rows, cols ? rows : 1, 1, 1};
  if (t->n_dims != n_dims || t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != 1 || t->ne[3] != 1) {
    char have_s[96], want_s[96];
    format_hf_shape(have_s, sizeof have_s, t->ne, t->n_dims);
    format_hf_shape(want_s, sizeof want_s, want, n_dims);
    return rg_error_set("%s: tensor '%s' has shape %s but config.json implies %s", m->path, name, have_s, want_s);
  }
  *out = t;
  return 0;
}

static int bind_layer(rg_model *m, int il) {
  const rg_config *c = &m->cfg;
  const int64_t d = c->d_model, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
  rg_layer_weights *L = &m->layers[il];
  char name[96];
#define BIND(suffix, rows, cols, dst) \
  (snprintf(name, sizeof name, "model.layers.%d.%s", il, suffix), bind(m, name, rows, cols, dst))
  if (BIND("input_layernorm.weight", d, 0, &L->attn_norm) || BIND("self_attn.q_proj.weight", q, d, &L->wq) ||
      BIND("self_attn.k_proj.weight", kv, d, &L->wk) || BIND("self_attn.v_proj.weight", kv, d, &L->wv) ||
      BIND("self_attn.o_proj.weight", d, q, &L->wo) || BIND("post_attention_layernorm.weight", d, 0, &L->ffn_norm) ||
      BIND("mlp.gate_proj.weight", c->d_ff, d, &L->w_gate) || BIND("mlp.up_proj.weight", c->d_ff, d, &L->w_up) ||
      BIND("mlp.down_proj.weight", d, c->d_ff, &L->w_down))
    return -1;
  if (c->attn_qkv_bias && (BIND("self_attn.q_proj.bias", q, 0, &L->bq) || BIND("self_attn.k_proj.bias", kv, 0, &L->bk) ||
                           BIND("self_attn.v_proj.bias", kv, 0, &L->bv)))
    return -1;
#undef BIND
  return 0;
}

static int bind_weights(rg_model *m) {
  const rg_config *c = &m->cfg;
  if (bind(m, "model.embed_tokens.weight", c->vocab_size, c->d_model, &m->tok_embd) != 0 ||
      bind(m, "model.norm.weight", c->d_model, 0, &m->out_norm) != 0)
    return -1;
  /* A tied model uses the embedding even if the file also stores a head. */
  if (c->tied_embeddings) m->lm_head = m->tok_embd;
  else if (!rg_model_find_tensor(m, "lm_head.weight"))
    return rg_error_set("%s: missing tensor 'lm_head.weight' (config.json: tie_word_embeddings is false)", m->path);
  else if (bind(m, "lm_head.weight", c->vocab_size, c->d_model, &m->lm_head) != 0)
    return -1;
  if (rg_model_alloc_layers(m, "num_hidden_layers (config.json)") != 0) return -1;
  for (int il = 0; il < c->n_layers; il++)
    if (bind_layer(m, il) != 0) return -1;
  return 0;
}

/* ---------------------------------------------------------------- tokenizer */

/* chat_template from tokenizer_config.json, else chat_template.jinja; NULL
 * (no error) when the model has none. */
static int read_chat_template(rg_model *m, const char *dir, const char *tok_config) {
  if (tok_config) {
    cJSON *root = rg_json_read_file(tok_config);
    if (!root) return -1;
    if (!cJSON_IsObject(root)) {
      cJSON_Delete(root);
      return rg_error_set("%s: not a JSON object", tok_config);
    }
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (cJSON_IsArray(tpl)) {
      const cJSON *chosen = NULL;
      for (const cJSON *e = tpl->child; e; e = e->next) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0)
          chosen = cJSON_GetObjectItemCaseSensitive(e, "template");
      }
      tpl = chosen;
    }
    if (cJSON_IsString(tpl)) m->chat_template = strdup(tpl->valuestring);
    cJSON_Delete(root);
    if (cJSON_IsString(tpl) && !m->chat_template) return rg_error_set("%s: out of memory", tok_config);
    if (m->chat_template) return 0;
  }
  char *jinja = rg_path_join(dir, "chat_template.jinja");
  if (jinja && rg_path_exists(jinja)) {
    m->chat_template = rg_read_file(jinja, NULL);
    if (!m->chat_template) {
      free(jinja);
      return -1;
    }
  }
  free(jinja);
  return 0;
}

static int load_tokenizer(rg_model *m, const char *dir) {
  char *tok = rg_path_join(dir, "tokenizer.json");
  char *tok_config = rg_path_join(dir, "tokenizer_config.json");
  int rc = 0;
  if (!tok || !tok_config) rc = rg_error_set("%s: out of memory", dir);
  else if (!rg_path_exists(tok)) rc = rg_error_set("%s: no tokenizer.json", dir);
  if (rc == 0 && !rg_path_exists(tok_config)) {
    free(tok_config);
    tok_config = NULL;
  }
  /* Ids at or past config.json's vocab_size are refused before the
   * tokenizer sizes any table: the embedding has no row for them. */
  if (rc == 0 && !(m->tokenizer = rg_tokenizer_from_json_for_model(tok, tok_config, m->cfg.vocab_size))) rc = -1;
  if (rc == 0) rc = read_chat_template(m, dir, tok_config);
  free(tok);
  free(tok_config);
  return rc;
}

/* ---------------------------------------------------------------- entry */

/* The last path component of DIR, ignoring trailing slashes, malloc'd. */
static char *dir_basename(const char *dir) {
  size_t end = strlen(dir);
  while (end > 1 && dir[end - 1] == '/') end--;
  size_t start = end;
  while (start > 0 && dir[start - 1] != '/') start--;
  return strndup(dir + start, end - start);
}

int rg_model_load_hf(rg_model *m, const char *dir) {
  m->format = strdup("hf");
  m->id = dir_basename(dir);
  char *config = rg_path_join(dir, "config.json");
  if (!m->format || !m->id || !config) {
    free(config);
    return rg_error_set("%s: out of memory", dir);
  }
  int rc = rg_hf_config_load(config, &m->cfg);
  free(config);
  if (rc != 0 || open_weights(m, dir) != 0 || expose_tensors(m, dir) != 0 || bind_weights(m) != 0 ||
      load_tokenizer(m, dir) != 0)
    return -1;
  return 0;
}
