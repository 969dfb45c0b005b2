/* sha256.c: SHA-256 (FIPS 180-4) of a buffer or a file (sha256.h). */
#include "util/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/sha256_x86.h"

/* The first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4 §4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state (FIPS 180-4 §6.2.2). */
static void compress(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

static void compress_portable(uint32_t h[8], const uint8_t *p, size_t n_blocks, const uint32_t k[64]) {
  (void)k;
  for (; n_blocks > 0; n_blocks--, p += 64) compress(h, p);
}

typedef void (*blocks_fn)(uint32_t h[8], const uint8_t *p, size_t n_blocks, const uint32_t k[64]);

/* The x86 SHA extensions where the CPU has them; REFGEO_SHA256_PORTABLE=1
 * forces the C loop (tests compare the two). */
static blocks_fn pick_blocks(void) {
  static blocks_fn fn;
  if (!fn) {
    const char *force = getenv("REFGEO_SHA256_PORTABLE");
    fn = !(force && strcmp(force, "1") == 0) && rg_sha256_x86_available() ? rg_sha256_x86_blocks : compress_portable;
  }
  return fn;
}

void rg_sha256_init(rg_sha256 *s) {
  /* fractional parts of the square roots of the first 8 primes (§5.3.3) */
  static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, H0, sizeof H0);
  s->n_bytes = 0;
  s->n_block = 0;
}

void rg_sha256_update(rg_sha256 *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->n_bytes += len;
  while (len > 0) {
    if (s->n_block == 0 && len >= 64) { /* whole blocks straight from the input */
      const size_t n = len / 64;
      pick_blocks()(s->h, p, n, K);
      p += 64 * n, len -= 64 * n;
      continue;
    }
    size_t take = 64 - s->n_block < len ? 64 - s->n_block : len;
    memcpy(s->block + s->n_block, p, take);
    s->n_block += take, p += take, len -= take;
    if (s->n_block == 64) pick_blocks()(s->h, s->block, 1, K), s->n_block = 0;
  }
}

void rg_sha256_final(rg_sha256 *s, uint8_t digest[32]) {
  /* Padding (§5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the
   * message length in bits as a big-endian 64-bit number. */
  uint64_t bits = s->n_bytes * 8;
  static const uint8_t ONE = 0x80, ZERO[64] = {0};
  rg_sha256_update(s, &ONE, 1);
  rg_sha256_update(s, ZERO, (64 + 56 - s->n_block) % 64);
  uint8_t len_be[8];
  for (int i = 0; i < 8; i++) len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
  rg_sha256_update(s, len_be, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) digest[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

int rg_sha256_file(const char *path, char hex[65]) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return rg_error_set("%s: %s", path, strerror(errno));
  enum { CHUNK = 1 << 20 };
  uint8_t *buf = malloc(CHUNK);
  if (!buf) {
    fclose(fp);
    return rg_error_set("out of memory");
  }
  rg_sha256 s;
  rg_sha256_init(&s);
  size_t got;
  while ((got = fread(buf, 1, CHUNK, fp)) > 0) rg_sha256_update(&s, buf, got);
  int failed = ferror(fp);
  free(buf);
  fclose(fp);
  if (failed) return rg_error_set("%s: read error", path);
  uint8_t d[32];
  rg_sha256_final(&s, d);
  rg_sha256_hex(d, hex);
  return 0;
}

void rg_sha256_hex(const uint8_t digest[32], char hex[65]) {
  static const char DIGITS[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) hex[2 * i] = DIGITS[digest[i] >> 4], hex[2 * i + 1] = DIGITS[digest[i] & 15];
  hex[64] = '\0';
}
