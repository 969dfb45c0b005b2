/* safetensors_write.c: single-file and sharded safetensors writers. */
#include "formats/safetensors_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "util/error.h"
#include "util/fileio.h"

/* Bytes handed to the fill callback at a time: big enough for fast sequential
 * writes, small enough to be negligible next to a model. */
enum { FILL_CHUNK = 4 << 20 };

/* The data size of T implied by its type and shape, or -1 (error set). */
static int tensor_bytes(const char *path, const rg_tensor *t, uint64_t *out) {
  const char *dtype = rg_safetensors_dtype_name(t->type);
  if (!dtype) return rg_error_set("%s: tensor '%s': type %d cannot be written (F32, F16, BF16 only)", path, t->name, t->type);
  if (t->n_dims < 1 || t->n_dims > RG_MAX_DIMS)
    return rg_error_set("%s: tensor '%s': n_dims %d out of range", path, t->name, t->n_dims);
  uint64_t n = (uint64_t)rg_dtype_get(t->type)->block_bytes;
  for (int d = 0; d < RG_MAX_DIMS; d++) {
    int64_t v = d < t->n_dims ? t->ne[d] : 1;
    if (v < 0 || (v > 0 && n > UINT64_MAX / (uint64_t)v))
      return rg_error_set("%s: tensor '%s': bad dimension %" PRId64, path, t->name, v);
    n *= (uint64_t)v;
  }
  *out = n;
  return 0;
}

/* The JSON header (unpadded), malloc'd; *data_bytes gets the data area size. */
static char *build_header(const char *path, const rg_tensor *t, int n, const rg_st_metadata *meta,
                          uint64_t *data_bytes) {
  cJSON *root = cJSON_CreateObject();
  char *text = NULL;
  uint64_t off = 0;
  if (!root) goto oom;
  if (meta && meta->n > 0) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    if (!m) goto oom;
    for (int i = 0; i < meta->n; i++)
      if (!cJSON_AddStringToObject(m, meta->keys[i], meta->values[i])) goto oom;
  }
  for (int i = 0; i < n; i++) {
    uint64_t bytes;
    if (tensor_bytes(path, &t[i], &bytes) != 0) goto fail;
    if (cJSON_GetObjectItemCaseSensitive(root, t[i].name)) {
      rg_error_set("%s: tensor '%s' given twice", path, t[i].name);
      goto fail;
    }
    /* Shape and offsets as raw text: cJSON would print integers above 2^31
     * through %g, which is exact only by luck. */
    char shape[RG_MAX_DIMS * 24 + 4], offsets[48];
    size_t k = (size_t)snprintf(shape, sizeof shape, "[");
    for (int d = t[i].n_dims - 1; d >= 0; d--)
      k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d == t[i].n_dims - 1 ? "" : ",", t[i].ne[d]);
    snprintf(shape + k, sizeof shape - k, "]");
    snprintf(offsets, sizeof offsets, "[%" PRIu64 ",%" PRIu64 "]", off, off + bytes);
    off += bytes;
    cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
    if (!e || !cJSON_AddStringToObject(e, "dtype", rg_safetensors_dtype_name(t[i].type)) ||
        !cJSON_AddRawToObject(e, "shape", shape) || !cJSON_AddRawToObject(e, "data_offsets", offsets))
      goto oom;
  }
  text = cJSON_PrintUnformatted(root);
  if (!text) goto oom;
  cJSON_Delete(root);
  *data_bytes = off;
  return text;
oom:
  rg_error_set("%s: out of memory building the header", path);
fail:
  cJSON_Delete(root);
  return NULL;
}

static int write_all(rg_atomic_file *f, const void *p, size_t len) {
  if (len && fwrite(p, 1, len, f->fp) != len) return rg_error_set("%s: write failed: %s", f->path, strerror(errno));
  return 0;
}

static int write_data(rg_atomic_file *f, const rg_tensor *t, int n, rg_st_fill_fn fill, void *ctx) {
  char *buf = fill ? malloc(FILL_CHUNK) : NULL;
  if (fill && !buf) return rg_error_set("%s: out of memory", f->path);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    uint64_t bytes;
    rc = tensor_bytes(f->path, &t[i], &bytes);
    if (rc != 0) break;
    if (!fill) {
      if (t[i].nbytes != bytes)
        rc = rg_error_set("%s: tensor '%s' has %zu bytes of data but its shape needs %" PRIu64, f->path, t[i].name,
                          t[i].nbytes, bytes);
      else
        rc = write_all(f, t[i].data, (size_t)bytes);
      continue;
    }
    for (uint64_t off = 0; off < bytes && rc == 0; off += FILL_CHUNK) {
      size_t len = (size_t)(bytes - off < FILL_CHUNK ? bytes - off : FILL_CHUNK);
      rc = fill(ctx, i, (size_t)off, buf, len);
      if (rc == 0) rc = write_all(f, buf, len);
    }
  }
  free(buf);
  return rc;
}

int rg_safetensors_write(const char *path, const rg_tensor *t, int n, const rg_st_metadata *meta,
                         rg_st_fill_fn fill, void *fill_ctx) {
  uint64_t data_bytes;
  char *json = build_header(path, t, n, meta, &data_bytes);
  if (!json) return -1;
  size_t len = strlen(json);
  size_t padded = (len + 7) / 8 * 8; /* 8 + padded is then a multiple of 8 */
  uint8_t prefix[8];
  for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  rg_atomic_file f;
  if (rg_atomic_open(&f, path) != 0) {
    free(json);
    return -1;
  }
  static const char spaces[8] = "        ";
  int rc = write_all(&f, prefix, 8);
  if (rc == 0) rc = write_all(&f, json, len);
  if (rc == 0) rc = write_all(&f, spaces, padded - len);
  free(json);
  if (rc == 0) rc = write_data(&f, t, n, fill, fill_ctx);
  if (rc != 0) {
    rg_atomic_abort(&f);
    return -1;
  }
  return rg_atomic_commit(&f);
}

/* ---------------------------------------------------------------- sharded */

/* Presents shard-local tensor indices to the caller's fill callback. */
typedef struct {
  rg_st_fill_fn fill;
  void *ctx;
  int first;
} shard_fill;

static int shard_fill_fn(void *ctx, int i, size_t offset, void *buf, size_t len) {
  shard_fill *s = ctx;
  return s->fill(s->ctx, s->first + i, offset, buf, len);
}

static int write_index(const char *dir, const rg_tensor *t, int n, const int *shard_of, int n_shards,
                       uint64_t total) {
  char *path = rg_path_join(dir, "model.safetensors.index.json");
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
  cJSON *map = root ? cJSON_AddObjectToObject(root, "weight_map") : NULL;
  char total_s[24], file[64];
  snprintf(total_s, sizeof total_s, "%" PRIu64, total);
  int rc = path && meta && map && cJSON_AddRawToObject(meta, "total_size", total_s) ? 0 : -1;
  for (int i = 0; i < n && rc == 0; i++) {
    snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", shard_of[i] + 1, n_shards);
    if (!cJSON_AddStringToObject(map, t[i].name, file)) rc = -1;
  }
  char *text = rc == 0 ? cJSON_Print(root) : NULL;
  if (!text) rc = rg_error_set("%s/model.safetensors.index.json: out of memory", dir);
  else rc = rg_write_file_atomic(path, text, strlen(text));
  free(text);
  cJSON_Delete(root);
  free(path);
  return rc;
}

int rg_safetensors_write_sharded(const char *dir, const rg_tensor *t, int n, const rg_st_shard_opts *opts) {
  size_t cap = n ? (size_t)n : 1;
  int *shard_of = malloc(cap * sizeof *shard_of);
  uint64_t *shard_bytes = calloc(cap, sizeof *shard_bytes); /* at most one shard per tensor */
  if (!shard_of || !shard_bytes) {
    free(shard_of);
    free(shard_bytes);
    return rg_error_set("%s: out of memory", dir);
  }
  /* Plan as transformers' split_torch_state_dict_into_shards does, in order.
   * No tensors still make one (empty) shard. */
  int n_shards = 1, rc = 0;
  uint64_t total = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    uint64_t bytes;
    rc = tensor_bytes(dir, &t[i], &bytes);
    if (rc == 0 && shard_bytes[n_shards - 1] > 0 && shard_bytes[n_shards - 1] + bytes > opts->max_shard_bytes)
      n_shards++;
    shard_bytes[n_shards - 1] += bytes;
    total += bytes;
    shard_of[i] = n_shards - 1;
  }
  char name[64];
  for (int s = 0, lo = 0; s < n_shards && rc == 0; s++) {
    int hi = lo;
    while (hi < n && shard_of[hi] == s) hi++;
    if (n_shards == 1) snprintf(name, sizeof name, "model.safetensors");
    else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
    char *path = rg_path_join(dir, name);
    if (!path) {
      rc = rg_error_set("%s: out of memory", dir);
      break;
    }
    shard_fill sf = {opts->fill, opts->fill_ctx, lo};
    rc = rg_safetensors_write(path, t + lo, hi - lo, opts->meta, opts->fill ? shard_fill_fn : NULL, &sf);
    if (rc == 0 && opts->progress)
      fprintf(opts->progress, "shard %d/%d: %s (%d tensors, %.1f MiB)\n", s + 1, n_shards, path, hi - lo,
              (double)shard_bytes[s] / (1 << 20));
    free(path);
    lo = hi;
  }
  if (rc == 0 && n_shards > 1) rc = write_index(dir, t, n, shard_of, n_shards, total);
  free(shard_of);
  free(shard_bytes);
  return rc;
}
