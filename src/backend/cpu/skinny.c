/* backend/cpu/skinny.c: matrix products with few activation rows (decode
 * steps, small batches) on weights kept in their file dtype.
 *
 * A decode step reads every weight once per token, so it is bound by memory
 * bandwidth, not by arithmetic. The tile path of matmul_into dequantizes
 * 4 MiB of rows to float32 and hands them to sgemm, which writes and rereads
 * 4 bytes per weight through the caches, and an f32 copy of the model reads
 * 4 bytes per weight from DRAM; a Q4_1 weight is 0.625 bytes in the file.
 * Here each thread dequantizes 4 weight rows at a time into a scratch that
 * stays in L1/L2 and dots them with the activation rows at once, so DRAM
 * traffic is the file's bytes.
 *
 * The activations stay float32: llama.cpp quantizes them to int8 per block
 * for integer dot products (as backend/cpu/q8/q8.c does for RG_FORM_FILE_Q8
 * weights), which changes results by the activations' rounding; here the result differs from the sgemm path only by the order of
 * the additions (tests/test_backend.c bounds it).
 *
 * Batch invariance: y[m][n] is the same sequence of float operations whatever
 * M is (up to SKINNY_MAX_M) and whichever other rows share the call, so a
 * decoding sequence's logits do not depend on the rest of its batch. Above
 * SKINNY_MAX_M rows the product goes through sgemm, whose sums are ordered
 * differently: a prompt of at most 16 tokens prefilled alone differs at
 * rounding level from the same prompt prefilled inside a larger batch.
 */
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_types.h"
#include "tensor/dtype.h"

/* The register block: ROWS weight rows times XROWS activation rows, each
 * pair with its own vector of partial sums. A weight vector is loaded once
 * for XROWS FMAs and an activation vector once for ROWS, and the 8 or 16
 * independent chains cover the FMA latency. LANES is one register: with
 * AVX2, 8 floats and 4 x 2 sums (13 of 16 registers); with SSE2, 4 floats.
 * With AVX-512, 256-bit vectors in 4 x 4 sums (21 of the 32 registers): on
 * an AMD EPYC with AVX-512, 512-bit ones (LANES 16) made float32 decode 16-20%
 * slower at batches 8 and 16 (SmolLM2 and Qwen2.5-0.5B, bench_generate), as
 * each pair's 16 lanes are summed at the end of a row of only 576 or 896.
 * GCC's vector extension keeps the sums in registers (with plain float arrays
 * it spilled them to the stack on every step, at a third of the speed). */
#if defined(__AVX512F__)
enum { LANES = 8, XROWS = 4 };
#elif defined(__AVX__)
enum { LANES = 8, XROWS = 2 };
#else /* SSE2 only (the sanitizer build has no -march) */
enum { LANES = 4, XROWS = 2 };
#endif
enum { ROWS = SKINNY_ROWS };
typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

static inline vec load_vec(const float *p) {
  vec v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* out[m * ROWS + r] = w_r . x_m for r < R, m < MR (compile-time constants at
 * each call site). Each (r, m) pair's sums are the same operations in the
 * same order whatever R and MR are, which makes a row's result independent
 * of the rows it is blocked with. */
static inline __attribute__((always_inline)) void dot_block(const float *restrict w, int ldw, int R,
                                                            const float *restrict x, int ldx, int MR, int K,
                                                            float *out) {
  vec acc[XROWS][ROWS];
  for (int m = 0; m < XROWS; m++)
    for (int r = 0; r < ROWS; r++) acc[m][r] = (vec){0};
  float tail[XROWS][ROWS] = {{0}};
  int k = 0;
  for (; k + LANES <= K; k += LANES) {
    vec wv[ROWS];
    for (int r = 0; r < R; r++) wv[r] = load_vec(w + (size_t)r * ldw + k);
    for (int m = 0; m < MR; m++) {
      const vec xv = load_vec(x + (size_t)m * ldx + k);
      for (int r = 0; r < R; r++) acc[m][r] += wv[r] * xv;
    }
  }
  for (; k < K; k++)
    for (int m = 0; m < MR; m++)
      for (int r = 0; r < R; r++) tail[m][r] += w[(size_t)r * ldw + k] * x[(size_t)m * ldx + k];
  for (int m = 0; m < MR; m++)
    for (int r = 0; r < R; r++) {
      /* pairwise, in a fixed order */
      float lane[LANES];
      memcpy(lane, &acc[m][r], sizeof lane);
      for (int h = LANES / 2; h > 0; h /= 2)
        for (int l = 0; l < h; l++) lane[l] += lane[l + h];
      out[m * ROWS + r] = lane[0] + tail[m][r];
    }
}

/* Every (R, MR) pair as its own specialized block; MR cases above XROWS
 * are never taken. */
#define DOT_CASE(R, MR) \
  case (R) * 8 + (MR): dot_block(w, ldw, R, x, ldx, (MR) < XROWS ? (MR) : XROWS, K, out); break
#define DOT_CASES(R) DOT_CASE(R, 4); DOT_CASE(R, 3); DOT_CASE(R, 2); DOT_CASE(R, 1)
static void dot_rows(const float *w, int ldw, int R, const float *x, int ldx, int MR, int K, float *out) {
  switch (R * 8 + MR) {
    DOT_CASES(4); DOT_CASES(3); DOT_CASES(2); DOT_CASE(1, 4); DOT_CASE(1, 3); DOT_CASE(1, 2);
    default: dot_block(w, ldw, 1, x, ldx, 1, K, out); break;
  }
}
#undef DOT_CASES
#undef DOT_CASE

void cpu_matmul_skinny(const cpu_scratch *s, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                       const rg_bweight *bias, float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  /* Rows per thread: at least 16, so a small matrix does not fork a team
   * whose start costs more than its share. */
  const int team = s->threads < N / 16 ? s->threads : (N / 16 > 0 ? N / 16 : 1);
#pragma omp parallel num_threads(team)
  {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int n0 = (int)((int64_t)N * tid / nt), n1 = (int)((int64_t)N * (tid + 1) / nt);
    float *rows = s->tile + (size_t)tid * s->tile_floats;
    for (int nb = n0; nb < n1; nb += ROWS) {
      const int R = n1 - nb < ROWS ? n1 - nb : ROWS;
      /* the R rows are contiguous in the file: one call decodes them all */
      rg_dequantize_row(w->t->type, row_ptr(w, nb), rows, (int64_t)R * K);
      for (int m0 = 0; m0 < M; m0 += XROWS) {
        const int MR = M - m0 < XROWS ? M - m0 : XROWS;
        float d[XROWS * ROWS];
        dot_rows(rows, K, R, x->data + (size_t)m0 * K, K, MR, K, d);
        for (int m = 0; m < MR; m++) {
          float *out = y->data + (size_t)(m0 + m) * N + nb;
          for (int r = 0; r < R; r++)
            out[r] = beta != 0.0f ? out[r] + d[m * ROWS + r] : d[m * ROWS + r] + (bias ? bias->f32[nb + r] : 0.0f);
        }
      }
    }
  }
}
