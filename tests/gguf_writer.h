/* gguf_writer.h: a small byte writer for hand-built GGUF files (as in
 * llama.cpp's tests/test-gguf.cpp), shared by the tests that need one. Every
 * function fails the cmocka test when memory runs out. */
#ifndef RG_TEST_GGUF_WRITER_H
#define RG_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "testlib.h"

typedef struct {
  uint8_t *buf;
  size_t len, cap;
} bytes;

static inline void put(bytes *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->buf = realloc(b->buf, b->cap);
    assert_non_null(b->buf);
  }
  memcpy(b->buf + b->len, p, n);
  b->len += n;
}
static inline void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static inline void put_f32(bytes *b, float v) { put(b, &v, 4); }
static inline void put_str(bytes *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}
static inline void kv_str(bytes *b, const char *key, const char *val) {
  put_str(b, key);
  put_u32(b, RG_GGUF_STRING);
  put_str(b, val);
}
static inline void kv_u32(bytes *b, const char *key, uint32_t val) {
  put_str(b, key);
  put_u32(b, RG_GGUF_U32);
  put_u32(b, val);
}
static inline void kv_f32(bytes *b, const char *key, float val) {
  put_str(b, key);
  put_u32(b, RG_GGUF_F32);
  put_f32(b, val);
}
static inline void pad_to(bytes *b, size_t align) {
  while (b->len % align) put(b, "", 1);
}
static inline void patch_u32(bytes *b, size_t at, uint32_t v) { memcpy(b->buf + at, &v, 4); }
static inline void patch_u64(bytes *b, size_t at, uint64_t v) { memcpy(b->buf + at, &v, 8); }

/* An array KEY of N strings. */
static inline void kv_str_array(bytes *b, const char *key, const char *const *vals, uint64_t n) {
  put_str(b, key);
  put_u32(b, RG_GGUF_ARRAY);
  put_u32(b, RG_GGUF_STRING);
  put_u64(b, n);
  for (uint64_t i = 0; i < n; i++) put_str(b, vals[i]);
}

#endif
