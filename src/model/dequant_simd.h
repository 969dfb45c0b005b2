/* dequant_simd.h: the SIMD row decoders that dequant.c dispatches to at run
 * time (private to the model library). */
#ifndef RG_DEQUANT_SIMD_H
#define RG_DEQUANT_SIMD_H

#include <stdint.h>

/* Converts NB blocks starting at X into Y (dequant.c's row function shape). */
typedef void (*rg_dequant_fn)(const uint8_t *x, float *y, int64_t nb);

/* The AVX2 decoder of ggml type TYPE, or NULL when this CPU lacks AVX2, FMA
 * or F16C or the type has none (dequant_avx2.c). Bit-identical to the
 * portable decoder. */
rg_dequant_fn rg_dequant_avx2_row(int type);

#endif
