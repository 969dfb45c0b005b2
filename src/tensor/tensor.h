/* tensor.h: a named, typed view of weight data owned by a loaded file.
 *
 * Dimensions follow ggml's order: ne[0] is the innermost (contiguous) one.
 * A Linear weight of Hugging Face shape [out, in] therefore has
 * ne[0] = in, ne[1] = out. The data pointer points into a memory map (or a
 * buffer) owned by whoever produced the tensor; rg_tensor never frees it.
 */
#ifndef RG_TENSOR_H
#define RG_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

enum { RG_MAX_DIMS = 4 };

typedef struct {
  char *name;             /* owned by the container (gguf/safetensors/model) */
  int type;               /* rg_dtype */
  int n_dims;
  int64_t ne[RG_MAX_DIMS]; /* unused trailing dims are 1 */
  const void *data;
  size_t nbytes;
} rg_tensor;

/* True when every ne[d] is >= 0 and the product of the nonzero ones fits in
 * int64_t. Readers (gguf.c, safetensors.c) refuse any tensor for which this
 * is false, so the products below cannot overflow whatever the order: every
 * partial product is either 0 or a product of nonzero dimensions. Zeros are
 * skipped because an empty tensor ([0, 2^53, 2^53]) would otherwise pass
 * with its other dimensions unbounded (issue 17). */
static inline bool rg_tensor_shape_fits(const int64_t ne[RG_MAX_DIMS]) {
  int64_t product = 1;
  for (int d = 0; d < RG_MAX_DIMS; d++)
    if (ne[d] < 0 || (ne[d] != 0 && __builtin_mul_overflow(product, ne[d], &product))) return false;
  return true;
}

static inline int64_t rg_tensor_nelems(const rg_tensor *t) {
  return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Rows are the ne[0]-long runs; a [out, in] weight has ne[1]*ne[2]*ne[3] rows. */
static inline int64_t rg_tensor_nrows(const rg_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

#endif
