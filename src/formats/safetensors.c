/* safetensors.c: safetensors reader (see safetensors.h for the layout).
 *
 * The header is copied out of the map into a NUL-terminated buffer and parsed
 * with cJSON; the parsed tree is kept because tensor names and metadata
 * strings point into it. Tensor data stay in the map.
 */
#include "formats/safetensors.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* The reference implementation refuses headers above 100 MB
 * (safetensors/src/tensor.rs, MAX_HEADER_SIZE); a real one is a few tens of
 * kilobytes, so a larger value means a corrupt or hostile file. */
#define MAX_HEADER_BYTES 100000000ull

struct rg_safetensors {
  char *path;
  rg_mmap map;
  cJSON *header;        /* owns the tensor names and metadata strings */
  const cJSON *metadata; /* "__metadata__" object or NULL */
  int n_tensors;
  rg_tensor *tensors;
};

static const struct {
  const char *name;
  int type;
} DTYPES[] = {{"F32", RG_F32}, {"F16", RG_F16}, {"BF16", RG_BF16}};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

const char *rg_safetensors_dtype_name(int type) {
  for (int i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].type == type) return DTYPES[i].name;
  return NULL;
}

/* A JSON number that is an exact non-negative integer (doubles hold integers
 * exactly up to 2^53, far beyond any real offset). */
static bool json_u64(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d) return false;
  *out = (uint64_t)d;
  return true;
}

/* "[2, 3]" from a JSON shape array (HF order), for messages. */
static void format_json_shape(char *buf, size_t size, const cJSON *shape) {
  size_t k = (size_t)snprintf(buf, size, "[");
  int i = 0;
  for (const cJSON *d = shape ? shape->child : NULL; d && k < size; d = d->next, i++)
    k += (size_t)snprintf(buf + k, size - k, i ? ", %.0f" : "%.0f", cJSON_IsNumber(d) ? d->valuedouble : -1.0);
  if (k < size) snprintf(buf + k, size - k, "]");
}

/* Validates one header entry and fills T (data not yet resolved: the caller
 * points T->data at the data area plus *BEGIN). The data area starts at file
 * byte DATA_AT and holds DATA_SIZE bytes. */
static int parse_entry(const char *path, const cJSON *e, uint64_t data_at, uint64_t data_size, rg_tensor *t,
                       uint64_t *begin, uint64_t *end) {
  const char *name = e->string;
  if (!cJSON_IsObject(e)) return rg_error_set("%s: tensor '%s' entry is not a JSON object", path, name);
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsString(dtype)) return rg_error_set("%s: tensor '%s' has no string 'dtype'", path, name);
  if (!cJSON_IsArray(shape)) return rg_error_set("%s: tensor '%s' has no array 'shape'", path, name);
  if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_u64(offs->child, begin) ||
      !json_u64(offs->child->next, end) || *begin > *end)
    return rg_error_set("%s: tensor '%s' data_offsets must be [begin, end] with 0 <= begin <= end", path, name);

  t->type = -1;
  for (int i = 0; i < N_DTYPES; i++)
    if (strcmp(dtype->valuestring, DTYPES[i].name) == 0) t->type = DTYPES[i].type;
  if (t->type < 0)
    return rg_error_set("%s: tensor '%s' has dtype %s (refgeo reads F32, F16 and BF16)", path, name,
                        dtype->valuestring);

  int rank = cJSON_GetArraySize(shape);
  if (rank > RG_MAX_DIMS)
    return rg_error_set("%s: tensor '%s' has %d dimensions (at most %d supported)", path, name, rank, RG_MAX_DIMS);
  t->n_dims = rank > 0 ? rank : 1; /* a scalar is a one-element vector */
  for (int d = 0; d < RG_MAX_DIMS; d++) t->ne[d] = 1;
  int k = 0;
  for (const cJSON *dim = shape->child; dim; dim = dim->next, k++) {
    uint64_t v;
    if (!json_u64(dim, &v))
      return rg_error_set("%s: tensor '%s' shape entries must be non-negative integers", path, name);
    t->ne[rank - 1 - k] = (int64_t)v; /* row-major [.., inner] -> ggml ne[0] = inner; v <= 2^53 */
  }
  char shape_s[128];
  format_json_shape(shape_s, sizeof shape_s, shape);
  /* Bounded even when a zero dimension makes the tensor empty, so that
   * rg_tensor_nelems and rg_tensor_nrows can never overflow (issue 17). */
  if (!rg_tensor_shape_fits(t->ne))
    return rg_error_set("%s: tensor '%s' shape overflows: %s has more than 2^63 elements, zero dimensions aside", path,
                        name, shape_s);
  uint64_t elem_bytes = (uint64_t)rg_dtype_get(t->type)->block_bytes, bytes;
  if (__builtin_mul_overflow((uint64_t)rg_tensor_nelems(t), elem_bytes, &bytes) || bytes != *end - *begin)
    return rg_error_set("%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] do not match dtype %s shape %s", path,
                        name, *begin, *end, dtype->valuestring, shape_s);
  if (*end > data_size)
    return rg_error_set("%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] extend past the data area (%" PRIu64
                        " bytes), to file byte %" PRIu64 " (the file has %" PRIu64 " bytes)",
                        path, name, *begin, *end, data_size, data_at + *end, data_at + data_size);
  t->nbytes = (size_t)(*end - *begin);
  return 0;
}

typedef struct {
  uint64_t begin, end;
  int index;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors may share bytes (the reference implementation demands the
 * same). Empty tensors occupy nothing and never overlap. */
static int check_overlaps(const rg_safetensors *st, span *spans, int n) {
  qsort(spans, (size_t)n, sizeof *spans, span_cmp);
  int prev = -1;
  for (int i = 0; i < n; i++) {
    if (spans[i].begin == spans[i].end) continue;
    if (prev >= 0 && spans[i].begin < spans[prev].end)
      return rg_error_set("%s: tensors '%s' and '%s' overlap (data_offsets [%" PRIu64 ",%" PRIu64 "] and [%" PRIu64
                          ",%" PRIu64 "])",
                          st->path, st->tensors[spans[prev].index].name, st->tensors[spans[i].index].name,
                          spans[prev].begin, spans[prev].end, spans[i].begin, spans[i].end);
    prev = i;
  }
  return 0;
}

/* Parses the JSON header; DATA_AT is the file offset of the data area. */
static int parse_header(rg_safetensors *st, const char *text, size_t len, size_t data_at) {
  const char *path = st->path;
  const char *end = NULL;
  bool out_of_memory;
  st->header = rg_json_parse(text, len, &end, &out_of_memory);
  if (!st->header) {
    if (out_of_memory) return rg_error_set("%s: out of memory parsing the header", path);
    size_t near = end && end >= text ? (size_t)(end - text) : 0;
    return rg_error_set("%s: header is not valid JSON (near byte %zu)", path, 8 + near);
  }
  for (const char *p = end; p < text + len; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      return rg_error_set("%s: header has trailing bytes after the JSON object (at byte %zu)", path,
                          8 + (size_t)(p - text));
  if (!cJSON_IsObject(st->header)) return rg_error_set("%s: header is not a JSON object", path);

  int n = 0;
  for (const cJSON *e = st->header->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) {
      if (!cJSON_IsObject(e)) return rg_error_set("%s: __metadata__ is not a JSON object", path);
      st->metadata = e;
    } else if (n == INT32_MAX) {
      return rg_error_set("%s: too many tensors", path);
    } else {
      n++;
    }
  }
  st->tensors = calloc(n ? (size_t)n : 1, sizeof *st->tensors);
  span *spans = calloc(n ? (size_t)n : 1, sizeof *spans);
  if (!st->tensors || !spans) {
    free(spans);
    return rg_error_set("%s: out of memory for %d tensors", path, n);
  }
  uint64_t data_size = st->map.size - data_at;
  const uint8_t *data = (const uint8_t *)st->map.data + data_at;
  int rc = 0;
  for (const cJSON *e = st->header->child; e && rc == 0; e = e->next) {
    if (e == st->metadata) continue;
    rg_tensor *t = &st->tensors[st->n_tensors];
    t->name = e->string;
    span *s = &spans[st->n_tensors];
    s->index = st->n_tensors;
    rc = parse_entry(path, e, data_at, data_size, t, &s->begin, &s->end);
    if (rc == 0) {
      t->data = data + s->begin;
      if (rg_safetensors_find(st, t->name)) rc = rg_error_set("%s: tensor '%s' appears twice", path, t->name);
      st->n_tensors++;
    }
  }
  if (rc == 0) rc = check_overlaps(st, spans, st->n_tensors);
  free(spans);
  return rc;
}

rg_safetensors *rg_safetensors_open(const char *path) {
  rg_safetensors *st = calloc(1, sizeof *st);
  if (!st || !(st->path = strdup(path))) {
    free(st);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  if (rg_mmap_open(path, &st->map) != 0) goto fail;
  if (st->map.size < 8) {
    rg_error_set("%s: file is %zu bytes, too short for the 8-byte header length", path, st->map.size);
    goto fail;
  }
  const uint8_t *b = st->map.data;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | b[i]; /* little-endian whatever the host */
  if (n > st->map.size - 8) {
    rg_error_set("%s: header length %" PRIu64 " exceeds file size %zu", path, n, st->map.size);
    goto fail;
  }
  if (n < 2) { /* "{}" is the smallest valid header */
    rg_error_set("%s: header length %" PRIu64 " is too small for a JSON object", path, n);
    goto fail;
  }
  if (n > MAX_HEADER_BYTES) {
    rg_error_set("%s: header length %" PRIu64 " exceeds the %llu-byte limit", path, n, MAX_HEADER_BYTES);
    goto fail;
  }
  char *text = malloc((size_t)n + 1);
  if (!text) {
    rg_error_set("%s: out of memory for a %" PRIu64 "-byte header", path, n);
    goto fail;
  }
  memcpy(text, b + 8, (size_t)n);
  text[n] = '\0';
  int rc = parse_header(st, text, (size_t)n, 8 + (size_t)n);
  free(text);
  if (rc != 0) goto fail;
  return st;
fail:
  rg_safetensors_close(st);
  return NULL;
}

void rg_safetensors_close(rg_safetensors *st) {
  if (!st) return;
  rg_mmap_close(&st->map);
  cJSON_Delete(st->header);
  free(st->tensors);
  free(st->path);
  free(st);
}

const char *rg_safetensors_path(const rg_safetensors *st) { return st->path; }
int rg_safetensors_n_tensors(const rg_safetensors *st) { return st->n_tensors; }

const rg_tensor *rg_safetensors_tensor(const rg_safetensors *st, int i) {
  return i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const rg_tensor *rg_safetensors_find(const rg_safetensors *st, const char *name) {
  for (int i = 0; i < st->n_tensors; i++)
    if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
  return NULL;
}

const char *rg_safetensors_metadata(const rg_safetensors *st, const char *key) {
  const cJSON *v = st->metadata ? cJSON_GetObjectItemCaseSensitive(st->metadata, key) : NULL;
  return cJSON_IsString(v) ? v->valuestring : NULL;
}
