/* alloc_fail.h: making the N-th allocation fail (test_alloc_failure only).
 *
 * test_alloc_failure is linked with -Wl,--wrap=malloc,... (tests/CMakeLists.txt):
 * the linker sends every call that refgeo's code (the static refgeo_core
 * library) makes to malloc, calloc, realloc, aligned_alloc, posix_memalign,
 * strdup, strndup and free to alloc_fail.c's __wrap_ functions, so no
 * production code knows about this. What counts as one allocation event:
 *   - each call to one of those allocators (free is never an event);
 *   - each call refgeo makes to cJSON's parser (cJSON_Parse,
 *     cJSON_ParseWithLength, cJSON_ParseWithLengthOpts): failing it makes the
 *     parser's first internal allocation fail, which is cJSON's own
 *     out-of-memory path (it frees what it built and returns NULL);
 *   - each pcre2_compile and pcre2_jit_compile: failing it returns
 *     PCRE2_ERROR_HEAP_FAILED / PCRE2_ERROR_NOMEMORY as PCRE2 does when its
 *     allocator fails;
 *   - each fopen and mmap (a FILE and an address-space reservation): failing
 *     it returns NULL / MAP_FAILED with errno ENOMEM.
 * Not events: the allocations inside cJSON other than a parse's first, and
 * those inside PCRE2, libc (fopen's buffers) or OpenMP. cJSON's allocations
 * are routed through the counters below (cJSON_InitHooks) so that a block it
 * leaks, or one refgeo forgets to cJSON_Delete, shows in af_live.
 */
#ifndef RG_ALLOC_FAIL_H
#define RG_ALLOC_FAIL_H

#include <stdbool.h>

/* Routes cJSON's allocations through the counters. Call once, first. */
void af_init(void);

/* Starts counting events; event number FAIL_AT (1-based) fails, and so does
 * no other (0: none fails). */
void af_arm(long fail_at);
/* Stops counting; returns the number of events seen since af_arm. */
long af_disarm(void);

/* Blocks allocated and not yet freed, over the whole process: a load that
 * fails and frees everything leaves it where it was. */
long af_live(void);

/* What the event that failed was ("malloc", "pcre2_jit_compile", ...), or
 * NULL when none failed since af_arm. */
const char *af_failed_kind(void);

#endif
