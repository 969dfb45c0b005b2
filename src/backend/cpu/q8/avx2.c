/* backend/cpu/q8/avx2.c: the 8-bit products' kernels for AVX2 (q8_kernels,
 * backend/cpu/q8/q8_internal.h), for CPUs without AVX-512 VNNI. A 512-bit
 * vector of the shared decoders is two 256-bit halves: rows 0-7 and rows
 * 8-15 of a panel, so the decoded bytes are the AVX-512 kernels' own.
 *
 * The products: without vpdpbusd, vpmaddubsw multiplies unsigned weight
 * bytes by signed activation bytes and adds pairs into int16 lanes, which
 * it saturates, and vpmaddwd then adds pairs of those into int32.
 *  - A pair is at most 2 * umax * 127 in magnitude, so R registers' pairs
 *    can be added in int16 before vpmaddwd while R * 2 * umax * 127 <=
 *    32767: the whole sub-block (8 registers) for the 4-bit formats, 4 for
 *    q5_0, 2 for q6_K.
 *  - q8_0's unsigned bytes reach 255, whose pairs would saturate; it uses
 *    the signed weight w = u - 128 instead, as |w| times x with w's sign
 *    (vpsignb): pairs at most 2 * 128 * 127, one register per vpmaddwd,
 *    and the sum is directly sum w q = sum u q - 128 sum q.
 * Every sum is exact, and the float operations are the AVX-512 kernels' in
 * the same order, so the two give the same bits (test_q8_matmul). */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/q8/q8_internal.h"

#define Q8_TARGET __attribute__((target("avx2,fma,f16c")))

typedef struct {
  __m256i lo, hi; /* 128-bit lanes 0-1 and 2-3 */
} vec;
#define V_HALVES(op, a, b) ((vec){op((a).lo, (b).lo), op((a).hi, (b).hi)})
#define V_SHIFT(op, a, n) ((vec){op((a).lo, n), op((a).hi, n)})
#define V_BOTH(x) ((vec){x, x})
#define V_UNPACKLO32(a, b) V_HALVES(_mm256_unpacklo_epi32, a, b)
#define V_UNPACKHI32(a, b) V_HALVES(_mm256_unpackhi_epi32, a, b)
#define V_UNPACKLO64(a, b) V_HALVES(_mm256_unpacklo_epi64, a, b)
#define V_UNPACKHI64(a, b) V_HALVES(_mm256_unpackhi_epi64, a, b)
#define V_SHUFFLE8(a, b) V_HALVES(_mm256_shuffle_epi8, a, b)
#define V_AND(a, b) V_HALVES(_mm256_and_si256, a, b)
#define V_OR(a, b) V_HALVES(_mm256_or_si256, a, b)
#define V_XOR(a, b) V_HALVES(_mm256_xor_si256, a, b)
#define V_ADD8(a, b) V_HALVES(_mm256_add_epi8, a, b)
#define V_SRLI16(a, n) V_SHIFT(_mm256_srli_epi16, a, n)
#define V_SLLI16(a, n) V_SHIFT(_mm256_slli_epi16, a, n)
#define V_SRLI32(a, n) V_SHIFT(_mm256_srli_epi32, a, n)
#define V_SLLI32(a, n) V_SHIFT(_mm256_slli_epi32, a, n)
#define V_SET1_8(c) V_BOTH(_mm256_set1_epi8(c))
#define V_SET1_32(i) V_BOTH(_mm256_set1_epi32(i))
#define V_SET4_32(d, c, b, a) V_BOTH(_mm256_setr_epi32(a, b, c, d, a, b, c, d))

Q8_TARGET static inline __m256i load_two_rows(const uint8_t *first, const uint8_t *second) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)first)),
                                 _mm_loadu_si128((const __m128i *)second), 1);
}

Q8_TARGET static inline void load16_rows(const uint8_t *p, size_t stride, vec a[4]) {
  for (int i = 0; i < 4; i++) {
    a[i].lo = load_two_rows(p + (size_t)i * stride, p + (size_t)(4 + i) * stride);
    a[i].hi = load_two_rows(p + (size_t)(8 + i) * stride, p + (size_t)(12 + i) * stride);
  }
}

Q8_TARGET static inline __m256i add8_where(__m256i a, __m256i t, __m256i bits, __m256i c) {
  const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(t, bits), _mm256_setzero_si256());
  return _mm256_add_epi8(a, _mm256_andnot_si256(clear, c));
}

Q8_TARGET static inline vec v_add8_where(vec a, vec t, vec bits, vec c) {
  return (vec){add8_where(a.lo, t.lo, bits.lo, c.lo), add8_where(a.hi, t.hi, bits.hi, c.hi)};
}

Q8_TARGET static inline void v_store(uint8_t *wt, int j, vec v) {
  _mm256_storeu_si256((__m256i *)(wt + 64 * (size_t)j), v.lo);
  _mm256_storeu_si256((__m256i *)(wt + 64 * (size_t)j + 32), v.hi);
}

/* The low 16 bits of each 32-bit lane, as 8 floats. */
Q8_TARGET static inline __m256 f16_low_halves(__m256i v) {
  const __m256i p = _mm256_packus_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), v); /* per 128-bit lane */
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));  /* qwords 0 and 2 */
}

Q8_TARGET static inline void store_f16_lanes(float *dst, vec v, bool high) {
  if (high) v = V_SRLI32(v, 16);
  _mm256_storeu_ps(dst, f16_low_halves(v.lo));
  _mm256_storeu_ps(dst + 8, f16_low_halves(v.hi));
}

#include "backend/cpu/q8/unpack.h"

Q8_TARGET static inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

/* The AVX-512 kernel's rule and operations: the maximum is exact in any
 * order, and the scale, its inverse and the rounding are the same. */
Q8_TARGET static void quantize_block(const float *x, int8_t *q, float *d, int32_t *sum16) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 8 * i);
  const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);
  const float dx = amax / 127.0f, inv = dx != 0.0f ? 1.0f / dx : 0.0f;
  const __m256 iv = _mm256_set1_ps(inv);
  __m256i qi[4]; /* cvtps rounds half to even under the default MXCSR (nearbyintf) */
  for (int i = 0; i < 4; i++) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], iv));
  /* the packs work per 128-bit lane: words come out in the order 0 4 1 5 2 6 3 7 */
  const __m256i packed =
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *d = dx;
  sum16[0] = hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
  sum16[1] = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
}

/* The int16 pair sums of one register half times the broadcast bytes BX:
 * u times x, or for q8_0 (SIGNED_W) |u - 128| times x with u - 128's sign. */
Q8_TARGET static inline __m256i pairs(__m256i u, __m256i bx, bool signed_w) {
  if (!signed_w) return _mm256_maddubs_epi16(u, bx);
  const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
  return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(bx, w));
}

/* GROUP, OFFSET, BIAS and R (registers added in int16) are constants at
 * each call (panel_dots), so the loops unroll. */
Q8_TARGET static inline __attribute__((always_inline)) void panel_dots_of(int group, int offset, bool bias, int R,
                                                                         const uint8_t *wt, const float *wd,
                                                                         const float *wm, const q8_acts *x, int K,
                                                                         int M, float *out) {
  const int per = group / 4; /* registers per sub-block */
  const bool signed_w = offset == 128;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[Q8_XROWS][2];
  for (int m = 0; m < M; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int c0 = 0; c0 < K; c0 += Q8_CHUNK) { /* the chunk's 1 KiB of the panel stays in L1 */
    const uint8_t *wc = wt + 16 * (size_t)c0;
    for (int m = 0; m < M; m++) {
      const int8_t *xq = x->q + (size_t)m * K + c0;
      const float *xd = x->d + (size_t)m * (K / 32), *xdq = x->dx_qsum + (size_t)m * (K / 32);
      const int32_t *xoq = x->offset_qsum + (size_t)m * (K / group);
      __m256 a0 = acc[m][0], a1 = acc[m][1];
      for (int j0 = 0; j0 < 16; j0 += per) {
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        for (int j = j0; j < j0 + per; j += R) {
          __m256i h0 = _mm256_setzero_si256(), h1 = _mm256_setzero_si256();
          for (int r = j; r < j + R; r++) {
            int32_t x4;
            memcpy(&x4, xq + 4 * r, 4);
            const __m256i bx = _mm256_set1_epi32(x4);
            h0 = _mm256_add_epi16(h0, pairs(_mm256_loadu_si256((const __m256i *)(wc + 64 * r)), bx, signed_w));
            h1 = _mm256_add_epi16(h1, pairs(_mm256_loadu_si256((const __m256i *)(wc + 64 * r + 32)), bx, signed_w));
          }
          s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(h0, ones));
          s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(h1, ones));
        }
        const int col = c0 + 4 * j0, s = col / group; /* sub-block index in the row */
        if (offset && !signed_w) {
          const __m256i oq = _mm256_set1_epi32(xoq[s]);
          s0 = _mm256_sub_epi32(s0, oq);
          s1 = _mm256_sub_epi32(s1, oq);
        }
        const __m256 dx = _mm256_set1_ps(xd[col / 32]);
        const float *wds = wd + s * Q8_PANEL;
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(_mm256_loadu_ps(wds), dx), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(_mm256_loadu_ps(wds + 8), dx), a1);
        if (bias) {
          const __m256 dq = _mm256_set1_ps(xdq[col / 32]);
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wm + s * Q8_PANEL), dq, a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(wm + s * Q8_PANEL + 8), dq, a1);
        }
      }
      acc[m][0] = a0;
      acc[m][1] = a1;
    }
  }
  for (int m = 0; m < M; m++) {
    _mm256_storeu_ps(out + Q8_PANEL * m, acc[m][0]);
    _mm256_storeu_ps(out + Q8_PANEL * m + 8, acc[m][1]);
  }
}

Q8_TARGET static void panel_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm,
                                 const q8_acts *x, int K, int M, float *out) {
#define DOTS(G, O, B, R)                                                                                               \
  if (f->group == (G) && f->offset == (O) && f->bias == (B)) return panel_dots_of(G, O, B, R, wt, wd, wm, x, K, M, out)
  DOTS(32, 0, true, 8);   /* q4_1, q4_K: umax 15, 8 * 2 * 15 * 127 = 30480 */
  DOTS(32, 8, false, 8);  /* q4_0: umax 15 */
  DOTS(32, 16, false, 4); /* q5_0: umax 31, 4 * 2 * 31 * 127 = 31496 */
  DOTS(32, 128, false, 1); /* q8_0: |w| <= 128, 2 * 128 * 127 = 32512 */
  DOTS(16, 32, false, 2); /* q6_K: umax 63, 2 * 2 * 63 * 127 = 32004 */
#undef DOTS
  panel_dots_of(f->group, f->offset, f->bias, 1, wt, wd, wm, x, K, M, out); /* R = 1 is safe for every format */
}

const q8_kernels q8_kernels_avx2 = {"avx2", Q8_UNPACKERS, quantize_block, panel_dots, rg_cpu_has_avx2_fma_f16c};
