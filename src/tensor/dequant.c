/* dequant.c: the dtype table and conversion of weight rows to float32.
 *
 * Each quantized format is decoded exactly as ggml's dequantize_row_* does
 * (ggml-quants.c), with the same float operations in the same order, so the
 * results are bit-identical to ggml built without FMA contraction. Blocks are
 * read with memcpy-based loads because GGUF blocks (18, 20, 22 ... bytes) are
 * not aligned for their f16 fields.
 *
 * Block layouts (ggml-common.h; "d", "m"/"dmin" are f16 scales):
 *   q4_0 {d, qs[16]}            q4_1 {d, m, qs[16]}
 *   q5_0 {d, qh[4], qs[16]}     q5_1 {d, m, qh[4], qs[16]}
 *   q8_0 {d, qs[32] int8}       q8_1 {d, s, qs[32] int8}
 *   q2_K {scales[16], qs[64], d, dmin}
 *   q3_K {hmask[32], qs[64], scales[12], d}
 *   q4_K {d, dmin, scales[12], qs[128]}
 *   q5_K {d, dmin, scales[12], qh[32], qs[128]}
 *   q6_K {ql[128], qh[64], scales[16] int8, d}
 *   q8_K {float d, qs[256] int8, bsums[16] int16}
 */
#include "tensor/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "tensor/dequant_simd.h"
#include "util/error.h"

/* Compiling with FMA contraction cannot change results: in every "q*d + m"
 * below the product is exact (an 11-bit f16 mantissa times at most a 6-bit
 * scale and a 5-bit quant fits in float's 24 bits), so fused and unfused
 * forms round once, at the add. Only q6_K's d*sc*q rounds in a product, and it
 * has no add to fuse with. */

enum { QK = 32, QK_K = 256 };

/* ---------------------------------------------------------------- scalars */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Branch-free binary16 -> binary32 (the FP16 library's method, used by ggml);
 * exact for every input including subnormals, infinities and NaNs. */
static inline float fp16_to_fp32(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float normalized = f32_from_bits((two_w >> 4) + exp_offset) * 0x1.0p-112f;
  const float denormalized = f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t denormalized_cutoff = 1u << 27;
  return f32_from_bits(sign | (two_w < denormalized_cutoff ? f32_bits(denormalized) : f32_bits(normalized)));
}

float rg_fp16_to_fp32(uint16_t h) { return fp16_to_fp32(h); }

/* Round-to-nearest-even binary32 -> binary16 (FP16 library / ggml): the
 * scaling by 2^112 * 2^-110 lets the FPU do the rounding; NaN -> 0x7E00. */
uint16_t rg_fp32_to_fp16(float f) {
  float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = f32_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = f32_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float rg_bf16_to_fp32(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

uint16_t rg_fp32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  /* NaN: keep sign and top payload bits, force the quiet bit (so that
   * truncation cannot turn a NaN into an infinity). */
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 64);
  return (uint16_t)((u + (0x7FFFu + ((u >> 16) & 1))) >> 16);
}

static inline float load_f16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

/* ---------------------------------------------------------------- plain types */

/* Every row function converts NB blocks starting at X into Y. */
typedef rg_dequant_fn dequant_fn;

static void row_f32(const uint8_t *x, float *y, int64_t nb) { memcpy(y, x, (size_t)nb * 4); }

static void row_f16(const uint8_t *x, float *y, int64_t nb) {
#pragma omp simd
  for (int64_t i = 0; i < nb; i++) {
    uint16_t h;
    memcpy(&h, x + 2 * i, 2);
    y[i] = fp16_to_fp32(h);
  }
}

static void row_bf16(const uint8_t *x, float *y, int64_t nb) {
#pragma omp simd
  for (int64_t i = 0; i < nb; i++) {
    uint16_t b;
    memcpy(&b, x + 2 * i, 2);
    y[i] = f32_from_bits((uint32_t)b << 16);
  }
}

/* ---------------------------------------------------------------- 32-element blocks */

static void row_q4_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 18, y += QK) {
    const float d = load_f16(x);
    const uint8_t *qs = x + 2;
#pragma omp simd
    for (int j = 0; j < QK / 2; j++) {
      y[j] = ((qs[j] & 0x0F) - 8) * d;
      y[j + QK / 2] = ((qs[j] >> 4) - 8) * d;
    }
  }
}

static void row_q4_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 20, y += QK) {
    const float d = load_f16(x), m = load_f16(x + 2);
    const uint8_t *qs = x + 4;
#pragma omp simd
    for (int j = 0; j < QK / 2; j++) {
      y[j] = (qs[j] & 0x0F) * d + m;
      y[j + QK / 2] = (qs[j] >> 4) * d + m;
    }
  }
}

/* q5: bit j of the 32-bit qh is the fifth bit of element j. */
static void row_q5_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 22, y += QK) {
    const float d = load_f16(x);
    uint32_t qh;
    memcpy(&qh, x + 2, 4);
    const uint8_t *qs = x + 6;
#pragma omp simd
    for (int j = 0; j < QK / 2; j++) {
      const int xh0 = ((qh >> j) << 4) & 0x10;
      const int xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = (((qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + QK / 2] = (((qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

static void row_q5_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 24, y += QK) {
    const float d = load_f16(x), m = load_f16(x + 2);
    uint32_t qh;
    memcpy(&qh, x + 4, 4);
    const uint8_t *qs = x + 8;
#pragma omp simd
    for (int j = 0; j < QK / 2; j++) {
      const int xh0 = ((qh >> j) << 4) & 0x10;
      const int xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((qs[j] & 0x0F) | xh0) * d + m;
      y[j + QK / 2] = ((qs[j] >> 4) | xh1) * d + m;
    }
  }
}

/* q8_0 and q8_1 share the int8 body; q8_1's extra f16 (the sum) is unused. */
static inline void q8_block(const int8_t *qs, float d, float *y) {
#pragma omp simd
  for (int j = 0; j < QK; j++) y[j] = qs[j] * d;
}

static void row_q8_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 34, y += QK) q8_block((const int8_t *)(x + 2), load_f16(x), y);
}

static void row_q8_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 36, y += QK) q8_block((const int8_t *)(x + 4), load_f16(x), y);
}

/* ---------------------------------------------------------------- k-quants (256-element blocks) */

static void row_q2_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 84) {
    const uint8_t *scales = x, *q = x + 16;
    const float d = load_f16(x + 80), min = load_f16(x + 82);
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        /* Two groups of 16 per shift, each with its 4-bit scale and min. */
        for (int half = 0; half < 2; half++) {
          const uint8_t sc = scales[is++];
          const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
          const uint8_t *qq = q + 16 * half;
#pragma omp simd
          for (int l = 0; l < 16; l++) y[l] = dl * ((qq[l] >> shift) & 3) - ml;
          y += 16;
        }
      }
    }
  }
}

static void row_q3_k(const uint8_t *x, float *y, int64_t nb) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < nb; i++, x += 110) {
    const uint8_t *hm = x, *q = x + 32;
    const float d_all = load_f16(x + 108);
    /* Unpack the sixteen 6-bit scales (low 4 bits in bytes 0-7, high 2 bits
     * in bytes 8-11), exactly as ggml does with 32-bit masks. */
    uint32_t aux[4];
    memcpy(aux, x + 96, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    memcpy(scales, aux, 16);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; half++) {
          const float dl = d_all * (scales[is++] - 32);
          const uint8_t *qq = q + 16 * half, *hh = hm + 16 * half;
#pragma omp simd
          for (int l = 0; l < 16; l++) y[l] = dl * (((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4));
          y += 16;
        }
      }
    }
  }
}

static void row_q4_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 144) {
    const float d = load_f16(x), min = load_f16(x + 2);
    const uint8_t *scales = x + 4, *q = x + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
#pragma omp simd
      for (int l = 0; l < 32; l++) {
        y[l] = d1 * (q[l] & 0xF) - m1;
        y[l + 32] = d2 * (q[l] >> 4) - m2;
      }
      y += 64;
    }
  }
}

static void row_q5_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 176) {
    const float d = load_f16(x), min = load_f16(x + 2);
    const uint8_t *scales = x + 4, *qh = x + 16, *ql = x + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      scale_min_k4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
#pragma omp simd
      for (int l = 0; l < 32; l++) {
        y[l] = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        y[l + 32] = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      }
      y += 64;
    }
  }
}

static void row_q6_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 210) {
    const float d = load_f16(x + 208);
    const uint8_t *ql = x, *qh = x + 128;
    const int8_t *sc = (const int8_t *)(x + 192);
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
#pragma omp simd
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

static void row_q8_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 292, y += QK_K) {
    float d;
    memcpy(&d, x, 4);
    const int8_t *qs = (const int8_t *)(x + 4);
#pragma omp simd
    for (int j = 0; j < QK_K; j++) y[j] = d * qs[j];
  }
}

/* ---------------------------------------------------------------- table */

typedef struct {
  rg_dtype_info info;
  dequant_fn row;
} dtype_entry;

#define PLAIN(name, bytes, fn) {{name, 1, bytes, fn != NULL}, fn}
#define BLOCK(name, elems, bytes, fn) {{name, elems, bytes, 1}, fn}

/* Indexed by ggml type id; entries without a name are ids refgeo does not know
 * (ggml's removed q4_2/q4_3 and the iq* formats). */
static const dtype_entry DTYPES[RG_DTYPE_COUNT] = {
    [RG_F32] = PLAIN("f32", 4, row_f32),
    [RG_F16] = PLAIN("f16", 2, row_f16),
    [RG_Q4_0] = BLOCK("q4_0", QK, 18, row_q4_0),
    [RG_Q4_1] = BLOCK("q4_1", QK, 20, row_q4_1),
    [RG_Q5_0] = BLOCK("q5_0", QK, 22, row_q5_0),
    [RG_Q5_1] = BLOCK("q5_1", QK, 24, row_q5_1),
    [RG_Q8_0] = BLOCK("q8_0", QK, 34, row_q8_0),
    [RG_Q8_1] = BLOCK("q8_1", QK, 36, row_q8_1),
    [RG_Q2_K] = BLOCK("q2_K", QK_K, 84, row_q2_k),
    [RG_Q3_K] = BLOCK("q3_K", QK_K, 110, row_q3_k),
    [RG_Q4_K] = BLOCK("q4_K", QK_K, 144, row_q4_k),
    [RG_Q5_K] = BLOCK("q5_K", QK_K, 176, row_q5_k),
    [RG_Q6_K] = BLOCK("q6_K", QK_K, 210, row_q6_k),
    [RG_Q8_K] = BLOCK("q8_K", QK_K, 292, row_q8_k),
    [RG_I8] = PLAIN("i8", 1, NULL),
    [RG_I16] = PLAIN("i16", 2, NULL),
    [RG_I32] = PLAIN("i32", 4, NULL),
    [RG_I64] = PLAIN("i64", 8, NULL),
    [RG_F64] = PLAIN("f64", 8, NULL),
    [RG_BF16] = PLAIN("bf16", 2, row_bf16),
};

static const dtype_entry *entry(int type) {
  if (type < 0 || type >= RG_DTYPE_COUNT || !DTYPES[type].info.name) return NULL;
  return &DTYPES[type];
}

const rg_dtype_info *rg_dtype_get(int type) {
  const dtype_entry *e = entry(type);
  return e ? &e->info : NULL;
}

size_t rg_dtype_row_bytes(int type, int64_t n) {
  const dtype_entry *e = entry(type);
  size_t bytes;
  if (!e || n < 0 || n % e->info.block_elems != 0) return 0;
  /* Checked: a file-supplied n such as 2^62 + 16 f32 elements would
   * otherwise wrap around to a small byte count (issue 17). */
  if (__builtin_mul_overflow((uint64_t)(n / e->info.block_elems), (uint64_t)e->info.block_bytes, &bytes)) return 0;
  return bytes;
}

static int convert(int type, const void *src, float *dst, int64_t n, bool simd) {
  const dtype_entry *e = entry(type);
  if (!e || !e->row) return rg_error_set("dequantize: cannot convert type %s to f32", e ? e->info.name : "(unknown)");
  if (n % e->info.block_elems != 0)
    return rg_error_set("dequantize: %lld %s elements are not a whole number of %d-element blocks", (long long)n,
                        e->info.name, e->info.block_elems);
  const dequant_fn fast = simd ? rg_dequant_avx2_row(type) : NULL;
  (fast ? fast : e->row)(src, dst, n / e->info.block_elems);
  return 0;
}

int rg_dequantize_row(int type, const void *src, float *dst, int64_t n) { return convert(type, src, dst, n, true); }

int rg_dequantize_row_portable(int type, const void *src, float *dst, int64_t n) {
  return convert(type, src, dst, n, false);
}

/* gguf-py's Q8_0 rule (gguf/quants.py, Q8_0.quantize_blocks), the one its
 * converters write: d = max|x| / 127 in float32, q = x / d rounded half
 * away from zero (np_roundf, C's roundf), 0 where d is 0; d stored as f16.
 * ggml's C reference multiplies by 1/d instead, which can differ by one at
 * a tie; test_dequant checks these bytes against gguf-py's. */
void rg_quantize_row_q8_0(const float *src, void *dst, int64_t n) {
  uint8_t *out = dst;
  for (int64_t b = 0; b < n / QK; b++, src += QK, out += 34) {
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(src[j]));
    const float d = amax / 127.0f;
    const uint16_t h = rg_fp32_to_fp16(d);
    memcpy(out, &h, sizeof h);
    for (int j = 0; j < QK; j++) out[2 + j] = (uint8_t)(int8_t)(d != 0 ? roundf(src[j] / d) : 0.0f);
  }
}
