/* sha256_x86.h: SHA-256 block compression on the x86 SHA extensions, for
 * sha256.c's dispatch (not a public interface). */
#ifndef RG_UTIL_SHA256_X86_H
#define RG_UTIL_SHA256_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether this CPU has the SHA extensions (and the SSE levels they need). */
bool rg_sha256_x86_available(void);
/* Compresses N_BLOCKS 64-byte blocks at P into H with the round constants
 * K; only where rg_sha256_x86_available. */
void rg_sha256_x86_blocks(uint32_t h[8], const uint8_t *p, size_t n_blocks, const uint32_t k[64]);

#endif
