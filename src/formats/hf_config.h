/* hf_config.h: a Hugging Face config.json -> rg_config.
 *
 * Supported model_type values: "llama" (SmolLM2, Llama 1-3), "mistral" and
 * "qwen2". Required keys: model_type, hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, rms_norm_eps,
 * max_position_embeddings, vocab_size. Optional keys and their defaults
 * (transformers' config classes):
 *   num_key_value_heads  = num_attention_heads
 *   head_dim             = hidden_size / num_attention_heads (null too)
 *   rope_theta           = 10000
 *   tie_word_embeddings  = false
 *   sliding_window       = 0 (null, or use_sliding_window false)
 *   attention_bias       = false (qwen2 always has q/k/v biases)
 * RoPE parameters are read from either form transformers has used:
 * "rope_theta" + "rope_scaling" {rope_type|type, factor, ...} at top level
 * (configs written before transformers 5, i.e. most Hub models), or
 * "rope_parameters" {rope_type, rope_theta, factor, ...} (transformers 5).
 * Scaling types: default/none, linear (factor), llama3 (factor,
 * low_freq_factor, high_freq_factor, original_max_position_embeddings).
 * rope_adjacent_pairs is false: HF weights use "rotate half".
 *
 * Features refgeo's forward pass does not implement (another hidden_act than
 * silu, mlp_bias, Llama's attention_bias which also adds an o_proj bias,
 * other RoPE scaling types, Qwen2 use_sliding_window) are errors rather than
 * silently wrong results.
 */
#ifndef RG_HF_CONFIG_H
#define RG_HF_CONFIG_H

#include "formats/config.h"

/* Reads and parses the config.json at PATH. Errors read
 * "PATH: missing key 'hidden_size'". Returns 0 or -1 with the error set. */
int rg_hf_config_load(const char *path, rg_config *cfg);

/* Parses config.json TEXT; PATH only names the file in error messages. */
int rg_hf_config_parse(const char *text, const char *path, rg_config *cfg);

#endif
