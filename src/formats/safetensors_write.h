/* safetensors_write.h: writing .safetensors files, single or sharded.
 *
 * The header lists tensors in the given order with consecutive
 * data_offsets and is padded with spaces so that the data area starts at a
 * multiple of 8 bytes, as the reference implementation pads it. Files are
 * written atomically (util/fileio.h): a killed run leaves no partial file.
 *
 * Tensor data come either from each rg_tensor's data pointer or, for data
 * too large to hold in memory (a synthetic 7B model), from a fill callback
 * asked for consecutive chunks while the file is written, so only one chunk
 * is ever in memory. Only the dtypes F32, F16 and BF16 can be written.
 */
#ifndef RG_SAFETENSORS_WRITE_H
#define RG_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdio.h>

#include "tensor/tensor.h"

/* Writes bytes [offset, offset + len) of tensor I's data into BUF. Returns 0,
 * or -1 with the error set (the file being written is then discarded). */
typedef int (*rg_st_fill_fn)(void *ctx, int i, size_t offset, void *buf, size_t len);

/* "__metadata__" string pairs (transformers writes {"format": "pt"}). */
typedef struct {
  const char *const *keys;
  const char *const *values;
  int n;
} rg_st_metadata;

/* Writes tensors T[0..n-1] to PATH. T[i].name, type, n_dims and ne describe
 * each tensor (ggml order; reversed into the file's row-major shape). With
 * FILL NULL, T[i].data must hold T[i].nbytes bytes, which must match the
 * shape; otherwise data and nbytes are ignored and FILL supplies the bytes.
 * META may be NULL. Returns 0 or -1 with the error set. */
int rg_safetensors_write(const char *path, const rg_tensor *t, int n, const rg_st_metadata *meta,
                         rg_st_fill_fn fill, void *fill_ctx);

typedef struct {
  size_t max_shard_bytes;   /* tensor bytes per shard (a larger tensor gets a shard of its own) */
  const rg_st_metadata *meta; /* written into every shard; may be NULL */
  rg_st_fill_fn fill;       /* as for rg_safetensors_write; NULL: copy T[i].data */
  void *fill_ctx;
  FILE *progress;           /* non-NULL: one line per shard written */
} rg_st_shard_opts;

/* Writes T[0..n-1] into directory DIR split the way transformers'
 * save_pretrained(max_shard_size=...) splits: tensors in order, a new shard
 * starts when the next tensor would push the current one past
 * max_shard_bytes. Shards are named model-00001-of-0000K.safetensors and
 * model.safetensors.index.json gets {"metadata": {"total_size": BYTES},
 * "weight_map": {NAME: FILE}}; it is written last, so its presence means the
 * set is complete. When everything fits in one shard, the result is a single
 * model.safetensors and no index, as transformers does. DIR must exist. */
int rg_safetensors_write_sharded(const char *dir, const rg_tensor *t, int n, const rg_st_shard_opts *opts);

#endif
