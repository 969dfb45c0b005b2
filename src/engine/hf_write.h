/* hf_write.h: a model's current weights saved as a Hugging Face directory.
 *
 * What the trainer's checkpoints are (docs/ARCHITECTURE.md, "Checkpoints
 * out"): RUN_DIR/checkpoint-<step>/ holding
 *   config.json             from the model's rg_config (llama, mistral,
 *                           qwen2 fields transformers reads; torch_dtype,
 *                           bos/eos ids of the tokenizer)
 *   model.safetensors       every tensor of the model (its current values,
 *                           rg_weights_export_download: with LoRA
 *                           adapters, W + (alpha / r) B A) under its HF name,
 *                           bf16 (round to nearest even) or f32; a tied head
 *                           is not written (tie_word_embeddings says so)
 *   tokenizer.json          an HF source's own file, copied; a GGUF source's
 *                           tokenizer exported (tokenizer_export.h)
 *   tokenizer_config.json   likewise, with "chat_template" set to the model's
 *                           template
 *   generation_config.json  an HF source's own, copied; else bos/eos ids
 * GGUF llama/mistral files hold q_proj/k_proj rows permuted for RoPE on
 * adjacent pairs (cfg.rope_adjacent_pairs); they are written un-permuted,
 * in the HF "rotate half" layout, so that transformers (and refgeo loading
 * the directory) compute the same model.
 *
 * Atomic: everything is written into DIR.tmp/ (a stale one, left by a
 * killed run, is removed first), which is renamed to DIR only when complete,
 * so DIR is either absent or whole. An existing DIR is an error: nothing is
 * ever written over.
 *
 * Ownership: the writers only read the weights and their model; they may be
 * called between optimizer updates. Memory: one tensor as float32 at a
 * time (plus the output dtype's chunk).
 */
#ifndef RG_HF_WRITE_H
#define RG_HF_WRITE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "engine/weights.h"

typedef enum { RG_HF_BF16 = 0, RG_HF_F32 } rg_hf_dtype;

typedef struct {
  rg_hf_dtype dtype; /* of model.safetensors; bf16 by default */
} rg_hf_write_opts;

/* Writes W's model with W's current weights as the HF directory DIR.
 * OPTS may be NULL (bf16). Returns 0, or -1 with the error set (DIR exists,
 * a SentencePiece GGUF tokenizer, a config transformers cannot express). */
int rg_hf_write_model(const rg_weights *w, const char *dir, const rg_hf_write_opts *opts);

/* rg_hf_write_model into RUN_DIR/checkpoint-<STEP> (RUN_DIR must exist). */
int rg_hf_write_checkpoint(const rg_weights *w, const char *run_dir, long step, const rg_hf_write_opts *opts);

/* config.json for C (torch_dtype TORCH_DTYPE, token ids < 0 written as
 * null), a new tree, or NULL with the error set. */
cJSON *rg_hf_config_json(const rg_config *c, const char *torch_dtype, int bos_id, int eos_id);

/* Writes J, pretty-printed, to DIR/NAME atomically. Returns 0 or -1. */
int rg_hf_write_json(const char *dir, const char *name, const cJSON *j);

#endif
