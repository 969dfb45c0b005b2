/* backend/cpu/q8/amx.c: the 8-bit products' panel kernel on AMX (Intel
 * Sapphire Rapids and later: tile registers and TDPBSUD). The AVX-512
 * kernels' weight decoders and activation quantizer are reused as they are
 * (the table q8_kernels_amx is in backend/cpu/q8/avx512.c, which calls this
 * file and never the other way round); only the multiplication differs.
 *
 * Why: on AVX-512 VNNI, 8 vpdpbusd and 8 broadcasts produce one activation
 * row's sums for one sub-block of 32 (512 multiply-adds each), and that
 * loop was half of a screened GCG step (`attack --screen`). One TDPBSUD
 * computes the same int32 sums for 16 activation rows x 16 weight rows x
 * 32 elements at once: tile A holds the rows' 32 signed bytes, tile B the
 * decoded panel's sub-block, whose layout (backend/cpu/q8/q8_internal.h:
 * register j holds elements 4j..4j+3 of every row, row r in word r) is
 * exactly the VNNI layout TDPBSUD reads for B, so no repacking is needed.
 * What remains per sub-block is the float scaling of each row's 16 sums.
 *
 * Same bits: the int32 sums are exact whatever computes them, and the
 * float operations after them are the AVX-512 kernel's, in its order
 * (acc = fma(float(S - o * qsum), wd * dx, acc), then the bias term, sub-
 * block after sub-block), so every instruction set's product is bitwise
 * the same (test_q8_matmul compares them).
 *
 * Tile state: Linux hands AMX's 8 KiB of tile data to a process only once
 * it asks (arch_prctl ARCH_REQ_XCOMP_PERM), so cpu_has asks, once; where
 * that fails (an older kernel, or a hypervisor that hides the state) the
 * AVX-512 kernels run instead. Each thread loads a tile configuration for
 * the shape it multiplies (rows M, sub-block G) and keeps it loaded until
 * another shape comes; the split products (backend/cpu/q8/split_amx.c) load
 * theirs through the same record, and nothing else touches the tiles. */
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/cpu/q8/q8_internal.h"

#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* Linux's arch_prctl request for the tile data state (asm/prctl.h, x86
 * xstate component 18), spelt out for older headers. */
enum { ARCH_REQ_XCOMP_PERM_ = 0x1023, XFEATURE_XTILEDATA_ = 18 };

/* The tiles: two pairs of sub-blocks' sums (C), and one pair's activations
 * (A) and weights (B). Tile numbers are immediates in the instructions. */
#define TILE_C0 0
#define TILE_C1 1
#define TILE_C2 2
#define TILE_C3 3
#define TILE_A0 4
#define TILE_A1 5
#define TILE_B0 6
#define TILE_B1 7

static __thread int loaded_shape = -1; /* this thread's tile configuration, or -1 */

bool amx_tiles_loaded(int shape) { return loaded_shape == shape; }

AMX_TARGET void amx_tiles_load(int shape, const amx_tile_config *cfg) {
  /* not _tile_loadconfig: GCC 12's declares an 8-byte operand, and the
   * stores of the rest of CFG were dropped as dead */
  __asm__ volatile("ldtilecfg %0" ::"m"(*cfg));
  loaded_shape = shape;
}

AMX_TARGET static void configure_tiles(int M, int group) {
  const int shape = M * 64 + group;
  if (amx_tiles_loaded(shape)) return;
  amx_tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = TILE_C0; t <= TILE_C3; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = 4 * Q8_PANEL;
  for (int t = TILE_A0; t <= TILE_A1; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = (uint16_t)group;
  for (int t = TILE_B0; t <= TILE_B1; t++) cfg.rows[t] = (uint8_t)(group / 4), cfg.colsb[t] = 4 * Q8_PANEL;
  amx_tiles_load(shape, &cfg);
}

/* Sub-block S's sums of the M rows (sums[16 m + r]) scaled into acc[m], as
 * panel_dots_of in backend/cpu/q8/avx512.c does; the rows' o * qsum and
 * dx * qsum come made (q8_acts), so that each row is 4 or 5 vector
 * operations with their scalars broadcast from memory. */
AMX_TARGET static inline __attribute__((always_inline)) void scale_sums(int group, int offset, bool bias,
                                                                       const int32_t *sums, int s, const float *wd,
                                                                       const float *wm, const q8_acts *x, int K,
                                                                       int M, __m512 *acc) {
  const int col = group * s;
  const __m512 d = _mm512_loadu_ps(wd + s * Q8_PANEL);
  const __m512 b = bias ? _mm512_loadu_ps(wm + s * Q8_PANEL) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int m = 0; m < M; m++) {
    __m512i sum = _mm512_load_si512((const void *)(sums + Q8_PANEL * m));
    if (offset) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(x->offset_qsum[(size_t)m * (K / group) + s]));
    const float dx = x->d[(size_t)m * (K / 32) + col / 32];
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[m]);
    if (bias) acc[m] = _mm512_fmadd_ps(b, _mm512_set1_ps(x->dx_qsum[(size_t)m * (K / 32) + col / 32]), acc[m]);
  }
}

/* Sub-blocks 2p and 2p + 1 into tiles CA and CB. */
#define TILE_DOTS_PAIR(CA, CB, p)                                                                                      \
  do {                                                                                                                 \
    _tile_loadd(TILE_A0, x->q + (size_t)group * (2 * (p)), K);                                                         \
    _tile_loadd(TILE_B0, wt + wt_step * (2 * (p)), 4 * Q8_PANEL);                                                      \
    _tile_zero(CA);                                                                                                    \
    _tile_dpbsud(CA, TILE_A0, TILE_B0);                                                                                \
    _tile_loadd(TILE_A1, x->q + (size_t)group * (2 * (p) + 1), K);                                                     \
    _tile_loadd(TILE_B1, wt + wt_step * (2 * (p) + 1), 4 * Q8_PANEL);                                                  \
    _tile_zero(CB);                                                                                                    \
    _tile_dpbsud(CB, TILE_A1, TILE_B1);                                                                                \
  } while (0)

/* Tiles CA and CB (sub-blocks 2p and 2p + 1) to sums, and sums scaled into
 * acc. */
#define TILE_STORE_PAIR(CA, CB)                                                                                        \
  do {                                                                                                                 \
    _tile_stored(CA, sums[0], 4 * Q8_PANEL);                                                                           \
    _tile_stored(CB, sums[1], 4 * Q8_PANEL);                                                                           \
  } while (0)
#define SCALE_PAIR(p)                                                                                                  \
  do {                                                                                                                 \
    scale_sums(group, offset, bias, sums[0], 2 * (p), wd, wm, x, K, M, acc);                                           \
    scale_sums(group, offset, bias, sums[1], 2 * (p) + 1, wd, wm, x, K, M, acc);                                       \
  } while (0)

/* GROUP, OFFSET, BIAS (and M = 16, the usual case) are constants at each
 * call, so the row loops unroll and acc stays in registers. K is a
 * multiple of 64, so the sub-blocks come in pairs. The tile unit runs its
 * instructions in order, and a tile store waits for every product issued
 * before it: so each step stores the previous pair's sums first, then
 * starts this pair's products (in the other set of sum tiles), and scales
 * the stored sums while they run. */
AMX_TARGET static inline __attribute__((always_inline)) void tile_dots_of(int group, int offset, bool bias,
                                                                         const uint8_t *wt, const float *wd,
                                                                         const float *wm, const q8_acts *x, int K,
                                                                         int M, float *out) {
  _Alignas(64) int32_t sums[2][Q8_XROWS * Q8_PANEL];
  __m512 acc[Q8_XROWS];
  for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
  configure_tiles(M, group);
  const size_t wt_step = 16 * (size_t)group; /* bytes of a decoded sub-block: 16 rows x G */
  const int pairs = K / group / 2;
  TILE_DOTS_PAIR(TILE_C0, TILE_C1, 0);
  for (int p = 1; p < pairs; p++) {
    if (p & 1) {
      TILE_STORE_PAIR(TILE_C0, TILE_C1);
      TILE_DOTS_PAIR(TILE_C2, TILE_C3, p);
    } else {
      TILE_STORE_PAIR(TILE_C2, TILE_C3);
      TILE_DOTS_PAIR(TILE_C0, TILE_C1, p);
    }
    SCALE_PAIR(p - 1);
  }
  if (pairs & 1)
    TILE_STORE_PAIR(TILE_C0, TILE_C1);
  else
    TILE_STORE_PAIR(TILE_C2, TILE_C3);
  SCALE_PAIR(pairs - 1);
  for (int m = 0; m < M; m++) _mm512_storeu_ps(out + Q8_PANEL * m, acc[m]);
}

AMX_TARGET void q8_amx_tile_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm,
                                 const q8_acts *x, int K, int M, float *out) {
#define DOTS(G, O, B)                                                                                                  \
  if (f->group == (G) && f->offset == (O) && f->bias == (B)) {                                                         \
    if (M == Q8_XROWS)                                                                                                 \
      tile_dots_of(G, O, B, wt, wd, wm, x, K, Q8_XROWS, out);                                                          \
    else                                                                                                               \
      tile_dots_of(G, O, B, wt, wd, wm, x, K, M, out);                                                                 \
    return;                                                                                                            \
  }
  Q8_SHAPES(DOTS)
#undef DOTS
  tile_dots_of(f->group, f->offset, f->bias, wt, wd, wm, x, K, M, out);
}

/* CPUID leaf 7's AMX-TILE and AMX-INT8 bits and the kernel's permission
 * (the AVX-512 kernels, which these use for their scaling, are asked by
 * q8_amx_cpu_has). Asked once, as the other kernels' cpu_has. */
bool q8_amx_tiles_usable(void) {
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    unsigned a, b, c, d;
    v = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1) &&
        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0;
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
}
