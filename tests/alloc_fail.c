/* alloc_fail.c: the --wrap'ed allocators behind alloc_fail.h.
 *
 * Each __wrap_X is what refgeo's code calls instead of X; __real_X is the
 * real function (under ASan, ASan's own, so leak and overflow checking stay
 * on). An event first counts itself, then fails if it is the armed one.
 */
#include "alloc_fail.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
void __real_free(void *p);
cJSON *__real_cJSON_Parse(const char *value);
cJSON *__real_cJSON_ParseWithLength(const char *value, size_t len);
cJSON *__real_cJSON_ParseWithLengthOpts(const char *value, size_t len, const char **end, cJSON_bool require_nul);
pcre2_code *__real_pcre2_compile_8(PCRE2_SPTR pattern, PCRE2_SIZE len, uint32_t options, int *err, PCRE2_SIZE *at,
                                   pcre2_compile_context *ctx);
int __real_pcre2_jit_compile_8(pcre2_code *code, uint32_t options);
FILE *__real_fopen(const char *path, const char *mode);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static bool g_armed;
static long g_events, g_fail_at;
static const char *g_failed_kind;
static bool g_fail_cjson_next; /* the armed event was a cJSON parse */
static atomic_long g_live;

void af_arm(long fail_at) {
  g_events = 0;
  g_fail_at = fail_at;
  g_failed_kind = NULL;
  g_armed = true;
}

long af_disarm(void) {
  g_armed = false;
  return g_events;
}

long af_live(void) { return atomic_load(&g_live); }
const char *af_failed_kind(void) { return g_failed_kind; }

/* Counts one event of KIND; true if it is the one that must fail. Sets
 * errno to ENOMEM then, as a failing malloc does (util/json.c relies on it). */
static bool event_fails(const char *kind) {
  if (!g_armed) return false;
  if (++g_events != g_fail_at) return false;
  g_failed_kind = kind;
  errno = ENOMEM;
  return true;
}

static void *counted(void *p) {
  if (p) atomic_fetch_add(&g_live, 1);
  return p;
}

void *__wrap_malloc(size_t n) { return event_fails("malloc") ? NULL : counted(__real_malloc(n)); }
void *__wrap_calloc(size_t n, size_t size) { return event_fails("calloc") ? NULL : counted(__real_calloc(n, size)); }
void *__wrap_aligned_alloc(size_t align, size_t n) {
  return event_fails("aligned_alloc") ? NULL : counted(__real_aligned_alloc(align, n));
}

int __wrap_posix_memalign(void **out, size_t align, size_t n) {
  if (event_fails("posix_memalign")) return ENOMEM;
  int rc = __real_posix_memalign(out, align, n);
  if (rc == 0) counted(*out);
  return rc;
}

/* A failed realloc leaves P allocated, as the real one does. */
void *__wrap_realloc(void *p, size_t n) {
  if (event_fails("realloc")) return NULL;
  void *q = __real_realloc(p, n);
  return p ? q : counted(q);
}

/* Built on __real_malloc so that the copy is one counted block. */
static char *copy_bytes(const char *s, size_t n) {
  char *d = counted(__real_malloc(n + 1));
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

char *__wrap_strdup(const char *s) { return event_fails("strdup") ? NULL : copy_bytes(s, strlen(s)); }
char *__wrap_strndup(const char *s, size_t n) { return event_fails("strndup") ? NULL : copy_bytes(s, strnlen(s, n)); }

void __wrap_free(void *p) {
  if (p) atomic_fetch_sub(&g_live, 1);
  __real_free(p);
}

/* ---------------------------------------------------------------- cJSON */

/* cJSON's hooks: counted, never events, except the first allocation of a
 * parse whose event was armed. */
static void *cjson_malloc(size_t n) {
  if (g_fail_cjson_next) {
    g_fail_cjson_next = false;
    errno = ENOMEM;
    return NULL;
  }
  return counted(__real_malloc(n));
}

void af_init(void) {
  cJSON_Hooks hooks = {cjson_malloc, __wrap_free};
  cJSON_InitHooks(&hooks);
}

/* Arms the parser's first allocation when this parse is the failing event. */
static void cjson_event(void) { g_fail_cjson_next = event_fails("cJSON parse"); }

cJSON *__wrap_cJSON_Parse(const char *value) {
  cjson_event();
  cJSON *j = __real_cJSON_Parse(value);
  g_fail_cjson_next = false;
  return j;
}

cJSON *__wrap_cJSON_ParseWithLength(const char *value, size_t len) {
  cjson_event();
  cJSON *j = __real_cJSON_ParseWithLength(value, len);
  g_fail_cjson_next = false;
  return j;
}

cJSON *__wrap_cJSON_ParseWithLengthOpts(const char *value, size_t len, const char **end, cJSON_bool require_nul) {
  cjson_event();
  cJSON *j = __real_cJSON_ParseWithLengthOpts(value, len, end, require_nul);
  g_fail_cjson_next = false;
  return j;
}

/* ---------------------------------------------------------------- PCRE2, files */

pcre2_code *__wrap_pcre2_compile_8(PCRE2_SPTR pattern, PCRE2_SIZE len, uint32_t options, int *err, PCRE2_SIZE *at,
                                   pcre2_compile_context *ctx) {
  if (event_fails("pcre2_compile")) {
    *err = PCRE2_ERROR_HEAP_FAILED;
    *at = 0;
    return NULL;
  }
  return __real_pcre2_compile_8(pattern, len, options, err, at, ctx);
}

int __wrap_pcre2_jit_compile_8(pcre2_code *code, uint32_t options) {
  return event_fails("pcre2_jit_compile") ? PCRE2_ERROR_NOMEMORY : __real_pcre2_jit_compile_8(code, options);
}

FILE *__wrap_fopen(const char *path, const char *mode) {
  if (event_fails("fopen")) {
    errno = ENOMEM;
    return NULL;
  }
  return __real_fopen(path, mode);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (event_fails("mmap")) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return __real_mmap(addr, len, prot, flags, fd, off);
}
