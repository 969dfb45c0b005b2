/* model_gguf.c: rg_model from a GGUF file (llama.cpp's converter output).
 *
 * The config comes from "<arch>.*" metadata keys, the tensors keep their
 * file dtype and point into the GGUF map, and every tensor is re-exposed
 * under its Hugging Face name so that callers never see GGUF names. Note that
 * for arch "llama" the converter permuted the rows of q_proj/k_proj so that
 * ggml can rotate adjacent pairs; cfg.rope_adjacent_pairs records that, and
 * the values of those two tensors differ from the HF checkpoint's by that
 * row permutation.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model_source.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

/* ---------------------------------------------------------------- config */

/* "<arch>.<suffix>" */
static void arch_key(char *buf, size_t size, const char *arch, const char *suffix) {
  snprintf(buf, size, "%s.%s", arch, suffix);
}

/* Reads an integer key into *out. A missing key leaves *out untouched and is
 * an error only when REQUIRED; present values must lie in [lo, INT_MAX]. */
static int get_int(const rg_gguf *g, const char *arch, const char *suffix, bool required, int lo, int *out) {
  char key[128];
  arch_key(key, sizeof key, arch, suffix);
  int64_t v;
  if (rg_gguf_find_key(g, key) < 0) {
    if (required) return rg_error_set("%s: missing metadata key %s", rg_gguf_path(g), key);
    return 0;
  }
  if (rg_gguf_get_i64(g, key, &v) != 0 || v < lo || v > INT_MAX)
    return rg_error_set("%s: metadata key %s must be an integer >= %d", rg_gguf_path(g), key, lo);
  *out = (int)v;
  return 0;
}

static int get_float(const rg_gguf *g, const char *arch, const char *suffix, bool required, float *out) {
  char key[128];
  arch_key(key, sizeof key, arch, suffix);
  double v;
  if (rg_gguf_find_key(g, key) < 0) {
    if (required) return rg_error_set("%s: missing metadata key %s", rg_gguf_path(g), key);
    return 0;
  }
  if (rg_gguf_get_f64(g, key, &v) != 0 || !(v > 0)) return rg_error_set("%s: metadata key %s must be a positive number", rg_gguf_path(g), key);
  *out = (float)v;
  return 0;
}

static bool str_is(const char *s, size_t len, const char *lit) { return len == strlen(lit) && memcmp(s, lit, len) == 0; }

/* <arch>.rope.scaling.type: "none", "linear" (factor), anything else is
 * unsupported. Llama-3.1 GGUFs carry no type; their scaling is the
 * rope_freqs.weight tensor (bound later). */
static int read_rope_scaling(const rg_gguf *g, rg_config *c) {
  const char *path = rg_gguf_path(g);
  char key[128];
  arch_key(key, sizeof key, c->arch, "rope.scaling.type");
  size_t len;
  const char *type = rg_gguf_get_str(g, key, &len);
  c->rope_scaling = RG_ROPE_SCALING_NONE;
  c->rope_factor = 1.0f;
  if (get_float(g, c->arch, "rope.scaling.factor", false, &c->rope_factor) != 0) return -1;
  if (get_int(g, c->arch, "rope.scaling.original_context_length", false, 1, &c->rope_orig_max_ctx) != 0) return -1;
  if (!type) {
    /* Older converters wrote only "<arch>.rope.scale_linear". */
    float linear = 0;
    if (get_float(g, c->arch, "rope.scale_linear", false, &linear) != 0) return -1;
    if (linear > 0 && linear != 1.0f) {
      c->rope_scaling = RG_ROPE_SCALING_LINEAR;
      c->rope_factor = linear;
    }
    return 0;
  }
  if (str_is(type, len, "none")) return 0;
  if (str_is(type, len, "linear")) {
    c->rope_scaling = RG_ROPE_SCALING_LINEAR;
    return 0;
  }
  return rg_error_set("%s: unsupported %s '%.*s' (supported: none, linear)", path, key, (int)len, type);
}

static int read_config(const rg_gguf *g, rg_config *c) {
  const char *path = rg_gguf_path(g);
  size_t len;
  const char *arch = rg_gguf_get_str(g, "general.architecture", &len);
  if (!arch) return rg_error_set("%s: missing metadata key general.architecture", path);
  if (!str_is(arch, len, "llama") && !str_is(arch, len, "mistral") && !str_is(arch, len, "qwen2"))
    return rg_error_set("%s: unsupported architecture '%.*s' (supported: llama, mistral, qwen2)", path,
                        (int)(len > 64 ? 64 : len), arch);
  memset(c, 0, sizeof *c);
  memcpy(c->arch, arch, len);
  const char *a = c->arch;

  if (get_int(g, a, "block_count", true, 1, &c->n_layers) != 0 ||
      get_int(g, a, "embedding_length", true, 1, &c->d_model) != 0 ||
      get_int(g, a, "feed_forward_length", true, 1, &c->d_ff) != 0 ||
      get_int(g, a, "attention.head_count", true, 1, &c->n_heads) != 0 ||
      get_int(g, a, "context_length", true, 1, &c->max_ctx) != 0)
    return -1;
  c->n_kv_heads = c->n_heads;
  if (get_int(g, a, "attention.head_count_kv", false, 1, &c->n_kv_heads) != 0) return -1;
  if (c->n_heads % c->n_kv_heads != 0)
    return rg_error_set("%s: %d attention heads are not a multiple of %d kv heads", path, c->n_heads, c->n_kv_heads);
  if (c->d_model % c->n_heads != 0)
    return rg_error_set("%s: embedding_length %d is not a multiple of head_count %d", path, c->d_model, c->n_heads);
  c->head_dim = c->d_model / c->n_heads;
  if (get_int(g, a, "attention.key_length", false, 1, &c->head_dim) != 0) return -1;
  int rope_dims = c->head_dim;
  if (get_int(g, a, "rope.dimension_count", false, 1, &rope_dims) != 0) return -1;
  if (rope_dims != c->head_dim)
    return rg_error_set("%s: %s.rope.dimension_count %d differs from the head size %d (partial RoPE is not supported)",
                        path, a, rope_dims, c->head_dim);

  if (get_float(g, a, "attention.layer_norm_rms_epsilon", true, &c->rms_eps) != 0) return -1;
  c->rope_theta = 10000.0f; /* llama.cpp's default when the key is absent */
  if (get_float(g, a, "rope.freq_base", false, &c->rope_theta) != 0) return -1;
  if (read_rope_scaling(g, c) != 0) return -1;
  if (get_int(g, a, "attention.sliding_window", false, 0, &c->sliding_window) != 0) return -1;

  rg_gguf_type et;
  int64_t n_vocab;
  if (rg_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_vocab) != 0 || et != RG_GGUF_STRING)
    return rg_error_set("%s: missing string array tokenizer.ggml.tokens", path);
  if (n_vocab < 1 || n_vocab > INT_MAX) return rg_error_set("%s: bad vocabulary size %lld", path, (long long)n_vocab);
  c->vocab_size = (int)n_vocab;

  /* llama.cpp converts llama/mistral with permuted q/k rows ("normal" RoPE on
   * adjacent pairs) and qwen2 unpermuted (NEOX rotate-half). */
  c->rope_adjacent_pairs = strcmp(a, "qwen2") != 0;
  c->tied_embeddings = rg_gguf_find_tensor(g, "output.weight") == NULL;
  c->attn_qkv_bias = rg_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
  return 0;
}

/* ---------------------------------------------------------------- names */

static const struct {
  const char *gguf, *hf;
} GLOBAL_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

static const struct {
  const char *gguf, *hf;
} LAYER_NAMES[] = {
    {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},       {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},  {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

enum { N_GLOBAL = sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0], N_LAYER = sizeof LAYER_NAMES / sizeof LAYER_NAMES[0] };

/* The Hugging Face name of a GGUF tensor, malloc'd. Names without an HF
 * counterpart (rope_freqs.weight, unknown extras, layer numbers that are not
 * canonical such as "blk.01." or "blk.4294967296.") keep their GGUF name, so
 * two GGUF names never map to one HF name. */
static char *hf_name(const char *gguf) {
  for (int i = 0; i < N_GLOBAL; i++)
    if (strcmp(gguf, GLOBAL_NAMES[i].gguf) == 0) return strdup(GLOBAL_NAMES[i].hf);
  const char *rest;
  const int layer = rg_layer_index(gguf, "blk.", &rest);
  if (layer >= 0) {
    for (int i = 0; i < N_LAYER; i++) {
      size_t n = strlen(LAYER_NAMES[i].gguf);
      const char *suffix = rest + n;
      if (strncmp(rest, LAYER_NAMES[i].gguf, n) != 0 || (strcmp(suffix, ".weight") != 0 && strcmp(suffix, ".bias") != 0))
        continue;
      size_t size = strlen(LAYER_NAMES[i].hf) + strlen(suffix) + 32;
      char *s = malloc(size);
      if (s) snprintf(s, size, "model.layers.%d.%s%s", layer, LAYER_NAMES[i].hf, suffix);
      return s;
    }
  }
  return strdup(gguf);
}

static int expose_tensors(rg_model *m, const rg_gguf *g) {
  int64_t n = rg_gguf_n_tensors(g);
  if (n > INT_MAX) return rg_error_set("%s: too many tensors (%lld)", m->path, (long long)n);
  m->tensors = calloc(n ? (size_t)n : 1, sizeof *m->tensors);
  if (!m->tensors) return rg_error_set("%s: out of memory", m->path);
  for (int64_t i = 0; i < n; i++) {
    m->tensors[i] = *rg_gguf_tensor(g, i);
    m->tensors[i].name = hf_name(rg_gguf_tensor(g, i)->name);
    m->n_tensors = (int)i + 1; /* so that rg_model_free frees the names made so far */
    if (!m->tensors[i].name) return rg_error_set("%s: out of memory", m->path);
  }
  return 0;
}

/* ---------------------------------------------------------------- binding */

/* "[576, 1536]" */
static void format_shape(char *buf, size_t size, const int64_t *ne, int n_dims) {
  size_t k = (size_t)snprintf(buf, size, "[%lld", (long long)ne[0]);
  for (int d = 1; d < n_dims && k < size; d++) k += (size_t)snprintf(buf + k, size - k, ", %lld", (long long)ne[d]);
  if (k < size) snprintf(buf + k, size - k, "]");
}

/* The model tensor for GGUF tensor NAME (same index in both lists), checked
 * against the shape [ne0, ne1] the config implies (ne1 = 1 for vectors).
 * Missing tensors are an error only when REQUIRED. */
static int bind(const rg_model *m, const rg_gguf *g, const char *name, int64_t ne0, int64_t ne1, bool required,
                const rg_tensor **out) {
  *out = NULL;
  const rg_tensor *gt = rg_gguf_find_tensor(g, name);
  if (!gt) return required ? rg_error_set("%s: missing tensor %s", m->path, name) : 0;
  const rg_tensor *t = &m->tensors[gt - rg_gguf_tensor(g, 0)];
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
    const int64_t want[RG_MAX_DIMS] = {ne0, ne1, 1, 1};
    char have_s[96], want_s[96];
    format_shape(have_s, sizeof have_s, t->ne, t->n_dims);
    format_shape(want_s, sizeof want_s, want, ne1 == 1 ? 1 : 2);
    return rg_error_set("%s: tensor %s has shape %s but the config implies %s", m->path, name, have_s, want_s);
  }
  const rg_dtype_info *info = rg_dtype_get(t->type);
  if (!info->can_dequantize)
    return rg_error_set("%s: tensor %s has type %s, which refgeo cannot convert to f32", m->path, name, info->name);
  *out = t;
  return 0;
}

static int bind_layer(rg_model *m, const rg_gguf *g, int il) {
  const rg_config *c = &m->cfg;
  const int64_t d = c->d_model, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
  rg_layer_weights *L = &m->layers[il];
  const bool bias = c->attn_qkv_bias;
  char name[64];
#define BIND(suffix, ne0, ne1, required, dst) \
  (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), bind(m, g, name, ne0, ne1, required, dst))
  if (BIND("attn_norm.weight", d, 1, true, &L->attn_norm) || BIND("attn_q.weight", d, q, true, &L->wq) ||
      BIND("attn_k.weight", d, kv, true, &L->wk) || BIND("attn_v.weight", d, kv, true, &L->wv) ||
      BIND("attn_output.weight", q, d, true, &L->wo) || BIND("attn_q.bias", q, 1, bias, &L->bq) ||
      BIND("attn_k.bias", kv, 1, bias, &L->bk) || BIND("attn_v.bias", kv, 1, bias, &L->bv) ||
      BIND("ffn_norm.weight", d, 1, true, &L->ffn_norm) || BIND("ffn_gate.weight", d, c->d_ff, true, &L->w_gate) ||
      BIND("ffn_up.weight", d, c->d_ff, true, &L->w_up) || BIND("ffn_down.weight", c->d_ff, d, true, &L->w_down))
    return -1;
#undef BIND
  return 0;
}

static int bind_weights(rg_model *m, const rg_gguf *g) {
  const rg_config *c = &m->cfg;
  if (bind(m, g, "token_embd.weight", c->d_model, c->vocab_size, true, &m->tok_embd) != 0 ||
      bind(m, g, "output_norm.weight", c->d_model, 1, true, &m->out_norm) != 0 ||
      bind(m, g, "output.weight", c->d_model, c->vocab_size, false, &m->lm_head) != 0 ||
      bind(m, g, "rope_freqs.weight", c->head_dim / 2, 1, false, &m->rope_freqs) != 0)
    return -1;
  if (!m->lm_head) m->lm_head = m->tok_embd;
  char count_key[64];
  arch_key(count_key, sizeof count_key, c->arch, "block_count");
  if (rg_model_alloc_layers(m, count_key) != 0) return -1;
  for (int il = 0; il < c->n_layers; il++)
    if (bind_layer(m, g, il) != 0) return -1;
  return 0;
}

/* ---------------------------------------------------------------- entry */

int rg_model_load_gguf(rg_model *m, const char *path) {
  rg_gguf *g = rg_gguf_open(path);
  if (!g) return -1;
  m->source->gguf = g; /* closed by rg_model_free */
  m->format = strdup("gguf");
  if (!m->format) return rg_error_set("%s: out of memory", path);
  if (rg_gguf_dup_optional_str(g, "general.name", &m->id) != 0) return -1;
  if (!m->id && !(m->id = strdup(path))) return rg_error_set("%s: out of memory", path);
  if (read_config(g, &m->cfg) != 0 || expose_tensors(m, g) != 0 || bind_weights(m, g) != 0) return -1;
  m->tokenizer = rg_tokenizer_from_gguf(g);
  if (!m->tokenizer) return -1;
  return rg_gguf_dup_optional_str(g, "tokenizer.chat_template", &m->chat_template);
}
