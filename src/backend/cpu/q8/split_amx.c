/* backend/cpu/q8/split_amx.c: the kernels of the split products
 * (backend/cpu/q8/q8.c, cpu_matmul_split): float32-exact products of float32
 * activations with block-quantized weights on AMX-BF16 tiles.
 *
 * Why: a prompt's products on a small model's float32 copy run at
 * OpenBLAS's sgemm speed, 16 multiply-adds a cycle per FMA unit, and in a
 * 16 x 128 prefill of SmolLM2 they were 87% of the time. One TDPBF16PS
 * does 16 x 16 x 32 multiply-adds of bf16 pairs into float32 sums.
 *
 * Why exact: a block-quantized weight is wd (u - o) + wm with u - o a
 * small integer (-128..255), which bf16 (8 significant bits) holds
 * exactly. A float32 activation x is cut into three bf16 parts by
 * truncation, h = x with its low 16 bits cleared, then m and l the same
 * of x - h and x - h - m: 8 + 8 + 8 bits, so h + m + l = x exactly. Each
 * part times (u - o) is exact in float32, and the tile sums them in
 * float32. Per sub-block of G elements:
 *     S = sum_k (l_k + m_k + h_k) (u_k - o)      (tiles, float32 sums)
 *     acc = fma(S, wd, acc);  acc = fma(wm, sum_k x_k, acc)   (bias formats)
 * so the product differs from the exact one by float32 rounding of sums,
 * as sgemm's does, not by any rounding of x or w (test_split_matmul
 * bounds it against a double-precision product).
 *
 * Layouts (made by the functions below, read by the tile product):
 *  - activations, per group of 16 rows: per sub-block s and part p (h, m,
 *    l) a 16 x G bf16 tile, row r at ((s * 3 + p) * 16 + r) * G; so each
 *    tile load reads contiguous bytes. Σx per row and block of 32 beside.
 *  - a decoded weight panel (backend/cpu/q8/q8_internal.h: register j holds
 *    elements 4j..4j+3 of 16 rows) becomes the B tiles of TDPBF16PS:
 *    bf16 row i holds elements 2i and 2i+1 of the 16 weight rows, (u - o)
 *    in pairs; sub-block s starts at row s G / 2.
 *
 * The tile product multiplies 32 activation rows by 32 weight rows (two
 * row groups x two panels, four sum tiles): a sub-block's three parts
 * accumulate into the same sum tile one after another, so a single tile
 * would wait on TDPBF16PS's latency three times; four independent sums
 * keep the tile unit busy (on SmolLM2's 576 x 1536: 2.6x OpenBLAS per
 * thread, against 1.7x with one sum tile). */
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/q8/q8_internal.h"

#define SPLIT_TARGET                                                                                                   \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

/* The tiles: four sums (row group a, panel b at 2a + b), one part of two
 * row groups' activations (A), the two panels' weights (B). */
#define TILE_A0 4
#define TILE_A1 5
#define TILE_B0 6
#define TILE_B1 7

enum { SPLIT_PARTS = 3 };

/* x's 16 floats into three bf16 parts at h, m, l (h + m + l == x). */
SPLIT_TARGET static inline void split16(__m512 x, uint16_t *h, uint16_t *m, uint16_t *l) {
  const __m512i high16 = _mm512_set1_epi32((int)0xFFFF0000u);
  const __m512i hi = _mm512_and_si512(_mm512_castps_si512(x), high16);
  const __m512 r1 = _mm512_sub_ps(x, _mm512_castsi512_ps(hi)); /* exact: x's low 16 bits */
  const __m512i mi = _mm512_and_si512(_mm512_castps_si512(r1), high16);
  const __m512 r2 = _mm512_sub_ps(r1, _mm512_castsi512_ps(mi)); /* exact, at most 8 bits */
  const __m512i li = _mm512_and_si512(_mm512_castps_si512(r2), high16);
  _mm256_storeu_si256((__m256i *)h, _mm512_cvtepi32_epi16(_mm512_srli_epi32(hi, 16)));
  _mm256_storeu_si256((__m256i *)m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(mi, 16)));
  _mm256_storeu_si256((__m256i *)l, _mm512_cvtepi32_epi16(_mm512_srli_epi32(li, 16)));
}

SPLIT_TARGET void split_amx_pack_row(const float *x, int K, int group, uint16_t *tiles, int r, float *sums) {
  for (int c = 0; c < K; c += 16) {
    const __m512 v = x ? _mm512_loadu_ps(x + c) : _mm512_setzero_ps();
    uint16_t *t = tiles + ((size_t)(c / group) * SPLIT_PARTS * 16 + (size_t)r) * group + c % group;
    split16(v, t, t + 16 * (size_t)group, t + 32 * (size_t)group);
  }
  if (sums)
    for (int b = 0; b < K / 32; b++)
      sums[b] = x ? _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(x + 32 * b), _mm512_loadu_ps(x + 32 * b + 16)))
                  : 0.0f;
}

SPLIT_TARGET void split_amx_panel_bf16(const uint8_t *wt, int K, int offset, uint16_t *wb) {
  /* cvtne2ps(f1, f0) holds rows 0-7 as 32-bit pairs (e0 e1)(e2 e3) per
   * row; rows 8-15 likewise: the even pairs of both are B row 2j, the odd
   * ones row 2j + 1, each weight row in 32-bit word r */
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i o = _mm512_set1_epi32(offset);
  for (int j = 0; j < K / 4; j++) {
    const __m512i v = _mm512_loadu_si512((const void *)(wt + 64 * (size_t)j));
    __m512 f[4];
    f[0] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 0)), o));
    f[1] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 1)), o));
    f[2] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 2)), o));
    f[3] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 3)), o));
    const __m512i p01 = (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0]), p23 = (__m512i)_mm512_cvtne2ps_pbh(f[3], f[2]);
    _mm512_storeu_si512((void *)(wb + 64 * (size_t)j), _mm512_permutex2var_epi32(p01, even, p23));
    _mm512_storeu_si512((void *)(wb + 64 * (size_t)j + 32), _mm512_permutex2var_epi32(p01, odd, p23));
  }
}

SPLIT_TARGET static void configure_tiles(int group) {
  const int shape = AMX_SHAPE_SPLIT + group;
  if (amx_tiles_loaded(shape)) return;
  amx_tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 4; t++) cfg.rows[t] = 16, cfg.colsb[t] = 4 * Q8_PANEL;
  for (int t = TILE_A0; t <= TILE_A1; t++) cfg.rows[t] = 16, cfg.colsb[t] = (uint16_t)(2 * group);
  for (int t = TILE_B0; t <= TILE_B1; t++) cfg.rows[t] = (uint8_t)(group / 2), cfg.colsb[t] = 4 * Q8_PANEL;
  amx_tiles_load(shape, &cfg);
}

/* One part P of sub-block S of both row groups times both panels, into
 * the four sum tiles. */
#define PART_PRODUCTS(s, p)                                                                                            \
  do {                                                                                                                 \
    _tile_loadd(TILE_A0, x0 + ((size_t)(s) * SPLIT_PARTS + (p)) * 16 * group, 2 * group);                             \
    _tile_loadd(TILE_A1, x1 + ((size_t)(s) * SPLIT_PARTS + (p)) * 16 * group, 2 * group);                             \
    _tile_dpbf16ps(0, TILE_A0, TILE_B0);                                                                               \
    _tile_dpbf16ps(1, TILE_A0, TILE_B1);                                                                               \
    _tile_dpbf16ps(2, TILE_A1, TILE_B0);                                                                               \
    _tile_dpbf16ps(3, TILE_A1, TILE_B1);                                                                               \
  } while (0)

/* Sub-block S's sums: its three parts (lowest first) into zeroed tiles. */
#define SUB_BLOCK_PRODUCTS(s)                                                                                          \
  do {                                                                                                                 \
    _tile_loadd(TILE_B0, w->bf16[0] + (size_t)(s) * 16 * group, 4 * Q8_PANEL);                                        \
    _tile_loadd(TILE_B1, w->bf16[1] + (size_t)(s) * 16 * group, 4 * Q8_PANEL);                                        \
    _tile_zero(0);                                                                                                     \
    _tile_zero(1);                                                                                                     \
    _tile_zero(2);                                                                                                     \
    _tile_zero(3);                                                                                                     \
    PART_PRODUCTS(s, 2);                                                                                               \
    PART_PRODUCTS(s, 1);                                                                                               \
    PART_PRODUCTS(s, 0);                                                                                               \
  } while (0)

#define STORE_SUMS(q)                                                                                                  \
  do {                                                                                                                 \
    _tile_stored(0, sums[q][0], 4 * Q8_PANEL);                                                                         \
    _tile_stored(1, sums[q][1], 4 * Q8_PANEL);                                                                         \
    _tile_stored(2, sums[q][2], 4 * Q8_PANEL);                                                                         \
    _tile_stored(3, sums[q][3], 4 * Q8_PANEL);                                                                         \
  } while (0)

/* Sub-block S's stored sums SUMS scaled into acc (the first one starts
 * it: zeroing acc first, a 4 KiB memset per call, was 8% of a product). */
SPLIT_TARGET static inline __attribute__((always_inline)) void scale_sums(bool bias, float sums[4][16 * Q8_PANEL],
                                                                         int s, const split_panels *w,
                                                                         const split_acts *x, int K, float *acc) {
  for (int t = 0; t < 4; t++) {
    const int a = t >> 1, b = t & 1;
    const __m512 d = _mm512_loadu_ps(w->wd[b] + s * Q8_PANEL);
    const __m512 wm = bias ? _mm512_loadu_ps(w->wm[b] + s * Q8_PANEL) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int m = 0; m < 16; m++) {
      float *out = acc + (size_t)(16 * a + m) * 32 + 16 * b;
      __m512 v = _mm512_fmadd_ps(_mm512_load_ps(sums[t] + Q8_PANEL * m), d,
                                 s ? _mm512_loadu_ps(out) : _mm512_setzero_ps());
      if (bias) v = _mm512_fmadd_ps(wm, _mm512_set1_ps(x->sums[(size_t)(16 * a + m) * (K / 32) + s]), v);
      _mm512_storeu_ps(out, v);
    }
  }
}

/* Reading a tile's stored sums right after the store waits for the store
 * to land (about 45 ns for four tiles, where the sub-block's 12 products
 * take 55): so each step stores sub-block s - 1's sums, starts sub-block
 * s's products, and scales s - 1 while they run, in two sets of buffers. */
SPLIT_TARGET static inline __attribute__((always_inline)) void products_of(int group, bool bias,
                                                                          const split_panels *w, const split_acts *x,
                                                                          int K, float *acc) {
  _Alignas(64) float sums[2][4][16 * Q8_PANEL];
  const uint16_t *x0 = x->tiles, *x1 = x->tiles + (size_t)16 * SPLIT_PARTS * K;
  const int n = K / group;
  configure_tiles(group);
  SUB_BLOCK_PRODUCTS(0);
  for (int s = 1; s < n; s++) {
    STORE_SUMS((s - 1) & 1);
    SUB_BLOCK_PRODUCTS(s);
    scale_sums(bias, sums[(s - 1) & 1], s - 1, w, x, K, acc);
  }
  STORE_SUMS((n - 1) & 1);
  scale_sums(bias, sums[(n - 1) & 1], n - 1, w, x, K, acc);
}

SPLIT_TARGET void split_amx_products(const q8_format *f, const split_panels *w, const split_acts *x, int K,
                                     float *acc) {
  if (f->group == 32 && f->bias)
    products_of(32, true, w, x, K, acc);
  else if (f->group == 32)
    products_of(32, false, w, x, K, acc);
  else
    products_of(16, false, w, x, K, acc);
}

/* AMX-BF16 (CPUID leaf 7, EDX bit 22) beside the 8-bit AMX kernels, whose
 * check asks Linux for the tile state, and AVX-512 BF16 (leaf 7 sub-leaf
 * 1, EAX bit 5) for the panel conversion. */
bool split_amx_cpu_has(void) {
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    unsigned a, b, c, d, a1, b1, c1, d1;
    v = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) &&
        (a1 >> 5 & 1) && q8_amx_cpu_has();
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
}
