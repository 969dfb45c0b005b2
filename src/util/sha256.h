/* sha256.h: SHA-256 (FIPS 180-4) of a buffer or a file.
 *
 * The report's provenance names the exact model a run started from by its
 * sha256, the digest `sha256sum` prints and model hubs list. None of the
 * project's libraries offers a hash, so this is the one written here.
 */
#ifndef RG_SHA256_H
#define RG_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t h[8];
  uint64_t n_bytes;    /* message length so far */
  uint8_t block[64];   /* a partial block */
  size_t n_block;
} rg_sha256;

void rg_sha256_init(rg_sha256 *s);
void rg_sha256_update(rg_sha256 *s, const void *data, size_t len);
/* Writes the 32-byte digest. S must be initialised again before reuse. */
void rg_sha256_final(rg_sha256 *s, uint8_t digest[32]);

/* DIGEST as 64 lowercase hex digits and a NUL. */
void rg_sha256_hex(const uint8_t digest[32], char hex[65]);

/* The digest of the file at PATH as 64 lowercase hex digits and a NUL into
 * HEX. Returns 0, or -1 with the error set ("PATH: <strerror>"). */
int rg_sha256_file(const char *path, char hex[65]);

#endif
