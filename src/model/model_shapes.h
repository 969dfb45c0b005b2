/* model_shapes.h: a model's tensors from its configuration alone.
 *
 * rg_model_shape_tensors lists the tensors a Llama-family model of config C
 * has, in transformers' state_dict order, with Hugging Face names, shapes
 * (ggml order) and dtype, but no data: what `refgeo synth-model` fills with
 * random values, and what a memory plan (`refgeo train --plan`) needs of a
 * model that is not on this machine.
 *
 * rg_model_load_shapes makes an rg_model of such tensors from a Hugging
 * Face config.json: every tensor's data is NULL (nbytes is what the file
 * would hold), there is no tokenizer, chat template or file map, and format
 * is "shapes". Only a plan backend (backend/plan.h) can prepare its
 * weights; nothing else may read them.
 */
#ifndef RG_MODEL_SHAPES_H
#define RG_MODEL_SHAPES_H

#include "formats/config.h"
#include "model/model.h"

/* *out: calloc'ed tensors (each name strdup'ed) of a model of config C in
 * TYPE (every tensor; the caller frees names and array), *n their count.
 * Returns 0 or -1 with the error set. */
int rg_model_shape_tensors(const rg_config *c, int type, rg_tensor **out, int *n);

/* The model CONFIG_JSON describes, in its torch_dtype (bfloat16, float16 or
 * float32; bfloat16 when absent), with no weights. NULL with the error set. */
rg_model *rg_model_load_shapes(const char *config_json);

#endif
