/* model_source.h: loader-private parts of rg_model (not for model users).
 *
 * model_load.c dispatches rg_model_load() to one of the two loaders below; each
 * fills every public field of rg_model and keeps its file handles in the
 * rg_model_source so that rg_model_free can release them.
 *
 * What rg_model_free frees (so loaders must malloc each of them): m->path,
 * m->id, m->format, m->chat_template, m->layers, m->tensors AND every
 * m->tensors[i].name (copy names, never point them into a file's strings),
 * m->tokenizer (rg_tokenizer_free), source->gguf (rg_gguf_close), each
 * source->shards[i] (rg_safetensors_close) and source->shards. model_load.c
 * allocates m, m->path and m->source before calling the loader.
 */
#ifndef RG_MODEL_SOURCE_H
#define RG_MODEL_SOURCE_H

#include "model/model.h"

typedef struct rg_gguf rg_gguf;
typedef struct rg_safetensors rg_safetensors;

struct rg_model_source {
  rg_gguf *gguf;            /* GGUF loader: the open file */
  rg_safetensors **shards;  /* HF loader: one per safetensors shard */
  int n_shards;
};

/* Each returns 0, or -1 with the error set (the caller frees M on failure). */
int rg_model_load_gguf(rg_model *m, const char *path); /* model_gguf.c */
int rg_model_load_hf(rg_model *m, const char *dir);    /* model_hf.c */

/* Shared by both loaders (model.c). */

/* The layer number N of a tensor named PREFIX "N." ... ("blk.", "model.layers."),
 * with *rest (if REST) set past the dot; -1 when NAME has another form. N is
 * decimal without leading zeros and at most INT_MAX, so two different names
 * never give the same layer and no number wraps around. */
int rg_layer_index(const char *name, const char *prefix, const char **rest);

/* Allocates m->layers for m->cfg.n_layers layers, but only after checking
 * that m->tensors (Hugging Face names) hold tensors for that many distinct
 * layers: the count comes from the file and must not size an allocation the
 * file cannot back (issue 17). COUNT_KEY names the count in the error, e.g.
 * "PATH: llama.block_count is 1000000000 but the weights hold tensors for 1
 * layer". */
int rg_model_alloc_layers(rg_model *m, const char *count_key);

#endif
