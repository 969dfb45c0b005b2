/* islands_quant.c: encodings of the vectors islands exchange (islands_quant.h). */
#include "adv_ft/islands_quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "util/error.h"

int rg_quant_parse(const char *name) {
  static const char *const NAMES[] = {"f32", "bf16", "int8", "int4"};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, NAMES[i]) == 0) return i;
  return -1;
}

const char *rg_quant_name(rg_quant q) {
  return q == RG_QUANT_F32 ? "f32" : q == RG_QUANT_BF16 ? "bf16" : q == RG_QUANT_INT8 ? "int8" : "int4";
}

size_t rg_quant_bytes(rg_quant q, size_t n, int block) {
  const size_t b = block > 0 ? (size_t)block : 1, blocks = (n + b - 1) / b;
  switch (q) {
  case RG_QUANT_F32: return 4 * n;
  case RG_QUANT_BF16: return 2 * n;
  case RG_QUANT_INT8: return 4 * blocks + n;
  case RG_QUANT_INT4: /* each block's codes start on a byte */
    return 4 * blocks + (n / b) * ((b + 1) / 2) + ((n % b) + 1) / 2;
  }
  return 0;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void put_u32(uint8_t *p, uint32_t u) {
  p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Round to nearest, ties to even, of a finite float's top 16 bits. */
static uint16_t to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int rg_quant_encode(rg_quant q, int block, const float *x, size_t n, uint8_t *out) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return rg_error_set("quantize: element %zu is not finite (%g)", i, (double)x[i]);
  if (q == RG_QUANT_F32) {
    for (size_t i = 0; i < n; i++) put_u32(out + 4 * i, f32_bits(x[i]));
    return 0;
  }
  if (q == RG_QUANT_BF16) {
    for (size_t i = 0; i < n; i++) {
      const uint16_t h = to_bf16(x[i]);
      if (!isfinite(bits_f32((uint32_t)h << 16))) /* |x| >= 3.3961e38 rounds past bf16's largest finite (from 3.39618e38, the midpoint) */
        return rg_error_set("quantize: element %zu (%g) rounds to an infinite bfloat16", i, (double)x[i]);
      out[2 * i] = (uint8_t)h, out[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return 0;
  }
  const size_t b = (size_t)block;
  const float levels = q == RG_QUANT_INT8 ? 127.0f : 7.0f;
  uint8_t *p = out;
  for (size_t at = 0; at < n; at += b) {
    const size_t len = n - at < b ? n - at : b;
    float amax = 0;
    for (size_t i = 0; i < len; i++) amax = fmaxf(amax, fabsf(x[at + i]));
    /* a subnormal scale keeps too few bits for |x - q s| <= s/2: such a
     * block (absmax < levels * FLT_MIN) is sent as zeros */
    float s = amax / levels;
    if (s < FLT_MIN) s = 0;
    put_u32(p, f32_bits(s));
    p += 4;
    for (size_t i = 0; i < len; i++) {
      float r = s > 0 ? nearbyintf(x[at + i] / s) : 0.0f;
      r = fminf(fmaxf(r, -levels), levels); /* x / s can round past absmax / s */
      const int c = (int)r;
      if (q == RG_QUANT_INT8) {
        *p++ = (uint8_t)(int8_t)c;
      } else if (i % 2 == 0) {
        *p = (uint8_t)(c + 8);
        if (i + 1 == len) p++;
      } else {
        *p++ |= (uint8_t)((c + 8) << 4);
      }
    }
  }
  return 0;
}

void rg_quant_decode(rg_quant q, int block, const uint8_t *in, size_t n, float *x) {
  if (q == RG_QUANT_F32) {
    for (size_t i = 0; i < n; i++) x[i] = bits_f32(get_u32(in + 4 * i));
    return;
  }
  if (q == RG_QUANT_BF16) {
    for (size_t i = 0; i < n; i++) x[i] = bits_f32((uint32_t)(in[2 * i] | in[2 * i + 1] << 8) << 16);
    return;
  }
  const size_t b = (size_t)block;
  const uint8_t *p = in;
  for (size_t at = 0; at < n; at += b) {
    const size_t len = n - at < b ? n - at : b;
    const float s = bits_f32(get_u32(p));
    p += 4;
    for (size_t i = 0; i < len; i++) {
      int c;
      if (q == RG_QUANT_INT8) c = (int8_t)*p++;
      else if (i % 2 == 0) c = (*p & 0x0f) - 8, p += i + 1 == len;
      else c = (*p++ >> 4) - 8;
      x[at + i] = (float)c * s;
    }
  }
}
