/* gguf.h: reader for GGUF v2/v3 files (ggml's model container).
 *
 * Layout (ggml docs/gguf.md; all integers little-endian):
 *   u32 magic "GGUF" (0x46554747), u32 version (2 or 3),
 *   u64 n_tensors, u64 n_kv,
 *   n_kv x { gguf_string key, u32 value_type, value },
 *   n_tensors x { gguf_string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset },
 *   padding to general.alignment (default 32), then the tensor data blob;
 *   each tensor's offset is relative to the blob start.
 *   gguf_string = u64 length + bytes (not NUL-terminated).
 *   value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 *   8 string, 9 array (u32 elem_type, u64 count, elems), 10 u64, 11 i64, 12 f64.
 *
 * The file is memory-mapped read-only; tensors point into the map, so they
 * live as long as the rg_gguf. Every count, length and offset is validated
 * against the file size before use; a bad file gives NULL and an error that
 * names the file and the problem.
 */
#ifndef RG_GGUF_H
#define RG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

typedef enum {
  RG_GGUF_U8 = 0, RG_GGUF_I8 = 1, RG_GGUF_U16 = 2, RG_GGUF_I16 = 3,
  RG_GGUF_U32 = 4, RG_GGUF_I32 = 5, RG_GGUF_F32 = 6, RG_GGUF_BOOL = 7,
  RG_GGUF_STRING = 8, RG_GGUF_ARRAY = 9, RG_GGUF_U64 = 10, RG_GGUF_I64 = 11,
  RG_GGUF_F64 = 12
} rg_gguf_type;

typedef struct rg_gguf rg_gguf;

/* Opens and validates PATH. Returns NULL with the error set on failure. */
rg_gguf *rg_gguf_open(const char *path);
void rg_gguf_close(rg_gguf *g);

const char *rg_gguf_path(const rg_gguf *g);
int rg_gguf_version(const rg_gguf *g);

/* ---- metadata ---- */
int64_t rg_gguf_n_kv(const rg_gguf *g);
const char *rg_gguf_kv_key(const rg_gguf *g, int64_t i);
/* Index of KEY, or -1. */
int64_t rg_gguf_find_key(const rg_gguf *g, const char *key);
rg_gguf_type rg_gguf_kv_type(const rg_gguf *g, int64_t i);

/* Scalar getters. Integer getters accept any integer or bool type and return
 * 0 on success, -1 if the key is absent or not numeric (no error is set for an
 * absent key, so optional keys are easy to read). */
int rg_gguf_get_i64(const rg_gguf *g, const char *key, int64_t *out);
int rg_gguf_get_f64(const rg_gguf *g, const char *key, double *out); /* any numeric */
/* String value: a pointer into the map (not NUL-terminated) and its length;
 * NULL if absent or not a string. */
const char *rg_gguf_get_str(const rg_gguf *g, const char *key, size_t *len);
/* A malloc'd NUL-terminated copy of a string value, or NULL. */
char *rg_gguf_dup_str(const rg_gguf *g, const char *key);
/* For an optional key: *OUT = a malloc'd copy of string KEY, or NULL when
 * the key is absent or not a string. Returns 0, or -1 with the error set when
 * out of memory, which rg_gguf_dup_str's NULL does not tell from absence. */
int rg_gguf_dup_optional_str(const rg_gguf *g, const char *key, char **out);

/* Arrays: element type and count; 0 on success, -1 if absent or not an array. */
int rg_gguf_get_arr(const rg_gguf *g, const char *key, rg_gguf_type *elem_type, int64_t *count);
/* Pointer to the packed elements of a numeric array (NULL for string arrays). */
const void *rg_gguf_arr_data(const rg_gguf *g, const char *key);
/* Element I of a string array (pointer into the map, with its length). */
const char *rg_gguf_arr_str(const rg_gguf *g, const char *key, int64_t i, size_t *len);

/* ---- tensors ---- */
int64_t rg_gguf_n_tensors(const rg_gguf *g);
const rg_tensor *rg_gguf_tensor(const rg_gguf *g, int64_t i);
const rg_tensor *rg_gguf_find_tensor(const rg_gguf *g, const char *name);
/* Byte offset within the file of a tensor's data (for tools that patch a
 * copy of the file in place, such as `refgeo perturb`). */
size_t rg_gguf_tensor_file_offset(const rg_gguf *g, const rg_tensor *t);

#endif
