/* backend_cpu_q8.c: matrix products on block-quantized weights with the
 * activations quantized to 8 bits and integer dot products: the arithmetic
 * llama.cpp runs prompts and decode steps with. Weights of
 * the RG_FORM_FILE_Q8 form take this path (backend.h); RG_FORM_FILE's
 * skinny path (backend_cpu_skinny.c) keeps float32 activations.
 *
 * Why: a decode step reads every weight once, and backend_cpu_skinny.c
 * spends about 5 instructions per weight converting the blocks to float32
 * and multiplying them; on Qwen2.5-0.5B that made a batch-1 step compute
 * bound at half of llama.cpp's speed. Here one VNNI instruction (vpdpbusd)
 * multiplies 16 weight rows by 4 activation bytes, accumulating in int32.
 *
 * The arithmetic (docs/ARCHITECTURE.md, "8-bit decode products"):
 *  - Activations: each row of x is cut into blocks of 32; a block's scale is
 *    dx = max|x| / 127 and its values q = round-half-even(x / dx) in
 *    [-127, 127] (llama.cpp's q8_0 rule with its rounding made explicit).
 *  - Weights: each format's block is unpacked to unsigned bytes u with a
 *    float scale wd and bias wm per sub-block of G elements (G = 32, or 16
 *    for q6_K) and an integer offset o per format, so that the dequantized
 *    weight is exactly wd * (u - o) + wm (the value dequant.c computes).
 *  - Per sub-block: an exact int32 sum  S = sum u*q - o * sum q,  then
 *    acc = fma((float)S, wd * dx, acc) and, for formats with a bias,
 *    acc = fma(wm, dx * (float)sum q, acc), sub-block after sub-block.
 *    |S| < 2^24, so the conversion to float is exact, and the result is
 *    the float32 evaluation of  sum_k w_k * dx_b(k) * q_k  in that order.
 * It differs from the exact product by the activations' rounding, at most
 * sum_k |w_k| * dx_b(k) / 2 (test_q8_matmul checks that bound and the
 * formula above, in double, for every format).
 *
 * Batch invariance: every (weight row, activation row) pair's result is the
 * same sequence of operations whatever the other rows are, so a sequence's
 * logits do not depend on its batch.
 *
 * Layout: a thread decodes a panel of 16 weight rows at a time, one row
 * per 32-bit lane: 16-byte windows of the 16 rows' blocks are loaded and
 * transposed by 32-bit words, so that register j of the panel holds
 * elements 4j..4j+3 of every row, and the format's bit operations then
 * work on all 16 rows at once. One vpdpbusd multiplies register j by the
 * broadcast 4 activation bytes of those elements. The decoded panel stays
 * in cache while up to PASS_ROWS activation rows, 16 at a time, are
 * multiplied with it, so a prompt decodes each weight once per 256 rows.
 *
 * Dispatch is at run time (cpu_q8_supported): AVX-512 F, BW, VL and VNNI.
 * Elsewhere, and for the other dtypes, RG_FORM_FILE_Q8 weights take the
 * float32 skinny path. */
#include <immintrin.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "model/backend_cpu_internal.h"
#include "model/dequant_simd.h"
#include "model/dtype.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

enum {
  PANEL = 16, /* weight rows per panel: one per 32-bit lane of a 512-bit register */
  XROWS = 16, /* activation rows multiplied with a panel at once (one accumulator each) */
  PASS_ROWS = 256, /* activation rows quantized per pass over the weights (the scratch) */
  CHUNK = 64, /* columns per 16 registers of a panel (4 bytes per row each) */
  QK_K = 256
};

/* Unpacks a panel of 16 weight rows of K elements (row r at
 * rows + r * row_bytes) into the layout the products read: register j of
 * the panel (64 bytes at wt + 64 j) holds elements 4j..4j+3 of every row,
 * row r in 32-bit lane r, as unsigned bytes; and per sub-block s the 16
 * rows' scales at wd + 16 s and, for formats with a bias, biases at
 * wm + 16 s. The decoders work across the 16 rows at once, one row per
 * lane: each 16-byte window of the 16 rows' blocks is transposed by 32-bit
 * words (load16x16), and the bit operations then run on all 16 rows. */
typedef struct prefetch prefetch;
typedef void (*unpack_fn)(const uint8_t *rows, size_t row_bytes, int K, uint8_t *wt, float *wd, float *wm,
                          prefetch *pf);

typedef struct {
  int block;  /* elements per block of the file format: 32 or 256 */
  int group;  /* elements per sub-block: 16 or 32 */
  int offset; /* o in w = wd * (u - o) + wm */
  bool bias;  /* wm is used */
  unpack_fn unpack;
} q8_format;

VNNI static inline float f16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* The decoders read 16 rows at a time: 16 interleaved streams, which the
 * hardware prefetcher follows badly, and DRAM then idled while the panel
 * was decoded. Each decoder step (a block of its format) fetches its share
 * of the next panel's bytes (contiguous) into L2 instead. */
struct prefetch {
  const char *next; /* the next panel, or NULL */
  size_t bytes, done, per_step;
};

static inline void prefetch_step(prefetch *pf) {
  if (!pf->next) return;
  const size_t end = pf->done + pf->per_step < pf->bytes ? pf->done + pf->per_step : pf->bytes;
  for (; pf->done < end; pf->done += 64) _mm_prefetch(pf->next + pf->done, _MM_HINT_T1);
}

/* Bytes p..p+15 of 16 rows (row r at p + r * stride): rows i, 4+i, 8+i and
 * 12+i in the four 128-bit lanes of a[i]. */
VNNI static inline void load16_rows(const uint8_t *p, size_t stride, __m512i a[4]) {
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

/* The same bytes transposed by 32-bit words: out[j] holds bytes 4j..4j+3
 * of row r in lane r (each 128-bit lane's 4 x 4 words transposed). */
VNNI static inline void load16x16(const uint8_t *p, size_t stride, __m512i out[4]) {
  __m512i a[4];
  load16_rows(p, stride, a);
  const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* Words 0 and 1 (bytes p..p+7) of the 16 rows, row r in lane r: the half
 * of load16x16 a block's header needs (a gather instruction was slower).
 * Every format's block is at least 16 bytes long. */
VNNI static inline void load16_head(const uint8_t *p, size_t stride, __m512i *w0, __m512i *w1) {
  __m512i a[4];
  load16_rows(p, stride, a);
  const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t2 = _mm512_unpacklo_epi32(a[2], a[3]);
  *w0 = _mm512_unpacklo_epi64(t0, t2);
  *w1 = _mm512_unpackhi_epi64(t0, t2);
}

/* The f16 in the low (HIGH false) or high half of each lane, as floats. */
VNNI static inline __m512 f16_lanes(__m512i v, bool high) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(high ? _mm512_srli_epi32(v, 16) : v));
}

VNNI static inline void store(uint8_t *wt, int j, __m512i v) { _mm512_storeu_si512((void *)(wt + 64 * (size_t)j), v); }

/* 32-element blocks of 16 packed nibble bytes at QS: low nibbles are
 * elements 0-15, high nibbles 16-31 (ggml's order). Registers 8b..8b+7. */
VNNI static inline void nibble_block(const uint8_t *qs, size_t stride, uint8_t *wt, int b) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i q[4];
  load16x16(qs, stride, q);
  for (int j = 0; j < 4; j++) {
    store(wt, 8 * b + j, _mm512_and_si512(q[j], low4));
    store(wt, 8 * b + 4 + j, _mm512_and_si512(_mm512_srli_epi16(q[j], 4), low4));
  }
}

/* q4_0 {f16 d, 16 bytes} and q4_1 {f16 d, f16 m, 16 bytes}. */
VNNI static inline __attribute__((always_inline)) void unpack_q4(const uint8_t *x, size_t rb, int K, uint8_t *wt,
                                                                float *wd, float *wm, prefetch *pf, bool with_min) {
  const int header = with_min ? 4 : 2;
  for (int b = 0; b < K / 32; b++, x += header + 16) {
    prefetch_step(pf);
    __m512i dm, unused;
    load16_head(x, rb, &dm, &unused);
    _mm512_storeu_ps(wd + 16 * b, f16_lanes(dm, false));
    if (with_min) _mm512_storeu_ps(wm + 16 * b, f16_lanes(dm, true));
    nibble_block(x + header, rb, wt, b);
  }
}

VNNI static void unpack_q4_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  unpack_q4(x, rb, K, wt, wd, wm, pf, false);
}

VNNI static void unpack_q4_1(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  unpack_q4(x, rb, K, wt, wd, wm, pf, true);
}

/* q5_0: bit e of the 32-bit qh is element e's fifth bit. Register 8b + j
 * holds elements 4j..4j+3: their bits are bits 0-3 or 4-7 of qh's byte
 * j / 2, spread to one byte each by a shuffle and a per-byte bit test. */
VNNI static void unpack_q5_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  /* a byte shuffle indexes within 128-bit lanes: byte 4i of word i */
  const __m512i word_bytes = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
  for (int b = 0; b < K / 32; b++, x += 22) {
    prefetch_step(pf);
    __m512i w0, w1;
    load16_head(x, rb, &w0, &w1); /* d, then qh from bytes 2..5 */
    _mm512_storeu_ps(wd + 16 * b, f16_lanes(w0, false));
    const __m512i qh = _mm512_or_si512(_mm512_srli_epi32(w0, 16), _mm512_slli_epi32(w1, 16));
    __m512i q[4];
    load16x16(x + 6, rb, q);
    for (int j = 0; j < 8; j++) {
      const __m512i nib = j < 4 ? _mm512_and_si512(q[j], low4) : _mm512_and_si512(_mm512_srli_epi16(q[j - 4], 4), low4);
      const __m512i byte = _mm512_shuffle_epi8(qh, _mm512_add_epi8(word_bytes, _mm512_set1_epi8((char)(j / 2))));
      const __mmask64 set = _mm512_test_epi8_mask(byte, _mm512_set1_epi32(j % 2 ? (int)0x80402010 : 0x08040201));
      store(wt, 8 * b + j, _mm512_mask_add_epi8(nib, set, nib, sixteen));
    }
  }
}

/* q8_0: signed bytes made unsigned by adding 128 (the offset). */
VNNI static void unpack_q8_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int b = 0; b < K / 32; b++, x += 34) {
    prefetch_step(pf);
    __m512i head, unused;
    load16_head(x, rb, &head, &unused);
    _mm512_storeu_ps(wd + 16 * b, f16_lanes(head, false));
    for (int h = 0; h < 2; h++) {
      __m512i q[4];
      load16x16(x + 2 + 16 * h, rb, q);
      for (int j = 0; j < 4; j++) store(wt, 8 * b + 4 * h + j, _mm512_xor_si512(q[j], flip));
    }
  }
}

/* q4_K: 8 sub-blocks of 32 per 256; sub-block 2i takes the low nibbles of
 * bytes 32i..32i+31, sub-block 2i+1 their high nibbles; element value
 * (d * sc) * q - dmin * m (dequant.c). The 6-bit scales are decoded row by
 * row. */
VNNI static void unpack_q4_k(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int b = 0; b < K / QK_K; b++, x += 144) {
    prefetch_step(pf);
    for (int r = 0; r < 16; r++) {
      const uint8_t *row = x + (size_t)r * rb;
      const float d = f16(row), dmin = f16(row + 2);
      for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        scale_min_k4(s, row + 4, &sc, &m);
        wd[16 * (8 * b + s) + r] = d * sc;
        wm[16 * (8 * b + s) + r] = -(dmin * m);
      }
    }
    for (int i = 0; i < 4; i++)
      for (int h = 0; h < 2; h++) {
        __m512i q[4];
        load16x16(x + 16 + 32 * i + 16 * h, rb, q);
        const int j0 = 64 * b + 16 * i + 4 * h; /* register of elements 64i + 16h + 4j */
        for (int j = 0; j < 4; j++) {
          store(wt, j0 + j, _mm512_and_si512(q[j], low4));
          store(wt, j0 + 8 + j, _mm512_and_si512(_mm512_srli_epi16(q[j], 4), low4));
        }
      }
  }
}

/* q6_K: 16 sub-blocks of 16 per 256 with int8 scales; in each half of 128,
 * element l + 32p (l < 32) is a nibble of ql (low of ql[l] for p = 0 and 2's
 * high, ql[l + 32] for p = 1 and 3) with bits 2p..2p+1 of qh[l] as bits
 * 4-5; value (d * sc) * (q - 32) (dequant.c). */
VNNI static void unpack_q6_k(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm, prefetch *pf) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  for (int b = 0; b < K / QK_K; b++, x += 210) {
    prefetch_step(pf);
    for (int r = 0; r < 16; r++) {
      const uint8_t *row = x + (size_t)r * rb;
      const float d = f16(row + 208);
      for (int s = 0; s < 16; s++) wd[16 * (16 * b + s) + r] = d * ((const int8_t *)(row + 192))[s];
    }
    for (int half = 0; half < 2; half++)
      for (int h = 0; h < 2; h++) { /* l = 16h + 4j */
        __m512i a[4], c[4], q[4];
        load16x16(x + 64 * half + 16 * h, rb, a);
        load16x16(x + 64 * half + 32 + 16 * h, rb, c);
        load16x16(x + 128 + 32 * half + 16 * h, rb, q);
        const int j0 = 64 * b + 32 * half + 4 * h;
        for (int j = 0; j < 4; j++) {
          const __m512i lo_a = _mm512_and_si512(a[j], low4), lo_c = _mm512_and_si512(c[j], low4);
          const __m512i hi_a = _mm512_and_si512(_mm512_srli_epi16(a[j], 4), low4);
          const __m512i hi_c = _mm512_and_si512(_mm512_srli_epi16(c[j], 4), low4);
          const __m512i qh = q[j];
          store(wt, j0 + j, _mm512_or_si512(lo_a, _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45)));
          store(wt, j0 + 8 + j, _mm512_or_si512(lo_c, _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45)));
          store(wt, j0 + 16 + j, _mm512_or_si512(hi_a, _mm512_and_si512(qh, bits45)));
          store(wt, j0 + 24 + j, _mm512_or_si512(hi_c, _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45)));
        }
      }
  }
}

static const q8_format *format_of(int type) {
  static const q8_format q4_0 = {32, 32, 8, false, unpack_q4_0}, q4_1 = {32, 32, 0, true, unpack_q4_1},
                         q5_0 = {32, 32, 16, false, unpack_q5_0}, q8_0 = {32, 32, 128, false, unpack_q8_0},
                         q4_k = {QK_K, 32, 0, true, unpack_q4_k}, q6_k = {QK_K, 16, 32, false, unpack_q6_k};
  switch (type) {
  case RG_Q4_0: return &q4_0;
  case RG_Q4_1: return &q4_1;
  case RG_Q5_0: return &q5_0;
  case RG_Q8_0: return &q8_0;
  case RG_Q4_K: return &q4_k;
  case RG_Q6_K: return &q6_k;
  default: return NULL;
  }
}

/* Asked once: CPUID traps to the hypervisor in a virtual machine
 * (dequant_avx2.c). Any thread may compute it first; all compute the same. */
static bool have_vnni512(void) {
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
}

bool cpu_q8_supported(int type, int64_t cols) { return have_vnni512() && format_of(type) && cols % CHUNK == 0; }

/* A thread's panel scratch for rows of K elements: the unpacked bytes, wd
 * and wm (at most K / 16 sub-blocks x 16 lanes), and a zero-padded copy of
 * a last panel of fewer than 16 rows (row bytes <= 34 per 32 elements);
 * 64 for alignment. */
static size_t panel_scratch_bytes(size_t K) { return PANEL * K + 2 * K * sizeof(float) + PANEL * (K + K / 16) + 64; }

size_t cpu_q8_scratch_bytes(int64_t cols, int threads) {
  const size_t K = (size_t)cols;
  const size_t acts = PASS_ROWS * (K + K / 32 * sizeof(float) + K / 16 * sizeof(int32_t)) + 3 * 64;
  return acts + (size_t)threads * panel_scratch_bytes(K);
}

static inline void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* One block of 32 elements of x quantized: q[32], its scale *d and the
 * sums of q over each half (sum16[0..1]). */
VNNI static void quantize_block(const float *x, int8_t *q, float *d, int32_t *sum16) {
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

typedef struct {
  const int8_t *q;
  const float *d;
  const int32_t *sum16;
} q8_acts;

/* acc[m] += the unpacked panel (wt, wd, wm) times row m of x, for M rows.
 * GROUP, OFFSET and BIAS are constants at each call (panel_dots), so the
 * sub-block loop is unrolled. */
VNNI static inline __attribute__((always_inline)) void panel_dots_of(int group, int offset, bool bias,
                                                                    const uint8_t *wt, const float *wd,
                                                                    const float *wm, const q8_acts *x, int K, int M,
                                                                    __m512 *acc) {
  const int per = group / 4; /* registers per sub-block */
  for (int c0 = 0; c0 < K; c0 += CHUNK) {
    __m512i w[16];
    for (int j = 0; j < 16; j++) w[j] = _mm512_loadu_si512((const void *)(wt + 16 * (size_t)c0 + 64 * j));
    for (int m = 0; m < M; m++) {
      const int8_t *xq = x->q + (size_t)m * K + c0;
      const float *xd = x->d + (size_t)m * (K / 32);
      const int32_t *xs = x->sum16 + (size_t)m * (K / 16);
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
        const int qsum = group == 16 ? xs[col / 16] : xs[col / 16] + xs[col / 16 + 1];
        __m512i sum = _mm512_add_epi32(s0, s1);
        if (offset) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(offset * qsum));
        const float dx = xd[col / 32];
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(_mm512_loadu_ps(wd + s * PANEL), _mm512_set1_ps(dx)),
                            a);
        if (bias) a = _mm512_fmadd_ps(_mm512_loadu_ps(wm + s * PANEL), _mm512_set1_ps(dx * (float)qsum), a);
      }
      acc[m] = a;
    }
  }
}

VNNI static void panel_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm,
                            const q8_acts *x, int K, int M, __m512 *acc) {
#define DOTS(G, O, B)                                                                                                  \
  if (f->group == (G) && f->offset == (O) && f->bias == (B)) return panel_dots_of(G, O, B, wt, wd, wm, x, K, M, acc)
  DOTS(32, 0, true);    /* q4_1, q4_K */
  DOTS(32, 8, false);   /* q4_0 */
  DOTS(32, 16, false);  /* q5_0 */
  DOTS(32, 128, false); /* q8_0 */
  DOTS(16, 32, false);  /* q6_K */
#undef DOTS
  panel_dots_of(f->group, f->offset, f->bias, wt, wd, wm, x, K, M, acc);
}

/* One product's operands, shared by the team. */
typedef struct {
  const q8_format *f;
  const rg_bweight *w, *bias;
  float *y;
  float beta;
  int M, K, N, n_panels;
  q8_acts x;
  uint8_t *panels; /* panel_scratch_bytes(K) per thread */
} q8_job;

/* Thread TID of NT: its share of the panels, unpacked and multiplied. A
 * function of its own because OpenMP's outlined region would not carry
 * the target attribute. */
VNNI static void panels_of_thread(const q8_job *j, int tid, int nt) {
  const int K = j->K, N = j->N, M = j->M;
  const size_t rb = j->w->row_bytes;
  uint8_t *wt = align64(j->panels + (size_t)tid * panel_scratch_bytes((size_t)K));
  float *wd = (float *)(wt + (size_t)PANEL * K), *wm = wd + K;
  uint8_t *pad = (uint8_t *)(wm + K);
  const int p0 = j->n_panels * tid / nt, p1 = j->n_panels * (tid + 1) / nt;
  for (int p = p0; p < p1; p++) {
    const int r0 = p * PANEL, rows = N - r0 < PANEL ? N - r0 : PANEL;
    const uint8_t *src = row_ptr(j->w, r0);
    if (rows < PANEL) { /* the decoders read 16 rows: pad the last panel with zero rows */
      memcpy(pad, src, (size_t)rows * rb);
      memset(pad + (size_t)rows * rb, 0, (size_t)(PANEL - rows) * rb);
      src = pad;
    }
    const size_t panel_file_bytes = PANEL * rb;
    prefetch pf = {p + 1 < p1 ? (const char *)src + panel_file_bytes : NULL, panel_file_bytes, 0,
                   (panel_file_bytes / (size_t)(K / j->f->block) + 63) & ~(size_t)63};
    j->f->unpack(src, rb, K, wt, wd, wm, &pf);
    for (int m0 = 0; m0 < M; m0 += XROWS) { /* the panel stays in cache for all rows of x */
      const int mr = M - m0 < XROWS ? M - m0 : XROWS;
      const q8_acts x = {j->x.q + (size_t)m0 * K, j->x.d + (size_t)m0 * (K / 32), j->x.sum16 + (size_t)m0 * (K / 16)};
      __m512 acc[XROWS];
      for (int m = 0; m < mr; m++) acc[m] = _mm512_setzero_ps();
      panel_dots(j->f, wt, wd, wm, &x, K, mr, acc);
      for (int m = 0; m < mr; m++) {
        float lane[PANEL];
        _mm512_storeu_ps(lane, acc[m]);
        float *out = j->y + (size_t)(m0 + m) * N + r0;
        for (int r = 0; r < rows; r++)
          out[r] = j->beta != 0.0f ? out[r] + lane[r] : lane[r] + (j->bias ? j->bias->f32[r0 + r] : 0.0f);
      }
    }
  }
}

void cpu_matmul_q8(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                   float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  cpu_backend *c = cpu(be);
  int8_t *xq = align64(c->q8_scratch);
  float *xd = align64(xq + (size_t)PASS_ROWS * K);
  int32_t *xs = (int32_t *)(xd + (size_t)PASS_ROWS * (K / 32));
  q8_job job = {.f = format_of(w->t->type), .w = w, .bias = bias, .beta = beta, .K = K, .N = N,
                .n_panels = (N + PANEL - 1) / PANEL, .x = {xq, xd, xs},
                .panels = align64(xs + (size_t)PASS_ROWS * (K / 16))};
  const int team = be->threads < job.n_panels ? be->threads : job.n_panels;
  for (int m0 = 0; m0 < M; m0 += PASS_ROWS) { /* a prompt: PASS_ROWS rows per pass over the weights */
    job.M = M - m0 < PASS_ROWS ? M - m0 : PASS_ROWS;
    job.y = y->data + (size_t)m0 * N;
    const float *xm = x->data + (size_t)m0 * K;
#pragma omp parallel num_threads(team)
    {
      /* the activations, split by blocks of 32 over the team */
      const int blocks = job.M * (K / 32);
#pragma omp for schedule(static)
      for (int i = 0; i < blocks; i++) {
        const int m = i / (K / 32), b = i % (K / 32);
        quantize_block(xm + (size_t)m * K + 32 * b, xq + (size_t)m * K + 32 * b, xd + (size_t)m * (K / 32) + b,
                       xs + (size_t)m * (K / 16) + 2 * b);
      }
      panels_of_thread(&job, omp_get_thread_num(), omp_get_num_threads());
    }
  }
}
