/* model.h: a loaded Llama-family chat model (weights, tokenizer, template).
 *
 * rg_model_load() takes either a .gguf file or a Hugging Face model directory
 * (config.json + model.safetensors or model.safetensors.index.json +
 * tokenizer.json [+ tokenizer_config.json]). Weights stay in their file dtype
 * inside read-only memory maps; nothing is converted at load time, so a 7B
 * bf16 model needs about 14 GiB of page cache and little private memory.
 *
 * Ownership: the rg_model owns its maps, tensors, tokenizer and strings;
 * rg_model_free releases all of them. Tensor pointers stay valid until then.
 * A loaded model never changes: training updates its prepared copies
 * (weights.h), so nothing that views the model can go stale.
 */
#ifndef RG_MODEL_H
#define RG_MODEL_H

#include "formats/config.h"
#include "tensor/tensor.h"

typedef struct rg_tokenizer rg_tokenizer;

typedef struct {
  const rg_tensor *attn_norm;        /* [d_model] */
  const rg_tensor *wq, *wk, *wv, *wo; /* Linear weights, ggml order [in, out] */
  const rg_tensor *bq, *bk, *bv;     /* Qwen2 biases, NULL otherwise */
  const rg_tensor *ffn_norm;         /* [d_model] */
  const rg_tensor *w_gate, *w_up, *w_down;
} rg_layer_weights;

typedef struct rg_model_source rg_model_source; /* loader-private */

typedef struct {
  char *path;            /* what was loaded */
  char *id;              /* general.name / directory basename */
  char *format;          /* "gguf" or "hf" */
  rg_config cfg;
  const rg_tensor *tok_embd;  /* [d_model, vocab] in ggml order */
  const rg_tensor *out_norm;  /* [d_model] */
  const rg_tensor *lm_head;   /* == tok_embd when tied */
  /* GGUF Llama-3.1 files store the llama3 RoPE scaling as per-pair frequency
   * divisors ("rope_freqs.weight", [head_dim/2] f32); NULL otherwise, in which
   * case cfg.rope_scaling describes the scaling. */
  const rg_tensor *rope_freqs;
  rg_layer_weights *layers;   /* n_layers */
  /* Every tensor of the model under its Hugging Face name
   * ("model.layers.0.self_attn.q_proj.weight"). */
  rg_tensor *tensors;
  int n_tensors;
  rg_tokenizer *tokenizer;
  char *chat_template;        /* the model's Jinja chat template, or NULL */
  rg_model_source *source;
  long long n_params;         /* elements over all tensors, summed (checked) at load */
} rg_model;

/* Loads PATH (GGUF file or HF directory). NULL with the error set on failure. */
rg_model *rg_model_load(const char *path);
void rg_model_free(rg_model *m);

/* The tensor with Hugging Face name NAME, or NULL. */
const rg_tensor *rg_model_find_tensor(const rg_model *m, const char *name);

/* Parameter count (elements over all tensors; a tied head counts once). */
long long rg_model_n_params(const rg_model *m);

#endif
