/* dequant_avx2.c: AVX2 versions of the hot block formats' row decoders
 * (dequant.c holds the portable ones and the table).
 *
 * Why: a decode step dequantizes every weight of the model once per token
 * (backend/cpu/skinny.c). GCC vectorizes dequant.c's loops only to 128-bit
 * lanes with a long unpacking sequence (~2 instructions per weight on
 * SmolLM2's Q4_1), which made dequantization 38% of a batch-1 decode step.
 *
 * Exactness: each function performs, per element, the same float operations
 * as its portable twin, so results are bit-identical (test_dequant checks
 * both against gguf-py and against each other on random blocks). Scales are
 * converted with F16C, exact like dequant.c's fp16_to_fp32; a fused
 * multiply-add here rounds the same as the portable "q * d + m", whose
 * product is exact (dequant.c's note on FMA contraction).
 *
 * Dispatch is at run time (rg_dequant_avx2_row), so a binary built on an
 * AVX2 machine still runs, on the portable path, on one without it. */
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tensor/dequant_simd.h"
#include "tensor/dtype.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

enum { QK = 32, QK_K = 256 };

/* The low 8 bytes of B, as 8 floats (unsigned or signed bytes). */
AVX2 static inline __m256 u8_to_ps(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)); }
AVX2 static inline __m256 i8_to_ps(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }

/* The 32 nibbles of a 16-byte block: elements 0-15 are the low nibbles,
 * 16-31 the high ones (ggml's order). */
AVX2 static inline void nibbles(const uint8_t *qs, __m128i *lo, __m128i *hi) {
  const __m128i q = _mm_loadu_si128((const __m128i *)qs), mask = _mm_set1_epi8(0x0F);
  *lo = _mm_and_si128(q, mask);
  *hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
}

AVX2 static void row_q4_0(const uint8_t *x, float *y, int64_t nb) {
  const __m128i eight = _mm_set1_epi8(8);
  for (int64_t i = 0; i < nb; i++, x += 18, y += QK) {
    const __m256 d = _mm256_set1_ps(rg_f16c_load(x));
    __m128i lo, hi;
    nibbles(x + 2, &lo, &hi);
    lo = _mm_sub_epi8(lo, eight);
    hi = _mm_sub_epi8(hi, eight);
    _mm256_storeu_ps(y, _mm256_mul_ps(i8_to_ps(lo), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8_to_ps(_mm_srli_si128(lo, 8)), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(i8_to_ps(hi), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(i8_to_ps(_mm_srli_si128(hi, 8)), d));
  }
}

AVX2 static void row_q4_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 20, y += QK) {
    const __m256 d = _mm256_set1_ps(rg_f16c_load(x)), m = _mm256_set1_ps(rg_f16c_load(x + 2));
    __m128i lo, hi;
    nibbles(x + 4, &lo, &hi);
    _mm256_storeu_ps(y, _mm256_fmadd_ps(u8_to_ps(lo), d, m));
    _mm256_storeu_ps(y + 8, _mm256_fmadd_ps(u8_to_ps(_mm_srli_si128(lo, 8)), d, m));
    _mm256_storeu_ps(y + 16, _mm256_fmadd_ps(u8_to_ps(hi), d, m));
    _mm256_storeu_ps(y + 24, _mm256_fmadd_ps(u8_to_ps(_mm_srli_si128(hi, 8)), d, m));
  }
}

/* Bytes 0-31 holding 16 where bit i of BITS is set, else 0: byte i takes
 * BITS's byte i / 8 (a shuffle within each 128-bit lane, each of which
 * holds all four) and tests its bit i % 8. */
AVX2 static inline __m256i bytes16(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32((int)bits),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel), _mm256_set1_epi8(16));
}

/* q5_0: element j's fifth bit is bit j of qh; value ((nibble | 16*bit) - 16) * d.
 * The 32 values are made as bytes first (in [-16, 15]), then widened 8 at a
 * time: half the instructions per element of widening each nibble first. */
AVX2 static void row_q5_0(const uint8_t *x, float *y, int64_t nb) {
  const __m256i sixteen = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < nb; i++, x += 22, y += QK) {
    const __m256 d = _mm256_set1_ps(rg_f16c_load(x));
    uint32_t qh;
    memcpy(&qh, x + 2, 4);
    __m128i lo, hi;
    nibbles(x + 6, &lo, &hi);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(_mm256_set_m128i(hi, lo), bytes16(qh)), sixteen);
    const __m128i q_lo = _mm256_castsi256_si128(q), q_hi = _mm256_extracti128_si256(q, 1);
    const __m128i parts[4] = {q_lo, _mm_srli_si128(q_lo, 8), q_hi, _mm_srli_si128(q_hi, 8)};
    for (int p = 0; p < 4; p++) _mm256_storeu_ps(y + 8 * p, _mm256_mul_ps(i8_to_ps(parts[p]), d));
  }
}

AVX2 static void row_q8_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 34, y += QK) {
    const __m256 d = _mm256_set1_ps(rg_f16c_load(x));
    for (int p = 0; p < 4; p++) {
      const __m128i q = _mm_loadl_epi64((const __m128i *)(x + 2 + 8 * p));
      _mm256_storeu_ps(y + 8 * p, _mm256_mul_ps(i8_to_ps(q), d));
    }
  }
}

/* q4_K: 4 chunks of 64; element l of a chunk is d1 * lo(q[l]) - m1 (l < 32)
 * or d2 * hi(q[l-32]) - m2. */
AVX2 static void row_q4_k(const uint8_t *x, float *y, int64_t nb) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; i++, x += 144) {
    const float d = rg_f16c_load(x), min = rg_f16c_load(x + 2);
    const uint8_t *scales = x + 4, *q = x + 16;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
      uint8_t sc, m;
      scale_min_k4(is, scales, &sc, &m);
      const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(min * m);
      scale_min_k4(is + 1, scales, &sc, &m);
      const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(min * m);
      const __m256i b = _mm256_loadu_si256((const __m256i *)q);
      const __m256i lo = _mm256_and_si256(b, mask), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), mask);
      const __m128i half[4] = {_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1),
                               _mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)};
      for (int p = 0; p < 4; p++) {
        const __m256 dd = p < 2 ? d1 : d2, mm = p < 2 ? m1 : m2;
        _mm256_storeu_ps(y + 16 * p, _mm256_fmsub_ps(dd, u8_to_ps(half[p]), mm));
        _mm256_storeu_ps(y + 16 * p + 8, _mm256_fmsub_ps(dd, u8_to_ps(_mm_srli_si128(half[p], 8)), mm));
      }
    }
  }
}

/* q6_K: 2 chunks of 128; for l < 32 the four values q1..q4 come from ql[l],
 * ql[l+32] and qh[l], with scale sc[l/16 + 0, 2, 4, 6]; value (d*sc) * q.
 * The 32 values of each qp are made as bytes first (in [-32, 31]), then
 * widened 8 at a time, as row_q5_0 does. */
AVX2 static void row_q6_k(const uint8_t *x, float *y, int64_t nb) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < nb; i++, x += 210) {
    const float d = rg_f16c_load(x + 208);
    const uint8_t *ql = x, *qh = x + 128;
    const int8_t *sc = (const int8_t *)(x + 192);
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      const __m256i a = _mm256_loadu_si256((const __m256i *)ql), b = _mm256_loadu_si256((const __m256i *)(ql + 32));
      const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
      /* qh's bit pair 2p..2p+1 moved to bits 4-5 of each byte (16-bit shifts: the bits a
       * shift carries across bytes land outside 0x30) */
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45))};
      for (int p = 0; p < 4; p++) {
        const __m256i v = _mm256_sub_epi8(q[p], k32);
        const __m128i v_lo = _mm256_castsi256_si128(v), v_hi = _mm256_extracti128_si256(v, 1);
        const __m128i parts[4] = {v_lo, _mm_srli_si128(v_lo, 8), v_hi, _mm_srli_si128(v_hi, 8)};
        for (int g = 0; g < 4; g++) {
          const __m256 ds = _mm256_set1_ps(d * sc[g / 2 + 2 * p]);
          _mm256_storeu_ps(y + 32 * p + 8 * g, _mm256_mul_ps(ds, i8_to_ps(parts[g])));
        }
      }
    }
  }
}

/* AVX2 and FMA from the compiler's CPU model; F16C from CPUID leaf 1
 * (clang's __builtin_cpu_supports does not know "f16c"). Asked once: CPUID
 * traps to the hypervisor in a virtual machine, and asked per row it took
 * 86% of a decode step. Any thread may compute the answer first; they all
 * compute the same one. */
bool rg_cpu_has_avx2_fma_f16c(void) {
  static int known = -1; /* -1 not asked yet, else 0 / 1 */
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    unsigned a, b, c, d;
    v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
        (c & bit_F16C);
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
}

rg_dequant_fn rg_dequant_avx2_row(int type) {
  if (!rg_cpu_has_avx2_fma_f16c()) return NULL;
  switch (type) {
  case RG_Q4_0: return row_q4_0;
  case RG_Q4_1: return row_q4_1;
  case RG_Q5_0: return row_q5_0;
  case RG_Q8_0: return row_q8_0;
  case RG_Q4_K: return row_q4_k;
  case RG_Q6_K: return row_q6_k;
  default: return NULL;
  }
}
