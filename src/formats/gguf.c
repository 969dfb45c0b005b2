/* gguf.c: GGUF v2/v3 reader (see gguf.h for the layout).
 *
 * The whole file is memory-mapped; parsing walks it with a bounds-checked
 * cursor, so a corrupt or truncated file can never make us read outside the
 * map. Keys and tensor names are copied into NUL-terminated strings; every
 * other value (string bodies, array elements, tensor data) stays in the map.
 */
#include "formats/gguf.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"

enum {
  GGUF_MAGIC = 0x46554747, /* "GGUF" read as a little-endian u32 */
  GGUF_DEFAULT_ALIGNMENT = 32
};

typedef struct {
  char *key;
  rg_gguf_type type;
  /* Scalars: the value's bytes. Strings: the u64 length field. Arrays: the
   * first element. All point into the map. */
  const uint8_t *val;
  rg_gguf_type elem_type; /* arrays */
  int64_t count;          /* arrays */
  size_t *str_offs;       /* string arrays: map offset of each element's length field */
} gguf_kv;

struct rg_gguf {
  char *path;
  rg_mmap map;
  int version;
  int64_t n_kv;
  gguf_kv *kvs;
  int64_t n_tensors;
  rg_tensor *tensors;
};

/* ---------------------------------------------------------------- cursor */

typedef struct {
  const uint8_t *base;
  size_t size;
  size_t pos;
  const char *path;
} cursor;

static int need(cursor *c, size_t n) {
  if (n > c->size - c->pos)
    return rg_error_set("%s: truncated header (needs %zu bytes at offset %zu)", c->path, n, c->pos);
  return 0;
}

static int read_bytes(cursor *c, void *out, size_t n) {
  if (need(c, n) != 0) return -1;
  memcpy(out, c->base + c->pos, n);
  c->pos += n;
  return 0;
}

static int read_u32(cursor *c, uint32_t *v) { return read_bytes(c, v, sizeof *v); }
static int read_u64(cursor *c, uint64_t *v) { return read_bytes(c, v, sizeof *v); }

/* A gguf_string: checks that its body lies inside the file and returns the
 * map offset of the body and its length. */
static int read_string(cursor *c, size_t *body, uint64_t *len) {
  size_t at = c->pos;
  if (read_u64(c, len) != 0) return -1;
  if (*len > c->size - c->pos)
    return rg_error_set("%s: string at offset %zu has length %" PRIu64 ", past the end of the file (size %zu)",
                        c->path, at, *len, c->size);
  *body = c->pos;
  c->pos += (size_t)*len;
  return 0;
}

static char *dup_string(cursor *c, const char *what) {
  size_t body = 0;
  uint64_t len;
  if (read_string(c, &body, &len) != 0) return NULL;
  char *s = malloc((size_t)len + 1);
  if (!s) {
    rg_error_set("%s: out of memory reading a %s of %" PRIu64 " bytes", c->path, what, len);
    return NULL;
  }
  memcpy(s, c->base + body, (size_t)len);
  s[len] = '\0';
  return s;
}

/* ---------------------------------------------------------------- values */

/* Bytes of one scalar of TYPE; 0 for strings, arrays and unknown types. */
static size_t scalar_size(uint32_t type) {
  switch (type) {
  case RG_GGUF_U8: case RG_GGUF_I8: case RG_GGUF_BOOL: return 1;
  case RG_GGUF_U16: case RG_GGUF_I16: return 2;
  case RG_GGUF_U32: case RG_GGUF_I32: case RG_GGUF_F32: return 4;
  case RG_GGUF_U64: case RG_GGUF_I64: case RG_GGUF_F64: return 8;
  default: return 0;
  }
}

static int read_array(cursor *c, gguf_kv *kv) {
  uint32_t et;
  uint64_t count;
  if (read_u32(c, &et) != 0 || read_u64(c, &count) != 0) return -1;
  kv->elem_type = (rg_gguf_type)et;
  kv->val = c->base + c->pos;
  size_t remaining = c->size - c->pos;
  if (et == RG_GGUF_STRING) {
    /* Each element needs at least its 8-byte length field. */
    if (count > remaining / 8)
      return rg_error_set("%s: array '%s' claims %" PRIu64 " strings, more than the file can hold", c->path,
                          kv->key, count);
    kv->str_offs = malloc(sizeof *kv->str_offs * (count ? (size_t)count : 1));
    if (!kv->str_offs) return rg_error_set("%s: out of memory for array '%s'", c->path, kv->key);
    for (uint64_t i = 0; i < count; i++) {
      size_t body = 0;
      uint64_t len;
      kv->str_offs[i] = c->pos;
      if (read_string(c, &body, &len) != 0) return -1;
    }
  } else {
    size_t es = scalar_size(et);
    if (es == 0) return rg_error_set("%s: array '%s' has unsupported element type %" PRIu32, c->path, kv->key, et);
    if (count > remaining / es)
      return rg_error_set("%s: array '%s' claims %" PRIu64 " elements of %zu bytes, past the end of the file (size %zu)",
                          c->path, kv->key, count, es, c->size);
    c->pos += (size_t)count * es;
  }
  kv->count = (int64_t)count;
  return 0;
}

static int read_kv(cursor *c, gguf_kv *kv) {
  kv->key = dup_string(c, "key");
  if (!kv->key) return -1;
  uint32_t type;
  if (read_u32(c, &type) != 0) return -1;
  kv->type = (rg_gguf_type)type;
  kv->val = c->base + c->pos;
  if (type == RG_GGUF_STRING) {
    size_t body = 0;
    uint64_t len;
    return read_string(c, &body, &len);
  }
  if (type == RG_GGUF_ARRAY) return read_array(c, kv);
  size_t sz = scalar_size(type);
  if (sz == 0) return rg_error_set("%s: key '%s' has unknown value type %" PRIu32, c->path, kv->key, type);
  if (need(c, sz) != 0) return -1;
  c->pos += sz;
  return 0;
}

static const gguf_kv *find_kv(const rg_gguf *g, const char *key) {
  int64_t i = rg_gguf_find_key(g, key);
  return i < 0 ? NULL : &g->kvs[i];
}

/* Reads an integer or bool scalar of any width. */
static int scalar_to_i64(rg_gguf_type type, const uint8_t *p, int64_t *out) {
  switch (type) {
  case RG_GGUF_U8: case RG_GGUF_BOOL: { uint8_t v; memcpy(&v, p, 1); *out = v; return 0; }
  case RG_GGUF_I8: { int8_t v; memcpy(&v, p, 1); *out = v; return 0; }
  case RG_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
  case RG_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
  case RG_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
  case RG_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
  case RG_GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return 0; }
  case RG_GGUF_U64: {
    uint64_t v;
    memcpy(&v, p, 8);
    if (v > INT64_MAX) return -1;
    *out = (int64_t)v;
    return 0;
  }
  default: return -1;
  }
}

/* ---------------------------------------------------------------- tensors */

/* Errors name the tensor and the file byte where its info starts. */
static int read_tensor_info(rg_gguf *g, cursor *c, rg_tensor *t, uint64_t *offset) {
  const size_t at = c->pos;
  t->name = dup_string(c, "tensor name");
  if (!t->name) return -1;
  uint32_t n_dims, type;
  if (read_u32(c, &n_dims) != 0) return -1;
  if (n_dims == 0 || n_dims > RG_MAX_DIMS)
    return rg_error_set("%s: tensor '%s' has %" PRIu32 " dimensions (supported: 1 to %d; tensor info at byte %zu)",
                        g->path, t->name, n_dims, RG_MAX_DIMS, at);
  t->n_dims = (int)n_dims;
  for (int d = 0; d < RG_MAX_DIMS; d++) {
    uint64_t ne = 1;
    if (d < t->n_dims && read_u64(c, &ne) != 0) return -1;
    if (ne == 0 || ne > INT64_MAX)
      return rg_error_set("%s: tensor '%s' has bad dimension ne[%d] = %" PRIu64 " (tensor info at byte %zu)", g->path,
                          t->name, d, ne, at);
    t->ne[d] = (int64_t)ne;
  }
  if (!rg_tensor_shape_fits(t->ne))
    return rg_error_set("%s: tensor '%s' has more than 2^63 elements ([%" PRId64 ", %" PRId64 ", %" PRId64
                        ", %" PRId64 "]; tensor info at byte %zu)",
                        g->path, t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], at);
  if (read_u32(c, &type) != 0 || read_u64(c, offset) != 0) return -1;
  const rg_dtype_info *info = rg_dtype_get((int)type);
  if (!info)
    return rg_error_set("%s: tensor '%s' has unknown type %" PRIu32 " (tensor info at byte %zu)", g->path, t->name,
                        type, at);
  t->type = (int)type;
  if (t->ne[0] % info->block_elems != 0)
    return rg_error_set("%s: tensor '%s' has ne[0] = %" PRId64 ", not a multiple of the %s block size %d (tensor info "
                        "at byte %zu)",
                        g->path, t->name, t->ne[0], info->name, info->block_elems, at);
  /* Both products are checked: unchecked, ne[0] = 2^62 + 16 f32 elements made
   * a 64-byte row that fit in the file (issue 17). */
  size_t row = rg_dtype_row_bytes(t->type, t->ne[0]);
  if (row == 0 || __builtin_mul_overflow(row, (uint64_t)rg_tensor_nrows(t), &t->nbytes))
    return rg_error_set("%s: tensor '%s' (%s, %" PRId64 " x %" PRId64
                        " elements) needs more than 2^64 bytes (tensor info at byte %zu)",
                        g->path, t->name, info->name, t->ne[0], rg_tensor_nrows(t), at);
  return 0;
}

/* Checks each tensor's alignment and extent, then points it into the map;
 * the extent [begin, end) is computed with checked additions, so no offset
 * can wrap around into the file. */
static int place_tensors(rg_gguf *g, size_t data_start, size_t alignment, const uint64_t *offsets) {
  size_t size = g->map.size;
  for (int64_t i = 0; i < g->n_tensors; i++) {
    rg_tensor *t = &g->tensors[i];
    uint64_t off = offsets[i];
    if (off % alignment != 0)
      return rg_error_set("%s: tensor '%s' data offset %" PRIu64 " is not a multiple of the alignment %zu", g->path,
                          t->name, off, alignment);
    uint64_t begin, end;
    if (__builtin_add_overflow((uint64_t)data_start, off, &begin) || __builtin_add_overflow(begin, t->nbytes, &end))
      return rg_error_set("%s: tensor '%s' data offset %" PRIu64 " plus its %zu bytes is past any file size", g->path,
                          t->name, off, t->nbytes);
    if (end > size)
      return rg_error_set("%s: tensor '%s' data [%" PRIu64 ", %" PRIu64 ") runs past the end of the file (size %zu)",
                          g->path, t->name, begin, end, size);
    t->data = (const uint8_t *)g->map.data + begin;
  }
  return 0;
}

/* ---------------------------------------------------------------- open */

static int parse(rg_gguf *g) {
  cursor c = {g->map.data, g->map.size, 0, g->path};
  uint32_t magic, version;
  if (read_u32(&c, &magic) != 0) return -1;
  if (magic != GGUF_MAGIC) return rg_error_set("%s: bad magic 0x%08" PRIx32 " (not a GGUF file)", g->path, magic);
  if (read_u32(&c, &version) != 0) return -1;
  if (version != 2 && version != 3) return rg_error_set("%s: unsupported GGUF version %" PRIu32, g->path, version);
  g->version = (int)version;

  uint64_t n_tensors, n_kv;
  if (read_u64(&c, &n_tensors) != 0 || read_u64(&c, &n_kv) != 0) return -1;
  /* Smallest possible entries: a kv is an empty key (8) + type (4) + a 1-byte
   * value; a tensor info is an empty name (8) + n_dims (4) + one ne (8) +
   * type (4) + offset (8). Larger counts cannot fit, whatever the contents. */
  size_t left = c.size - c.pos;
  if (n_kv > left / 13)
    return rg_error_set("%s: n_kv = %" PRIu64 " does not fit in the file (size %zu; truncated or corrupt header)",
                        g->path, n_kv, c.size);
  if (n_tensors > left / 32)
    return rg_error_set("%s: n_tensors = %" PRIu64 " does not fit in the file (size %zu; truncated or corrupt header)",
                        g->path, n_tensors, c.size);

  g->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
  if (!g->kvs) return rg_error_set("%s: out of memory", g->path);
  for (uint64_t i = 0; i < n_kv; i++) {
    g->n_kv = (int64_t)i + 1; /* so that close() frees what was read so far */
    if (read_kv(&c, &g->kvs[i]) != 0) return -1;
  }

  size_t alignment = GGUF_DEFAULT_ALIGNMENT;
  const gguf_kv *akv = find_kv(g, "general.alignment");
  if (akv) {
    int64_t a;
    if (akv->type != RG_GGUF_U32 || scalar_to_i64(akv->type, akv->val, &a) != 0 || a == 0 || (a & (a - 1)) != 0)
      return rg_error_set("%s: general.alignment must be a power-of-two u32", g->path);
    alignment = (size_t)a;
  }

  g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
  uint64_t *offsets = malloc(sizeof *offsets * (n_tensors ? (size_t)n_tensors : 1));
  if (!g->tensors || !offsets) {
    free(offsets);
    return rg_error_set("%s: out of memory", g->path);
  }
  int rc = 0;
  for (uint64_t i = 0; i < n_tensors && rc == 0; i++) {
    g->n_tensors = (int64_t)i + 1;
    rc = read_tensor_info(g, &c, &g->tensors[i], &offsets[i]);
    for (uint64_t j = 0; j < i && rc == 0; j++)
      if (strcmp(g->tensors[j].name, g->tensors[i].name) == 0)
        rc = rg_error_set("%s: duplicate tensor name '%s'", g->path, g->tensors[i].name);
  }
  if (rc == 0) {
    size_t data_start = c.pos + (alignment - c.pos % alignment) % alignment;
    rc = place_tensors(g, data_start, alignment, offsets);
  }
  free(offsets);
  return rc;
}

rg_gguf *rg_gguf_open(const char *path) {
  rg_gguf *g = calloc(1, sizeof *g);
  if (!g || !(g->path = strdup(path))) {
    free(g);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  if (rg_mmap_open(path, &g->map) != 0 || parse(g) != 0) {
    rg_gguf_close(g);
    return NULL;
  }
  return g;
}

void rg_gguf_close(rg_gguf *g) {
  if (!g) return;
  for (int64_t i = 0; i < g->n_kv; i++) {
    free(g->kvs[i].key);
    free(g->kvs[i].str_offs);
  }
  free(g->kvs);
  for (int64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
  free(g->tensors);
  rg_mmap_close(&g->map);
  free(g->path);
  free(g);
}

const char *rg_gguf_path(const rg_gguf *g) { return g->path; }
int rg_gguf_version(const rg_gguf *g) { return g->version; }

/* ---------------------------------------------------------------- metadata */

int64_t rg_gguf_n_kv(const rg_gguf *g) { return g->n_kv; }

const char *rg_gguf_kv_key(const rg_gguf *g, int64_t i) {
  return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL;
}

int64_t rg_gguf_find_key(const rg_gguf *g, const char *key) {
  for (int64_t i = 0; i < g->n_kv; i++)
    if (strcmp(g->kvs[i].key, key) == 0) return i;
  return -1;
}

/* -1 (not a valid rg_gguf_type) for an index out of range. */
rg_gguf_type rg_gguf_kv_type(const rg_gguf *g, int64_t i) {
  return i >= 0 && i < g->n_kv ? g->kvs[i].type : (rg_gguf_type)-1;
}

int rg_gguf_get_i64(const rg_gguf *g, const char *key, int64_t *out) {
  const gguf_kv *kv = find_kv(g, key);
  return kv ? scalar_to_i64(kv->type, kv->val, out) : -1;
}

int rg_gguf_get_f64(const rg_gguf *g, const char *key, double *out) {
  const gguf_kv *kv = find_kv(g, key);
  if (!kv) return -1;
  if (kv->type == RG_GGUF_F32) {
    float f;
    memcpy(&f, kv->val, 4);
    *out = f;
    return 0;
  }
  if (kv->type == RG_GGUF_F64) {
    memcpy(out, kv->val, 8);
    return 0;
  }
  int64_t v;
  if (scalar_to_i64(kv->type, kv->val, &v) != 0) return -1;
  *out = (double)v;
  return 0;
}

/* The body and length of the gguf_string whose length field is at P (already
 * validated by the parser). */
static const char *string_at(const uint8_t *p, size_t *len) {
  uint64_t n;
  memcpy(&n, p, 8);
  if (len) *len = (size_t)n;
  return (const char *)p + 8;
}

const char *rg_gguf_get_str(const rg_gguf *g, const char *key, size_t *len) {
  const gguf_kv *kv = find_kv(g, key);
  if (!kv || kv->type != RG_GGUF_STRING) return NULL;
  return string_at(kv->val, len);
}

char *rg_gguf_dup_str(const rg_gguf *g, const char *key) {
  size_t len;
  const char *s = rg_gguf_get_str(g, key, &len);
  if (!s) return NULL;
  char *d = malloc(len + 1);
  if (!d) return NULL;
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

int rg_gguf_dup_optional_str(const rg_gguf *g, const char *key, char **out) {
  *out = NULL;
  if (!rg_gguf_get_str(g, key, NULL)) return 0;
  *out = rg_gguf_dup_str(g, key);
  return *out ? 0 : rg_error_set("%s: out of memory for %s", g->path, key);
}

int rg_gguf_get_arr(const rg_gguf *g, const char *key, rg_gguf_type *elem_type, int64_t *count) {
  const gguf_kv *kv = find_kv(g, key);
  if (!kv || kv->type != RG_GGUF_ARRAY) return -1;
  if (elem_type) *elem_type = kv->elem_type;
  if (count) *count = kv->count;
  return 0;
}

const void *rg_gguf_arr_data(const rg_gguf *g, const char *key) {
  const gguf_kv *kv = find_kv(g, key);
  if (!kv || kv->type != RG_GGUF_ARRAY || kv->elem_type == RG_GGUF_STRING) return NULL;
  return kv->val;
}

const char *rg_gguf_arr_str(const rg_gguf *g, const char *key, int64_t i, size_t *len) {
  const gguf_kv *kv = find_kv(g, key);
  if (!kv || kv->type != RG_GGUF_ARRAY || kv->elem_type != RG_GGUF_STRING || i < 0 || i >= kv->count) return NULL;
  return string_at((const uint8_t *)g->map.data + kv->str_offs[i], len);
}

/* ---------------------------------------------------------------- tensors */

int64_t rg_gguf_n_tensors(const rg_gguf *g) { return g->n_tensors; }

const rg_tensor *rg_gguf_tensor(const rg_gguf *g, int64_t i) {
  return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const rg_tensor *rg_gguf_find_tensor(const rg_gguf *g, const char *name) {
  for (int64_t i = 0; i < g->n_tensors; i++)
    if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
  return NULL;
}

size_t rg_gguf_tensor_file_offset(const rg_gguf *g, const rg_tensor *t) {
  return (size_t)((const uint8_t *)t->data - (const uint8_t *)g->map.data);
}
