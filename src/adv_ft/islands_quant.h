/* islands_quant.h: the encodings of a float32 vector sent between islands
 * (pseudo-gradients up, outer updates down; islands_sync.h).
 *
 *   f32   the floats as they are (4 bytes each, little-endian);
 *   bf16  each float rounded to bfloat16, nearest with ties to even (the top
 *         16 bits of the float32; 2 bytes each);
 *   int8  per block of BLOCK floats a float32 scale s = absmax / 127 and one
 *         signed byte per float, q = round(x / s) in [-127, 127];
 *   int4  the same with s = absmax / 7 and q in [-7, 7], two per byte (the
 *         even element in the low nibble), stored as q + 8.
 * Dequantized, x' = q * s (float32), so |x - x'| <= s / 2 per element up to
 * the rounding of x / s (test_islands_outer checks it against numpy). A
 * block of zeros has s = 0 and decodes to zeros, and so does a block whose
 * scale would be subnormal (absmax < levels * FLT_MIN, 1.5e-36 for int8,
 * 8.2e-38 for int4): there |x - x'| = |x| <= absmax. A non-finite input,
 * or a finite one that rounds to an infinite bf16, is refused: it would
 * poison a whole block's scale, or every copy's theta.
 *
 * Ownership: callers own every buffer; nothing is kept.
 */
#ifndef RG_ADV_FT_ISLANDS_QUANT_H
#define RG_ADV_FT_ISLANDS_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum { RG_QUANT_F32 = 0, RG_QUANT_BF16 = 1, RG_QUANT_INT8 = 2, RG_QUANT_INT4 = 3 } rg_quant;

/* "f32", "bf16", "int8", "int4" to the encoding; -1 for another name. */
int rg_quant_parse(const char *name);
const char *rg_quant_name(rg_quant q);

/* Bytes of N floats encoded with Q in blocks of BLOCK (>= 1; only int8 and
 * int4 use it). */
size_t rg_quant_bytes(rg_quant q, size_t n, int block);

/* Encodes X[0..n) into OUT (rg_quant_bytes bytes). 0, or -1 with the error
 * set (a non-finite value, naming its index). */
int rg_quant_encode(rg_quant q, int block, const float *x, size_t n, uint8_t *out);
/* Decodes IN (rg_quant_bytes bytes) into X[0..n). Always succeeds: every
 * byte pattern decodes to some floats (the message's digest, not this,
 * guards against damage). */
void rg_quant_decode(rg_quant q, int block, const uint8_t *in, size_t n, float *x);

#endif
