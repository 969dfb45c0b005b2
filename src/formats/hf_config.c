/* hf_config.c: config.json -> rg_config (see hf_config.h for the keys). */
#include "formats/hf_config.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* Absent and JSON null both mean "use the default" in transformers. */
static const cJSON *item(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNull(v) ? NULL : v;
}

/* Integer key in [lo, INT_MAX]; absent: an error when REQUIRED, else *out is
 * left at its default. */
static int get_int(const cJSON *obj, const char *key, const char *path, bool required, int lo, int *out) {
  const cJSON *v = item(obj, key);
  if (!v) return required ? rg_error_set("%s: missing key '%s'", path, key) : 0;
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(d == floor(d) && d >= lo && d <= INT_MAX))
    return rg_error_set("%s: key '%s' must be an integer >= %d", path, key, lo);
  *out = (int)d;
  return 0;
}

static int get_float(const cJSON *obj, const char *key, const char *path, bool required, float *out) {
  const cJSON *v = item(obj, key);
  if (!v) return required ? rg_error_set("%s: missing key '%s'", path, key) : 0;
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
    return rg_error_set("%s: key '%s' must be a positive number", path, key);
  *out = (float)v->valuedouble;
  return 0;
}

static int get_bool(const cJSON *obj, const char *key, const char *path, bool *out) {
  const cJSON *v = item(obj, key);
  if (!v) return 0;
  if (!cJSON_IsBool(v)) return rg_error_set("%s: key '%s' must be true or false", path, key);
  *out = cJSON_IsTrue(v);
  return 0;
}

/* RoPE base and scaling from "rope_parameters" (transformers 5) or from
 * top-level "rope_theta" + "rope_scaling" (older configs). */
static int read_rope(const cJSON *root, const char *path, rg_config *c) {
  const cJSON *params = item(root, "rope_parameters");
  const cJSON *scaling = params ? params : item(root, "rope_scaling");
  const char *where = params ? "rope_parameters" : "rope_scaling";
  c->rope_theta = 10000.0f;
  c->rope_scaling = RG_ROPE_SCALING_NONE;
  c->rope_factor = 1.0f;
  if (get_float(root, "rope_theta", path, false, &c->rope_theta) != 0) return -1;
  if (!scaling) return 0;
  if (!cJSON_IsObject(scaling)) return rg_error_set("%s: key '%s' must be an object", path, where);
  if (params && get_float(params, "rope_theta", path, false, &c->rope_theta) != 0) return -1;
  const cJSON *type = item(scaling, "rope_type");
  if (!type) type = item(scaling, "type");
  if (!type || (cJSON_IsString(type) && strcmp(type->valuestring, "default") == 0)) return 0;
  if (!cJSON_IsString(type)) return rg_error_set("%s: %s.rope_type must be a string", path, where);
  const char *t = type->valuestring;
  if (strcmp(t, "linear") == 0) {
    c->rope_scaling = RG_ROPE_SCALING_LINEAR;
    return get_float(scaling, "factor", path, true, &c->rope_factor);
  }
  if (strcmp(t, "llama3") == 0) {
    c->rope_scaling = RG_ROPE_SCALING_LLAMA3;
    if (get_float(scaling, "factor", path, true, &c->rope_factor) != 0 ||
        get_float(scaling, "low_freq_factor", path, true, &c->rope_low_freq_factor) != 0 ||
        get_float(scaling, "high_freq_factor", path, true, &c->rope_high_freq_factor) != 0 ||
        get_int(scaling, "original_max_position_embeddings", path, true, 1, &c->rope_orig_max_ctx) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", rg_error_get());
      return rg_error_set("%s (in %s)", msg, where);
    }
    return 0;
  }
  return rg_error_set("%s: %s type '%s' is not supported (default, linear, llama3)", path, where, t);
}

/* Architecture details the forward pass does not implement. */
static int reject_unsupported(const cJSON *root, const char *path, const rg_config *c) {
  const cJSON *act = item(root, "hidden_act");
  if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
    return rg_error_set("%s: hidden_act '%s' is not supported (silu only)", path,
                        cJSON_IsString(act) ? act->valuestring : "?");
  bool mlp_bias = false, attention_bias = false, use_sliding = false;
  if (get_bool(root, "mlp_bias", path, &mlp_bias) != 0 || get_bool(root, "attention_bias", path, &attention_bias) != 0)
    return -1;
  if (mlp_bias) return rg_error_set("%s: mlp_bias true is not supported", path);
  if (attention_bias && strcmp(c->arch, "qwen2") != 0)
    return rg_error_set("%s: attention_bias true (q/k/v and o_proj biases) is not supported", path);
  if (strcmp(c->arch, "qwen2") == 0) {
    if (get_bool(root, "use_sliding_window", path, &use_sliding) != 0) return -1;
    if (use_sliding) return rg_error_set("%s: qwen2 use_sliding_window true is not supported", path);
  }
  return 0;
}

int rg_hf_config_parse(const char *text, const char *path, rg_config *c) {
  memset(c, 0, sizeof *c);
  cJSON *root = rg_json_parse_named(text, strlen(text), path);
  if (!root) return -1;
  int rc = -1;
  if (!cJSON_IsObject(root)) {
    rg_error_set("%s: not a JSON object", path);
    goto done;
  }
  const cJSON *type = item(root, "model_type");
  if (!type) {
    rg_error_set("%s: missing key 'model_type'", path);
    goto done;
  }
  if (!cJSON_IsString(type) || (strcmp(type->valuestring, "llama") != 0 && strcmp(type->valuestring, "mistral") != 0 &&
                                strcmp(type->valuestring, "qwen2") != 0)) {
    rg_error_set("%s: model_type '%s' is not supported (llama, mistral, qwen2)", path,
                 cJSON_IsString(type) ? type->valuestring : "?");
    goto done;
  }
  snprintf(c->arch, sizeof c->arch, "%s", type->valuestring);

  if (get_int(root, "hidden_size", path, true, 1, &c->d_model) != 0 ||
      get_int(root, "intermediate_size", path, true, 1, &c->d_ff) != 0 ||
      get_int(root, "num_hidden_layers", path, true, 1, &c->n_layers) != 0 ||
      get_int(root, "num_attention_heads", path, true, 1, &c->n_heads) != 0 ||
      get_int(root, "vocab_size", path, true, 1, &c->vocab_size) != 0 ||
      get_int(root, "max_position_embeddings", path, true, 1, &c->max_ctx) != 0 ||
      get_float(root, "rms_norm_eps", path, true, &c->rms_eps) != 0)
    goto done;
  c->n_kv_heads = c->n_heads;
  if (get_int(root, "num_key_value_heads", path, false, 1, &c->n_kv_heads) != 0) goto done;
  if (c->n_heads % c->n_kv_heads != 0) {
    rg_error_set("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, c->n_heads,
                 c->n_kv_heads);
    goto done;
  }
  if (!item(root, "head_dim") && c->d_model % c->n_heads != 0) {
    rg_error_set("%s: hidden_size %d is not a multiple of num_attention_heads %d (and no head_dim)", path, c->d_model,
                 c->n_heads);
    goto done;
  }
  c->head_dim = c->d_model / c->n_heads;
  if (get_int(root, "head_dim", path, false, 1, &c->head_dim) != 0) goto done;
  if (c->head_dim % 2 != 0) {
    rg_error_set("%s: head_dim %d is odd (RoPE rotates pairs)", path, c->head_dim);
    goto done;
  }
  if (read_rope(root, path, c) != 0 || get_bool(root, "tie_word_embeddings", path, &c->tied_embeddings) != 0 ||
      get_int(root, "sliding_window", path, false, 0, &c->sliding_window) != 0 ||
      reject_unsupported(root, path, c) != 0)
    goto done;
  /* Qwen2 configs carry a sliding_window value that applies only when
   * use_sliding_window is true, which reject_unsupported refused. */
  if (strcmp(c->arch, "qwen2") == 0) c->sliding_window = 0;
  c->attn_qkv_bias = strcmp(c->arch, "qwen2") == 0;
  c->rope_adjacent_pairs = false;
  rc = 0;
done:
  cJSON_Delete(root);
  return rc;
}

int rg_hf_config_load(const char *path, rg_config *cfg) {
  char *text = rg_read_file(path, NULL);
  if (!text) return -1;
  int rc = rg_hf_config_parse(text, path, cfg);
  free(text);
  return rc;
}
