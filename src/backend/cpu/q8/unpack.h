/* backend/cpu/q8/unpack.h: the weight decoders of the 8-bit products
 * (q8_unpack_fn, backend/cpu/q8/q8_internal.h), written once over a 512-bit
 * vector of 16 32-bit lanes, one weight row per lane. Included by each
 * instruction set's kernel file, which first defines:
 *
 *   Q8_TARGET              the function attribute of its instruction set
 *   vec                    a 512-bit vector (one register, or two halves)
 *   load16_rows(p, s, a)   bytes p..p+15 of the rows at p + r s, r < 16:
 *                          rows i, 4+i, 8+i, 12+i in 128-bit lanes 0-3 of a[i]
 *   V_UNPACKLO32, V_UNPACKHI32, V_UNPACKLO64, V_UNPACKHI64,
 *   V_SHUFFLE8             per 128-bit lane, as the x86 instructions
 *   V_AND, V_OR, V_XOR, V_ADD8, V_SRLI16, V_SLLI16, V_SRLI32, V_SLLI32,
 *   V_SET1_8, V_SET1_32, V_SET4_32 (repeated in every 128-bit lane)
 *   v_add8_where(a, t, bits, c)   a + (t & bits ? c : 0), per byte
 *   v_store(wt, j, v)      the 64 bytes at wt + 64 j
 *   store_f16_lanes(dst, v, high)  the f16 in the low (or high) half of
 *                          each 32-bit lane of v, as 16 floats at dst
 *
 * A decoder's bit operations thus run on 16 rows at once, and each
 * instruction set writes the same bytes (the layout is fixed by
 * q8_unpack_fn). */
#ifndef Q8_TARGET
#error "define Q8_TARGET and the vector operations before including backend/cpu/q8/unpack.h"
#endif

#include <string.h>

#include "tensor/dequant_simd.h"

/* Bytes p..p+15 of the 16 rows transposed by 32-bit words: out[j] holds
 * bytes 4j..4j+3 of row r in lane r (each 128-bit lane's 4 x 4 words
 * transposed). */
Q8_TARGET static inline void load16x16(const uint8_t *p, size_t stride, vec out[4]) {
  vec a[4];
  load16_rows(p, stride, a);
  const vec t0 = V_UNPACKLO32(a[0], a[1]), t1 = V_UNPACKHI32(a[0], a[1]);
  const vec t2 = V_UNPACKLO32(a[2], a[3]), t3 = V_UNPACKHI32(a[2], a[3]);
  out[0] = V_UNPACKLO64(t0, t2);
  out[1] = V_UNPACKHI64(t0, t2);
  out[2] = V_UNPACKLO64(t1, t3);
  out[3] = V_UNPACKHI64(t1, t3);
}

/* Words 0 and 1 (bytes p..p+7) of the 16 rows, row r in lane r: the half
 * of load16x16 a block's header needs (a gather instruction was slower).
 * Every format's block is at least 16 bytes long. */
Q8_TARGET static inline void load16_head(const uint8_t *p, size_t stride, vec *w0, vec *w1) {
  vec a[4];
  load16_rows(p, stride, a);
  const vec t0 = V_UNPACKLO32(a[0], a[1]), t2 = V_UNPACKLO32(a[2], a[3]);
  *w0 = V_UNPACKLO64(t0, t2);
  *w1 = V_UNPACKHI64(t0, t2);
}

/* 32-element blocks of 16 packed nibble bytes at QS: low nibbles are
 * elements 0-15, high nibbles 16-31 (ggml's order). Registers 8b..8b+7. */
Q8_TARGET static inline void nibble_block(const uint8_t *qs, size_t stride, uint8_t *wt, int b) {
  const vec low4 = V_SET1_8(0x0F);
  vec q[4];
  load16x16(qs, stride, q);
  for (int j = 0; j < 4; j++) {
    v_store(wt, 8 * b + j, V_AND(q[j], low4));
    v_store(wt, 8 * b + 4 + j, V_AND(V_SRLI16(q[j], 4), low4));
  }
}

/* q4_0 {f16 d, 16 bytes} and q4_1 {f16 d, f16 m, 16 bytes}. */
Q8_TARGET static inline __attribute__((always_inline)) void unpack_q4(const uint8_t *x, size_t rb, int K, uint8_t *wt,
                                                                     float *wd, float *wm, q8_prefetch *pf,
                                                                     bool with_min) {
  const int header = with_min ? 4 : 2;
  for (int b = 0; b < K / 32; b++, x += header + 16) {
    q8_prefetch_step(pf);
    vec dm, unused;
    load16_head(x, rb, &dm, &unused);
    store_f16_lanes(wd + 16 * b, dm, false);
    if (with_min) store_f16_lanes(wm + 16 * b, dm, true);
    nibble_block(x + header, rb, wt, b);
  }
}

Q8_TARGET static void unpack_q4_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  unpack_q4(x, rb, K, wt, wd, wm, pf, false);
}

Q8_TARGET static void unpack_q4_1(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  unpack_q4(x, rb, K, wt, wd, wm, pf, true);
}

/* q5_0: bit e of the 32-bit qh is element e's fifth bit. Register 8b + j
 * holds elements 4j..4j+3: their bits are bits 0-3 or 4-7 of qh's byte
 * j / 2, spread to one byte each by a shuffle and a per-byte bit test. */
Q8_TARGET static void unpack_q5_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  const vec low4 = V_SET1_8(0x0F), sixteen = V_SET1_8(16);
  /* a byte shuffle indexes within 128-bit lanes: byte 4i of word i */
  const vec word_bytes = V_SET4_32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
  for (int b = 0; b < K / 32; b++, x += 22) {
    q8_prefetch_step(pf);
    vec w0, w1;
    load16_head(x, rb, &w0, &w1); /* d, then qh from bytes 2..5 */
    store_f16_lanes(wd + 16 * b, w0, false);
    const vec qh = V_OR(V_SRLI32(w0, 16), V_SLLI32(w1, 16));
    vec q[4];
    load16x16(x + 6, rb, q);
    for (int j = 0; j < 8; j++) {
      const vec nib = j < 4 ? V_AND(q[j], low4) : V_AND(V_SRLI16(q[j - 4], 4), low4);
      const vec byte = V_SHUFFLE8(qh, V_ADD8(word_bytes, V_SET1_8((char)(j / 2))));
      v_store(wt, 8 * b + j, v_add8_where(nib, byte, V_SET1_32(j % 2 ? (int)0x80402010 : 0x08040201), sixteen));
    }
  }
}

/* q8_0: signed bytes made unsigned by adding 128 (the offset). */
Q8_TARGET static void unpack_q8_0(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  const vec flip = V_SET1_8((char)0x80);
  for (int b = 0; b < K / 32; b++, x += 34) {
    q8_prefetch_step(pf);
    vec head, unused;
    load16_head(x, rb, &head, &unused);
    store_f16_lanes(wd + 16 * b, head, false);
    for (int h = 0; h < 2; h++) {
      vec q[4];
      load16x16(x + 2 + 16 * h, rb, q);
      for (int j = 0; j < 4; j++) v_store(wt, 8 * b + 4 * h + j, V_XOR(q[j], flip));
    }
  }
}

/* q4_K: 8 sub-blocks of 32 per 256; sub-block 2i takes the low nibbles of
 * bytes 32i..32i+31, sub-block 2i+1 their high nibbles; element value
 * (d * sc) * q - dmin * m (dequant.c). The 6-bit scales are decoded row by
 * row. */
Q8_TARGET static void unpack_q4_k(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  const vec low4 = V_SET1_8(0x0F);
  for (int b = 0; b < K / Q8_QK_K; b++, x += 144) {
    q8_prefetch_step(pf);
    for (int r = 0; r < 16; r++) {
      const uint8_t *row = x + (size_t)r * rb;
      const float d = rg_f16c_load(row), dmin = rg_f16c_load(row + 2);
      for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        scale_min_k4(s, row + 4, &sc, &m);
        wd[16 * (8 * b + s) + r] = d * sc;
        wm[16 * (8 * b + s) + r] = -(dmin * m);
      }
    }
    for (int i = 0; i < 4; i++)
      for (int h = 0; h < 2; h++) {
        vec q[4];
        load16x16(x + 16 + 32 * i + 16 * h, rb, q);
        const int j0 = 64 * b + 16 * i + 4 * h; /* register of elements 64i + 16h + 4j */
        for (int j = 0; j < 4; j++) {
          v_store(wt, j0 + j, V_AND(q[j], low4));
          v_store(wt, j0 + 8 + j, V_AND(V_SRLI16(q[j], 4), low4));
        }
      }
  }
}

/* q6_K: 16 sub-blocks of 16 per 256 with int8 scales; in each half of 128,
 * element l + 32p (l < 32) is a nibble of ql (low of ql[l] for p = 0 and 2's
 * high, ql[l + 32] for p = 1 and 3) with bits 2p..2p+1 of qh[l] as bits
 * 4-5; value (d * sc) * (q - 32) (dequant.c). */
Q8_TARGET static void unpack_q6_k(const uint8_t *x, size_t rb, int K, uint8_t *wt, float *wd, float *wm,
                                  q8_prefetch *pf) {
  const vec low4 = V_SET1_8(0x0F), bits45 = V_SET1_8(0x30);
  for (int b = 0; b < K / Q8_QK_K; b++, x += 210) {
    q8_prefetch_step(pf);
    for (int r = 0; r < 16; r++) {
      const uint8_t *row = x + (size_t)r * rb;
      const float d = rg_f16c_load(row + 208);
      for (int s = 0; s < 16; s++) wd[16 * (16 * b + s) + r] = d * ((const int8_t *)(row + 192))[s];
    }
    for (int half = 0; half < 2; half++)
      for (int h = 0; h < 2; h++) { /* l = 16h + 4j */
        vec a[4], c[4], q[4];
        load16x16(x + 64 * half + 16 * h, rb, a);
        load16x16(x + 64 * half + 32 + 16 * h, rb, c);
        load16x16(x + 128 + 32 * half + 16 * h, rb, q);
        const int j0 = 64 * b + 32 * half + 4 * h;
        for (int j = 0; j < 4; j++) {
          const vec lo_a = V_AND(a[j], low4), lo_c = V_AND(c[j], low4);
          const vec hi_a = V_AND(V_SRLI16(a[j], 4), low4), hi_c = V_AND(V_SRLI16(c[j], 4), low4);
          const vec qh = q[j];
          v_store(wt, j0 + j, V_OR(lo_a, V_AND(V_SLLI16(qh, 4), bits45)));
          v_store(wt, j0 + 8 + j, V_OR(lo_c, V_AND(V_SLLI16(qh, 2), bits45)));
          v_store(wt, j0 + 16 + j, V_OR(hi_a, V_AND(qh, bits45)));
          v_store(wt, j0 + 24 + j, V_OR(hi_c, V_AND(V_SRLI16(qh, 2), bits45)));
        }
      }
  }
}

/* The table's entries, in q8_format_id order. */
#define Q8_UNPACKERS {unpack_q4_0, unpack_q4_1, unpack_q5_0, unpack_q8_0, unpack_q4_k, unpack_q6_k}
