/* dequant_simd.h: the SIMD row decoders that dequant.c dispatches to at run
 * time, and what the portable and SIMD decoders share (private to the model
 * library). */
#ifndef RG_DEQUANT_SIMD_H
#define RG_DEQUANT_SIMD_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Converts NB blocks starting at X into Y (dequant.c's row function shape). */
typedef void (*rg_dequant_fn)(const uint8_t *x, float *y, int64_t nb);

/* The AVX2 decoder of ggml type TYPE, or NULL when this CPU lacks AVX2, FMA
 * or F16C or the type has none (dequant_avx2.c). Bit-identical to the
 * portable decoder. */
rg_dequant_fn rg_dequant_avx2_row(int type);

/* This CPU has AVX2, FMA and F16C (asked once; dequant_avx2.c). */
bool rg_cpu_has_avx2_fma_f16c(void);

/* The IEEE half-precision float at P (2 bytes, any alignment) by F16C's
 * conversion; only for code compiled for F16C (the SIMD decoders here and
 * the 8-bit products' kernels, backend/cpu/q8/unpack.h). */
__attribute__((target("f16c"))) static inline float rg_f16c_load(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* The 6-bit scale and min of sub-block j of a q4_K/q5_K block. */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

#endif
