/* backend/cpu/q8/avx512.c: the 8-bit products' kernels for AVX-512 with
 * VNNI (q8_kernels, backend/cpu/q8/q8_internal.h). One vpdpbusd multiplies
 * the 16 rows of a decoded panel register by 4 broadcast activation bytes,
 * accumulating in int32; the panel's 16 registers of a 64-column chunk
 * stay in zmm registers while up to 16 activation rows pass over them. */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/q8/q8_internal.h"

#define Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

typedef __m512i vec;
#define V_UNPACKLO32 _mm512_unpacklo_epi32
#define V_UNPACKHI32 _mm512_unpackhi_epi32
#define V_UNPACKLO64 _mm512_unpacklo_epi64
#define V_UNPACKHI64 _mm512_unpackhi_epi64
#define V_SHUFFLE8 _mm512_shuffle_epi8
#define V_AND _mm512_and_si512
#define V_OR _mm512_or_si512
#define V_XOR _mm512_xor_si512
#define V_ADD8 _mm512_add_epi8
#define V_SRLI16 _mm512_srli_epi16
#define V_SLLI16 _mm512_slli_epi16
#define V_SRLI32 _mm512_srli_epi32
#define V_SLLI32 _mm512_slli_epi32
#define V_SET1_8 _mm512_set1_epi8
#define V_SET1_32 _mm512_set1_epi32
#define V_SET4_32 _mm512_set4_epi32

Q8_TARGET static inline void load16_rows(const uint8_t *p, size_t stride, vec a[4]) {
  for (int i = 0; i < 4; i++) {
    a[i] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + (size_t)i * stride)));
    for (int lane = 1; lane < 4; lane++) {
      const __m128i row = _mm_loadu_si128((const __m128i *)(p + (size_t)(4 * lane + i) * stride));
      switch (lane) { /* the lane is an immediate operand */
      case 1: a[i] = _mm512_inserti32x4(a[i], row, 1); break;
      case 2: a[i] = _mm512_inserti32x4(a[i], row, 2); break;
      default: a[i] = _mm512_inserti32x4(a[i], row, 3); break;
      }
    }
  }
}

Q8_TARGET static inline vec v_add8_where(vec a, vec t, vec bits, vec c) {
  return _mm512_mask_add_epi8(a, _mm512_test_epi8_mask(t, bits), a, c);
}

Q8_TARGET static inline void v_store(uint8_t *wt, int j, vec v) {
  _mm512_storeu_si512((void *)(wt + 64 * (size_t)j), v);
}

Q8_TARGET static inline void store_f16_lanes(float *dst, vec v, bool high) {
  _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(high ? _mm512_srli_epi32(v, 16) : v)));
}

#include "backend/cpu/q8/unpack.h"

Q8_TARGET static void quantize_block(const float *x, int8_t *q, float *d, int32_t *sum16) {
  const __m512 a = _mm512_loadu_ps(x), c = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(c)));
  const float dx = amax / 127.0f, inv = dx != 0.0f ? 1.0f / dx : 0.0f;
  const __m512 iv = _mm512_set1_ps(inv);
  /* cvtps rounds half to even under the default MXCSR (nearbyintf) */
  const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, iv)), qc = _mm512_cvtps_epi32(_mm512_mul_ps(c, iv));
  _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(qa));
  _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(qc));
  *d = dx;
  sum16[0] = _mm512_reduce_add_epi32(qa);
  sum16[1] = _mm512_reduce_add_epi32(qc);
}

/* GROUP, OFFSET and BIAS are constants at each call (panel_dots), so the
 * sub-block loop is unrolled. */
Q8_TARGET static inline __attribute__((always_inline)) void panel_dots_of(int group, int offset, bool bias,
                                                                         const uint8_t *wt, const float *wd,
                                                                         const float *wm, const q8_acts *x, int K,
                                                                         int M, float *out) {
  const int per = group / 4; /* registers per sub-block */
  __m512 acc[Q8_XROWS];
  for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
  for (int c0 = 0; c0 < K; c0 += Q8_CHUNK) {
    __m512i w[16];
    for (int j = 0; j < 16; j++) w[j] = _mm512_loadu_si512((const void *)(wt + 16 * (size_t)c0 + 64 * j));
    for (int m = 0; m < M; m++) {
      const int8_t *xq = x->q + (size_t)m * K + c0;
      const float *xd = x->d + (size_t)m * (K / 32), *xdq = x->dx_qsum + (size_t)m * (K / 32);
      const int32_t *xoq = x->offset_qsum + (size_t)m * (K / group);
      __m512 a = acc[m];
      for (int j0 = 0; j0 < 16; j0 += per) {
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int j = j0; j < j0 + per; j += 2) {
          int32_t x0, x1;
          memcpy(&x0, xq + 4 * j, 4);
          memcpy(&x1, xq + 4 * j + 4, 4);
          s0 = _mm512_dpbusd_epi32(s0, w[j], _mm512_set1_epi32(x0));
          s1 = _mm512_dpbusd_epi32(s1, w[j + 1], _mm512_set1_epi32(x1));
        }
        const int col = c0 + 4 * j0, s = col / group; /* sub-block index in the row */
        __m512i sum = _mm512_add_epi32(s0, s1);
        if (offset) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(xoq[s]));
        const float dx = xd[col / 32];
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                            _mm512_mul_ps(_mm512_loadu_ps(wd + s * Q8_PANEL), _mm512_set1_ps(dx)), a);
        if (bias) a = _mm512_fmadd_ps(_mm512_loadu_ps(wm + s * Q8_PANEL), _mm512_set1_ps(xdq[col / 32]), a);
      }
      acc[m] = a;
    }
  }
  for (int m = 0; m < M; m++) _mm512_storeu_ps(out + Q8_PANEL * m, acc[m]);
}

Q8_TARGET static void panel_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm,
                                 const q8_acts *x, int K, int M, float *out) {
#define DOTS(G, O, B)                                                                                                  \
  if (f->group == (G) && f->offset == (O) && f->bias == (B)) return panel_dots_of(G, O, B, wt, wd, wm, x, K, M, out);
  Q8_SHAPES(DOTS)
#undef DOTS
  panel_dots_of(f->group, f->offset, f->bias, wt, wd, wm, x, K, M, out);
}

/* Asked once: CPUID traps to the hypervisor in a virtual machine
 * (dequant_avx2.c). Any thread may compute it first; all compute the same. */
static bool cpu_has(void) {
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && rg_cpu_has_avx2_fma_f16c();
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
}

const q8_kernels q8_kernels_avx512 = {"avx512", Q8_UNPACKERS, quantize_block, panel_dots, cpu_has};
/* AMX's tiles multiply what these decoders and this quantizer produce
 * (backend/cpu/q8/amx.c), for panels of at least Q8_AMX_MIN_ROWS rows; fewer
 * rows run this file's panel_dots. */
static void amx_panel_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm, const q8_acts *x,
                           int K, int M, float *out) {
  if (M < Q8_AMX_MIN_ROWS)
    panel_dots(f, wt, wd, wm, x, K, M, out);
  else
    q8_amx_tile_dots(f, wt, wd, wm, x, K, M, out);
}

bool q8_amx_cpu_has(void) { return cpu_has() && q8_amx_tiles_usable(); }

const q8_kernels q8_kernels_amx = {"amx", Q8_UNPACKERS, quantize_block, amx_panel_dots, q8_amx_cpu_has};
