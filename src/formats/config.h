/* config.h: the hyperparameters of a Llama-family decoder.
 *
 * One struct covers Llama (1/2/3), Mistral (sliding window), Qwen2 (q/k/v
 * bias) and SmolLM2. It is filled either from GGUF metadata
 * ("<arch>.block_count", ...) or from a Hugging Face config.json.
 */
#ifndef RG_CONFIG_H
#define RG_CONFIG_H

#include <stdbool.h>

typedef enum {
  RG_ROPE_SCALING_NONE = 0,
  RG_ROPE_SCALING_LINEAR,
  RG_ROPE_SCALING_LLAMA3 /* Llama 3.1 frequency-dependent scaling */
} rg_rope_scaling;

typedef struct {
  char arch[32];     /* "llama", "mistral", "qwen2" */
  int n_layers;
  int d_model;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int d_ff;
  int vocab_size;
  int max_ctx;       /* max_position_embeddings / context_length */
  float rms_eps;
  float rope_theta;
  rg_rope_scaling rope_scaling;
  float rope_factor;
  float rope_low_freq_factor;   /* llama3 scaling */
  float rope_high_freq_factor;  /* llama3 scaling */
  int rope_orig_max_ctx;        /* llama3 scaling: original_max_position_embeddings */
  /* Pairs rotated by RoPE: false = HF "rotate half" (x[i], x[i+d/2]);
   * true = adjacent pairs (x[2i], x[2i+1]), which is what GGUF llama files
   * need because llama.cpp's converter permuted the q/k rows. Both give the
   * same attention output. */
  bool rope_adjacent_pairs;
  int sliding_window;           /* 0 = full attention */
  bool tied_embeddings;         /* lm_head shares the token embedding */
  bool attn_qkv_bias;           /* Qwen2 */
} rg_config;

#endif
