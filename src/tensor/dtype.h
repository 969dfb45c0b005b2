/* dtype.h: element types of weight tensors and their conversion to float32
 * (and from it to q8_0).
 *
 * The numeric values are ggml's type ids (ggml.h, enum ggml_type), so a GGUF
 * tensor's type field can be used directly. Safetensors dtypes map onto the
 * F32/F16/BF16 members. Quantized types are stored in blocks exactly as ggml
 * stores them (ggml-common.h); rg_dequantize_row reproduces ggml's
 * dequantize_row_* results bit for bit.
 */
#ifndef RG_DTYPE_H
#define RG_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  RG_F32 = 0,
  RG_F16 = 1,
  RG_Q4_0 = 2,
  RG_Q4_1 = 3,
  RG_Q5_0 = 6,
  RG_Q5_1 = 7,
  RG_Q8_0 = 8,
  RG_Q8_1 = 9,
  RG_Q2_K = 10,
  RG_Q3_K = 11,
  RG_Q4_K = 12,
  RG_Q5_K = 13,
  RG_Q6_K = 14,
  RG_Q8_K = 15,
  RG_I8 = 24,
  RG_I16 = 25,
  RG_I32 = 26,
  RG_I64 = 27,
  RG_F64 = 28,
  RG_BF16 = 30,
  RG_DTYPE_COUNT = 40
} rg_dtype;

/* Layout of one type: elements per block and bytes per block. */
typedef struct {
  const char *name;   /* "q4_1", "bf16", ... */
  int block_elems;    /* 1 for plain types, 32 or 256 for quantized ones */
  int block_bytes;
  int can_dequantize; /* rg_dequantize_row supports it */
} rg_dtype_info;

/* NULL for an id refgeo does not know. */
const rg_dtype_info *rg_dtype_get(int type);

/* Bytes taken by a row of n elements (n must be a multiple of block_elems).
 * Returns 0 if the type is unknown, n is negative or not a whole number of
 * blocks, or the byte count does not fit in size_t. */
size_t rg_dtype_row_bytes(int type, int64_t n);

/* Converts n elements (a whole number of blocks) of SRC to float32. Returns 0,
 * or -1 with the error set for a type that cannot be dequantized. */
int rg_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* The same without the SIMD decoders (dequant_avx2.c) that
 * rg_dequantize_row picks at run time; bit-identical, for tests. */
int rg_dequantize_row_portable(int type, const void *src, float *dst, int64_t n);

/* Converts n float32 elements (a multiple of 32) to q8_0 blocks as gguf-py
 * quantizes them (dequant.c). */
void rg_quantize_row_q8_0(const float *src, void *dst, int64_t n);

/* Scalar half-precision conversions (IEEE binary16 and bfloat16). */
float rg_fp16_to_fp32(uint16_t h);
uint16_t rg_fp32_to_fp16(float f);
float rg_bf16_to_fp32(uint16_t b);
uint16_t rg_fp32_to_bf16(float f); /* round to nearest even, as torch does */

#endif
