/* hf_write.c: rg_weights -> Hugging Face model directory (hf_write.h). */
#include "engine/hf_write.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/dtype.h"
#include "formats/safetensors_write.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/json.h"

int rg_hf_write_json(const char *dir, const char *name, const cJSON *j) {
  char *path = rg_path_join(dir, name);
  char *text = j ? cJSON_Print(j) : NULL;
  int rc = path && text ? rg_write_file_atomic(path, text, strlen(text))
                        : rg_error_set("%s/%s: out of memory", dir, name);
  free(text);
  free(path);
  return rc;
}

/* ---------------------------------------------------------------- config.json */

/* F as the shortest decimal that reads back as the same float32 (1e-05, not
 * cJSON's 9.99999974737875e-06 of the widened double): what a human wrote in
 * the original config.json, and the same float either way. */
static bool add_float(cJSON *o, const char *key, float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  return cJSON_AddRawToObject(o, key, buf) != NULL;
}

static bool add_id(cJSON *o, const char *key, int id) {
  return id >= 0 ? cJSON_AddNumberToObject(o, key, id) != NULL : cJSON_AddNullToObject(o, key) != NULL;
}

/* rope_scaling in the form configs before transformers 5 used (which 5 still
 * reads): null, {"rope_type": "linear", "factor"} or llama3's four keys. */
static bool add_rope_scaling(cJSON *o, const rg_config *c) {
  if (c->rope_scaling == RG_ROPE_SCALING_NONE) return cJSON_AddNullToObject(o, "rope_scaling") != NULL;
  cJSON *s = cJSON_AddObjectToObject(o, "rope_scaling");
  bool ok = s && add_float(s, "factor", c->rope_factor);
  if (c->rope_scaling == RG_ROPE_SCALING_LINEAR) return ok && cJSON_AddStringToObject(s, "rope_type", "linear");
  return ok && cJSON_AddStringToObject(s, "rope_type", "llama3") &&
         add_float(s, "low_freq_factor", c->rope_low_freq_factor) &&
         add_float(s, "high_freq_factor", c->rope_high_freq_factor) &&
         cJSON_AddNumberToObject(s, "original_max_position_embeddings", c->rope_orig_max_ctx);
}

cJSON *rg_hf_config_json(const rg_config *c, const char *torch_dtype, int bos_id, int eos_id) {
  /* Only what each transformers config class can express: Llama's
   * attention_bias would add an o_proj bias refgeo's model lacks, Qwen2
   * always has q/k/v biases, and Qwen2's sliding window is not implemented
   * by refgeo's forward pass (hf_config.h). */
  const char *arch_class;
  if (strcmp(c->arch, "llama") == 0) arch_class = "LlamaForCausalLM";
  else if (strcmp(c->arch, "mistral") == 0) arch_class = "MistralForCausalLM";
  else if (strcmp(c->arch, "qwen2") == 0) arch_class = "Qwen2ForCausalLM";
  else {
    rg_error_set("config: architecture '%s' cannot be written as config.json (llama, mistral, qwen2)", c->arch);
    return NULL;
  }
  const bool qwen2 = strcmp(c->arch, "qwen2") == 0, mistral = strcmp(c->arch, "mistral") == 0;
  if (c->attn_qkv_bias != qwen2) {
    rg_error_set("config: %s %s q/k/v biases, which its transformers config cannot express", c->arch,
                 c->attn_qkv_bias ? "with" : "without");
    return NULL;
  }
  if (c->sliding_window > 0 && !mistral) {
    rg_error_set("config: a sliding window on %s cannot be written as config.json", c->arch);
    return NULL;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON *archs = o ? cJSON_AddArrayToObject(o, "architectures") : NULL;
  cJSON *name = cJSON_CreateString(arch_class);
  bool ok = archs && name && cJSON_AddItemToArray(archs, name);
  if (!ok) cJSON_Delete(name);
  ok = ok && cJSON_AddStringToObject(o, "model_type", c->arch) &&
       cJSON_AddNumberToObject(o, "hidden_size", c->d_model) &&
       cJSON_AddNumberToObject(o, "intermediate_size", c->d_ff) &&
       cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers) &&
       cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads) &&
       cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads) &&
       cJSON_AddNumberToObject(o, "head_dim", c->head_dim) &&
       cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_ctx) &&
       cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size) && add_float(o, "rms_norm_eps", c->rms_eps) &&
       add_float(o, "rope_theta", c->rope_theta) && add_rope_scaling(o, c) &&
       cJSON_AddStringToObject(o, "hidden_act", "silu") &&
       cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tied_embeddings) &&
       cJSON_AddNumberToObject(o, "attention_dropout", 0) && cJSON_AddNumberToObject(o, "initializer_range", 0.02) &&
       cJSON_AddBoolToObject(o, "use_cache", true) && add_id(o, "bos_token_id", bos_id) &&
       add_id(o, "eos_token_id", eos_id) && cJSON_AddStringToObject(o, "torch_dtype", torch_dtype);
  if (qwen2)
    ok = ok && cJSON_AddBoolToObject(o, "use_sliding_window", false) && cJSON_AddNullToObject(o, "sliding_window") &&
         cJSON_AddNumberToObject(o, "max_window_layers", c->n_layers);
  else if (mistral)
    ok = ok && (c->sliding_window > 0 ? cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window) != NULL
                                      : cJSON_AddNullToObject(o, "sliding_window") != NULL);
  else
    ok = ok && cJSON_AddBoolToObject(o, "attention_bias", false) && cJSON_AddBoolToObject(o, "mlp_bias", false);
  if (!ok) {
    cJSON_Delete(o);
    rg_error_set("config: out of memory");
    return NULL;
  }
  return o;
}

/* ---------------------------------------------------------------- tensors */

typedef struct {
  const rg_weights *w;
  const rg_config *cfg;
  rg_hf_dtype dtype;
  int cached;   /* tensor whose values are in vals, -1 none */
  float *vals;  /* its float32 values, in the HF layout */
  float *row;   /* one head's rows, for un-permuting */
} tensor_source;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Heads of a q_proj/k_proj weight or bias, 0 for any other tensor. */
static int rope_heads(const rg_config *c, const char *name) {
  if (ends_with(name, "self_attn.q_proj.weight") || ends_with(name, "self_attn.q_proj.bias")) return c->n_heads;
  if (ends_with(name, "self_attn.k_proj.weight") || ends_with(name, "self_attn.k_proj.bias")) return c->n_kv_heads;
  return 0;
}

/* Undoes llama.cpp's permute (convert_hf_to_gguf.py, LlamaModel.permute:
 * w.reshape(n_head, 2, head_dim / 2, ...).swapaxes(1, 2)): GGUF row
 * 2i + j of a head is HF row j * head_dim / 2 + i. V holds N_HEADS heads of
 * HEAD_DIM rows of COLS floats; SCRATCH one head. */
static void unpermute_rows(float *v, int n_heads, int head_dim, int64_t cols, float *scratch) {
  const int half = head_dim / 2;
  const size_t row_bytes = (size_t)cols * sizeof *v;
  for (int h = 0; h < n_heads; h++) {
    float *head = v + (size_t)h * (size_t)head_dim * (size_t)cols;
    memcpy(scratch, head, row_bytes * (size_t)head_dim);
    for (int i = 0; i < half; i++)
      for (int j = 0; j < 2; j++)
        memcpy(head + (size_t)(j * half + i) * (size_t)cols, scratch + (size_t)(2 * i + j) * (size_t)cols, row_bytes);
  }
}

/* Model tensor I's values (merged with its LoRA adapter, if any),
 * downloaded once (the safetensors writer asks for a tensor's bytes in
 * consecutive chunks). */
static int load_param(tensor_source *s, int i) {
  if (s->cached == i) return 0;
  const rg_tensor *t = rg_weights_export_tensor(s->w, i);
  free(s->vals);
  free(s->row);
  s->row = NULL;
  s->cached = -1;
  const int64_t n = rg_tensor_nelems(t);
  s->vals = malloc((size_t)n * sizeof *s->vals);
  if (!s->vals) return rg_error_set("%s: out of memory", t->name);
  if (rg_weights_export_download(s->w, i, s->vals) != 0) return -1;
  const int heads = s->cfg->rope_adjacent_pairs ? rope_heads(s->cfg, t->name) : 0;
  if (heads > 0) {
    const int64_t cols = t->n_dims == 1 ? 1 : t->ne[0];
    if ((int64_t)heads * s->cfg->head_dim * cols != n)
      return rg_error_set("%s: %lld values are not %d heads of %d rows", t->name, (long long)n, heads,
                          s->cfg->head_dim);
    s->row = malloc((size_t)s->cfg->head_dim * (size_t)cols * sizeof *s->row);
    if (!s->row) return rg_error_set("%s: out of memory", t->name);
    unpermute_rows(s->vals, heads, s->cfg->head_dim, cols, s->row);
  }
  s->cached = i;
  return 0;
}

static int fill_tensor(void *ctx, int i, size_t offset, void *buf, size_t len) {
  tensor_source *s = ctx;
  if (load_param(s, i) != 0) return -1;
  if (s->dtype == RG_HF_F32) {
    memcpy(buf, (const char *)s->vals + offset, len);
    return 0;
  }
  const float *v = s->vals + offset / 2;
  uint16_t *out = buf;
  for (size_t k = 0; k < len / 2; k++) out[k] = rg_fp32_to_bf16(v[k]);
  return 0;
}

static int write_tensors(const rg_weights *w, const char *dir, rg_hf_dtype dtype) {
  const int n = rg_weights_export_count(w);
  rg_tensor *t = calloc((size_t)n, sizeof *t);
  if (!t) return rg_error_set("%s: out of memory", dir);
  for (int i = 0; i < n; i++) {
    const rg_tensor *p = rg_weights_export_tensor(w, i);
    t[i] = (rg_tensor){.name = p->name, .type = dtype == RG_HF_F32 ? RG_F32 : RG_BF16, .n_dims = p->n_dims};
    memcpy(t[i].ne, p->ne, sizeof t[i].ne);
  }
  tensor_source src = {.w = w, .cfg = &rg_weights_model(w)->cfg, .dtype = dtype, .cached = -1};
  const char *keys[] = {"format"}, *vals[] = {"pt"}; /* what transformers' save_pretrained writes */
  const rg_st_metadata meta = {keys, vals, 1};
  char *path = rg_path_join(dir, "model.safetensors");
  int rc = path ? rg_safetensors_write(path, t, n, &meta, fill_tensor, &src) : rg_error_set("%s: out of memory", dir);
  free(path);
  free(src.vals);
  free(src.row);
  free(t);
  return rc;
}

/* ---------------------------------------------------------------- tokenizer */

/* An HF source's file NAME copied from its directory; 1 if it has none. */
static int copy_source_file(const rg_model *m, const char *dir, const char *name) {
  char *from = rg_path_join(m->path, name), *to = rg_path_join(dir, name);
  int rc = !from || !to ? rg_error_set("%s: out of memory", dir) : !rg_path_exists(from) ? 1 : rg_copy_file(from, to);
  free(from);
  free(to);
  return rc;
}

static int write_tokenizer(const rg_model *m, const char *dir) {
  const bool hf = strcmp(m->format, "hf") == 0;
  cJSON *tok = NULL, *cfg = NULL;
  int rc = 0;
  if (hf) {
    /* The source's own files keep what refgeo's tokenizer does not model
     * (lstrip flags, model_max_length, ...). */
    rc = copy_source_file(m, dir, "tokenizer.json");
    if (rc == 1) rc = rg_error_set("%s: no tokenizer.json to copy", m->path);
    char *path = rc == 0 ? rg_path_join(m->path, "tokenizer_config.json") : NULL;
    if (rc == 0) cfg = path && rg_path_exists(path) ? rg_json_read_file(path) : cJSON_CreateObject();
    if (rc == 0 && !cfg) rc = -1;
    free(path);
  } else {
    rc = rg_tokenizer_export(m->tokenizer, m->chat_template, &tok, &cfg);
    if (rc == 0) rc = rg_hf_write_json(dir, "tokenizer.json", tok);
  }
  if (rc == 0 && hf && m->chat_template) {
    cJSON_DeleteItemFromObject(cfg, "chat_template"); /* also when it came from chat_template.jinja */
    if (!cJSON_AddStringToObject(cfg, "chat_template", m->chat_template)) rc = rg_error_set("%s: out of memory", dir);
  }
  if (rc == 0) rc = rg_hf_write_json(dir, "tokenizer_config.json", cfg);
  cJSON_Delete(tok);
  cJSON_Delete(cfg);
  return rc;
}

static int write_generation_config(const rg_model *m, const char *dir) {
  if (strcmp(m->format, "hf") == 0) {
    int rc = copy_source_file(m, dir, "generation_config.json");
    if (rc <= 0) return rc;
  }
  cJSON *g = cJSON_CreateObject();
  const int32_t bos = rg_tokenizer_bos(m->tokenizer), eos = rg_tokenizer_eos(m->tokenizer);
  int rc = g && add_id(g, "bos_token_id", bos) && add_id(g, "eos_token_id", eos) ? rg_hf_write_json(dir, "generation_config.json", g)
                                                                                  : rg_error_set("%s: out of memory", dir);
  cJSON_Delete(g);
  return rc;
}

/* ---------------------------------------------------------------- directory */

static int write_contents(const rg_weights *w, const char *dir, rg_hf_dtype dtype) {
  const rg_model *m = rg_weights_model(w);
  if (m->rope_freqs)
    return rg_error_set("%s: its RoPE scaling is a rope_freqs tensor, which cannot be written as config.json",
                        m->path);
  cJSON *cfg = rg_hf_config_json(&m->cfg, dtype == RG_HF_F32 ? "float32" : "bfloat16", rg_tokenizer_bos(m->tokenizer),
                                 rg_tokenizer_eos(m->tokenizer));
  if (!cfg) return -1;
  int rc = rg_hf_write_json(dir, "config.json", cfg);
  cJSON_Delete(cfg);
  if (rc == 0) rc = write_tokenizer(m, dir);
  if (rc == 0) rc = write_generation_config(m, dir);
  rg_fault_point("checkpoint-write"); /* tests: a kill with half a checkpoint written */
  if (rc == 0) rc = write_tensors(w, dir, dtype);
  return rc;
}

int rg_hf_write_model(const rg_weights *w, const char *dir, const rg_hf_write_opts *opts) {
  const rg_hf_dtype dtype = opts ? opts->dtype : RG_HF_BF16;
  if (rg_path_exists(dir)) return rg_error_set("%s: already exists (a checkpoint is never written over)", dir);
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  char *tmp = malloc(n + 5), *parent = malloc(n + 2);
  if (!tmp || !parent) {
    free(tmp);
    free(parent);
    return rg_error_set("%s: out of memory", dir);
  }
  snprintf(tmp, n + 5, "%.*s.tmp", (int)n, dir);
  snprintf(parent, n + 2, "%.*s", (int)n, dir);
  char *slash = strrchr(parent, '/');
  if (!slash) snprintf(parent, n + 2, ".");
  else slash[slash == parent ? 1 : 0] = '\0';
  int rc = rg_remove_flat_dir(tmp);
  if (rc == 0 && mkdir(tmp, 0777) != 0) rc = rg_error_set("%s: cannot create: %s", tmp, strerror(errno));
  if (rc == 0) {
    rc = write_contents(w, tmp, dtype);
    if (rc == 0) rc = rg_sync_dir(tmp);
    if (rc == 0 && rename(tmp, dir) != 0) rc = rg_error_set("%s: cannot rename to %s: %s", tmp, dir, strerror(errno));
    /* On failure DIR.tmp stays (its removal could replace the error being
     * reported); the next write of DIR removes it first. */
    if (rc == 0) rc = rg_sync_dir(parent);
  }
  free(tmp);
  free(parent);
  return rc;
}

int rg_hf_write_checkpoint(const rg_weights *w, const char *run_dir, long step, const rg_hf_write_opts *opts) {
  if (step < 0) return rg_error_set("%s: checkpoint step %ld is negative", run_dir, step);
  char name[48];
  snprintf(name, sizeof name, "checkpoint-%ld", step);
  char *dir = rg_path_join(run_dir, name);
  int rc = dir ? rg_hf_write_model(w, dir, opts) : rg_error_set("%s: out of memory", run_dir);
  free(dir);
  return rc;
}
