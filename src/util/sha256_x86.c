/* sha256_x86.c: SHA-256's compression function on the x86 SHA extensions
 * (SHA-NI: sha256rnds2, sha256msg1, sha256msg2), about ten times the
 * portable C loop's speed. Training states are gigabytes (a SmolLM2 full
 * state is 1.6 GB), and each is hashed as it is written and again as it is
 * read back, so this is the path that keeps their checksums cheap.
 *
 * The instructions work on the state as two registers, {A, B, E, F} and
 * {C, D, G, H} (Intel, "Intel SHA Extensions", 2013, figure 4), and do two
 * rounds per sha256rnds2: the round constants plus the message words of
 * four rounds go in one register, its upper half for the second pair. The
 * message schedule W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]
 * (FIPS 180-4 §6.2.2) is sha256msg1 (the s0 term plus W[t-16]), an add of
 * W[t-7..t-4], and sha256msg2 (the s1 terms, which need the two words just
 * made). Dispatch is at run time (rg_sha256_x86_available), so a binary
 * built elsewhere runs on a CPU without them through the portable code.
 */
#include "util/sha256_x86.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#define SHA_NI __attribute__((target("sha,sse4.1,ssse3")))

bool rg_sha256_x86_available(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 7) return false;
  __cpuid_count(1, 0, a, b, c, d);
  const bool sse41 = (c >> 19) & 1, ssse3 = (c >> 9) & 1;
  __cpuid_count(7, 0, a, b, c, d);
  return sse41 && ssse3 && ((b >> 29) & 1); /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}

SHA_NI void rg_sha256_x86_blocks(uint32_t h[8], const uint8_t *p, size_t n_blocks, const uint32_t k[64]) {
  /* big-endian words: a byte reversal within each 32-bit lane */
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]); /* lanes A B C D */
  __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]); /* lanes E F G H */
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (; n_blocks > 0; n_blocks--, p += 64) {
    const __m128i abef0 = abef, cdgh0 = cdgh;
    __m128i w[4]; /* W[4g .. 4g+3] for the last four groups g, in a ring */
    for (int g = 0; g < 16; g++) {
      __m128i m;
      if (g < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), swap);
      } else {
        const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]),
                                        _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
        m = _mm_sha256msg2_epu32(t, w[(g + 3) & 3]);
      }
      w[g & 3] = m;
      __m128i kw = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *)&k[4 * g]));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, kw);
      kw = _mm_shuffle_epi32(kw, 0x0E); /* the upper two words: the next two rounds */
      abef = _mm_sha256rnds2_epu32(abef, cdgh, kw);
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0)); /* A B C D */
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));    /* E F G H */
}

#else

bool rg_sha256_x86_available(void) { return false; }

void rg_sha256_x86_blocks(uint32_t h[8], const uint8_t *p, size_t n_blocks, const uint32_t k[64]) {
  (void)h, (void)p, (void)n_blocks, (void)k;
}

#endif
