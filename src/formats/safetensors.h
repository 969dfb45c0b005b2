/* safetensors.h: reader for Hugging Face .safetensors files.
 *
 * Layout (huggingface/safetensors README):
 *   u64 little-endian N, then N bytes of UTF-8 JSON
 *     {"NAME": {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
 *      ..., "__metadata__": {"key": "value", ...}}
 *   (padded with trailing spaces), then the data area; offsets are relative to
 *   its start (byte 8 + N), shapes are row-major (last dimension contiguous).
 *
 * refgeo reads the float dtypes F32, F16 and BF16 (rg_dtype RG_F32/F16/BF16);
 * any other dtype is an error naming the tensor. Shapes are reversed into
 * ggml order, so a Linear weight stored as [out, in] has ne[0] = in.
 *
 * The file is memory-mapped read-only and tensors point into the map: they
 * (and their names) live as long as the rg_safetensors. Data are 8-byte
 * aligned when the writer padded the header to a multiple of 8, as the
 * reference implementation and rg_safetensors_write do; otherwise they may
 * be unaligned. Everything is validated at open: header length against the
 * file size, JSON well-formed and an object, dtype/shape/data_offsets
 * consistent, every tensor inside the data area, no two tensors overlapping.
 */
#ifndef RG_SAFETENSORS_H
#define RG_SAFETENSORS_H

#include <stdint.h>

#include "tensor/tensor.h"

typedef struct rg_safetensors rg_safetensors;

/* Opens and validates PATH. NULL with the error set on failure. */
rg_safetensors *rg_safetensors_open(const char *path);
void rg_safetensors_close(rg_safetensors *st);

const char *rg_safetensors_path(const rg_safetensors *st);

/* Tensors in header order. */
int rg_safetensors_n_tensors(const rg_safetensors *st);
const rg_tensor *rg_safetensors_tensor(const rg_safetensors *st, int i);
/* The tensor named NAME, or NULL (no error set). */
const rg_tensor *rg_safetensors_find(const rg_safetensors *st, const char *name);

/* The string value of KEY in "__metadata__", or NULL. */
const char *rg_safetensors_metadata(const rg_safetensors *st, const char *key);

/* The safetensors dtype name of an rg_dtype ("F32", "F16", "BF16"), NULL for
 * types safetensors files written by refgeo cannot hold. */
const char *rg_safetensors_dtype_name(int type);

#endif
