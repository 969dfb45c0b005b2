/* block_products.h: what the tests of the block-format products
 * (test_q8_matmul, test_split_matmul, test_panel_matmul) share: random
 * block-quantized weight rows from one splitmix64 stream, which a test
 * reseeds (rng) so that every kernel it compares sees the same operands, one
 * product through the backend, and the batch-invariance check. Header-only:
 * each test program has its own stream. */
#ifndef RG_TEST_BLOCK_PRODUCTS_H
#define RG_TEST_BLOCK_PRODUCTS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "testlib.h" /* cmocka, for fail_msg */

static uint64_t rng = 0x243F6A8885A308D3ull;
static inline uint64_t next_u64(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline double urand(void) { return (double)(next_u64() >> 11) / 9007199254740992.0 * 2 - 1; }

static inline void put_f16(uint8_t *p, double f) {
  uint16_t h = rg_fp32_to_fp16((float)f);
  memcpy(p, &h, 2);
}

/* Random blocks of TYPE with finite scales: every byte random (or FILL,
 * where FILL >= 0), then each block's f16 fields set to a small scale (and
 * a negative min where the format has one). */
static inline uint8_t *random_rows(int type, int K, int N, int fill) {
  const size_t rb = rg_dtype_row_bytes(type, K);
  uint8_t *b = malloc(rb * (size_t)N);
  for (size_t i = 0; i < rb * (size_t)N; i++) b[i] = fill >= 0 ? (uint8_t)fill : (uint8_t)next_u64();
  for (int r = 0; r < N; r++) {
    uint8_t *row = b + rb * (size_t)r;
    switch (type) {
      case RG_Q4_0: for (int i = 0; i < K / 32; i++) put_f16(row + 18 * i, 0.01 + 0.05 * fabs(urand())); break;
      case RG_Q5_0: for (int i = 0; i < K / 32; i++) put_f16(row + 22 * i, 0.01 + 0.05 * fabs(urand())); break;
      case RG_Q8_0: for (int i = 0; i < K / 32; i++) put_f16(row + 34 * i, 0.001 + 0.005 * fabs(urand())); break;
      case RG_Q4_1:
        for (int i = 0; i < K / 32; i++) {
          put_f16(row + 20 * i, 0.01 + 0.05 * fabs(urand()));
          put_f16(row + 20 * i + 2, -0.4 * fabs(urand()));
        }
        break;
      case RG_Q4_K:
        for (int i = 0; i < K / 256; i++) {
          put_f16(row + 144 * i, 0.001 + 0.003 * fabs(urand()));
          put_f16(row + 144 * i + 2, 0.001 + 0.003 * fabs(urand()));
        }
        break;
      case RG_Q6_K: for (int i = 0; i < K / 256; i++) put_f16(row + 210 * i + 208, 1e-4 + 3e-4 * fabs(urand())); break;
      default: fail_msg("no random blocks for dtype %d", type);
    }
  }
  return b;
}

/* y = x . W^T + bias through the backend (M x N, caller frees), or with
 * ADD_TO, y = ADD_TO + x . W^T (rg_op_matmul_add, beta 1; no bias). */
static inline float *product(rg_backend *be, rg_bweight *w, const float *x, int M, int K, int N,
                             const rg_bweight *bias, const float *add_to) {
  rg_buf *xb = rg_buf_new(be, (size_t)M * K), *yb = rg_buf_new(be, (size_t)M * N);
  rg_buf_upload(be, xb, 0, x, (size_t)M * K);
  if (add_to) {
    rg_buf_upload(be, yb, 0, add_to, (size_t)M * N);
    rg_op_matmul_add(be, yb, xb, M, w);
  } else {
    rg_op_matmul(be, yb, xb, M, w, bias);
  }
  float *y = malloc((size_t)M * N * sizeof *y);
  assert_int_equal(rg_buf_download(be, yb, 0, y, (size_t)M * N), 0);
  rg_buf_free(be, xb);
  rg_buf_free(be, yb);
  return y;
}

/* Whether rows FIRST .. FIRST + ROWS - 1 of x (M x K), multiplied alone,
 * give the same bits as in the product of all M rows: batch invariance. */
static inline void check_rows_alone(rg_backend *be, rg_bweight *w, const float *x, int M, int K, int N, int first,
                                    int rows) {
  float *all = product(be, w, x, M, K, N, NULL, NULL);
  float *some = product(be, w, x + (size_t)first * K, rows, K, N, NULL, NULL);
  if (memcmp(some, all + (size_t)first * N, (size_t)rows * N * sizeof *some) != 0)
    fail_msg("rows %d..%d alone differ from their %d-row product", first, first + rows - 1, M);
  free(all), free(some);
}

#endif
