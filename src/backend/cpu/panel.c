/* backend/cpu/panel.c: float32 products of a prompt's rows (more than
 * SKINNY_MAX_M, at most PANEL_MAX_M) with a weight kept in its file dtype,
 * as register-blocked outer products on its rows decoded where they lie.
 *
 * Why: with a few hundred rows of x each weight is used only M times, and
 * sgemm copies (packs) every weight before it multiplies, after the
 * dequantized tiles it reads were written and read again through the
 * caches (docs/benchmarks.md, "Figures behind the CPU kernels' choices",
 * has the measurements). Here the
 * weight's rows are decoded a register block at a time from the file's
 * blocks into a scratch that stays in L1/L2 (as backend/cpu/skinny.c does),
 * and x, read by every block of the weight, is the one operand rearranged:
 * once per product, into blocks of XB rows transposed to [K][XB], shared by
 * the team.
 *
 * Float32 copies stay with sgemm: their products, at any M, are what the
 * fixture tests of training and sequence parallelism compare across
 * batch splits (test_sp), and which must stay batch-invariant
 * (test_split_matmul, without AMX: 40 rows alone against their 100-row
 * product, sgemm on both). Panel products on float32, on every M or from
 * 64 rows only, each broke one of the two; both hold only with every
 * float32 product, decode steps included, in this order.
 *
 * The register block: NR weight rows times XB = XV * LANES rows of x, NR *
 * XV vector accumulators. Each k step loads XV vectors of x and broadcasts
 * NR weights, for NR * XV FMAs: AVX-512 12 x 32 (24 of the 32 registers),
 * AVX2 and SSE2 6 x 2 vectors (12 of the 16).
 *
 * Each y[m][n] is the same operations in one vector lane whatever M is and
 * whichever rows share the call, so a row's result does not depend on its
 * batch; it differs from sgemm on the dequantized rows only in the order of
 * the additions (tests/test_panel_matmul.c bounds it).
 */
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_types.h"
#include "tensor/dtype.h"

#if defined(__AVX512F__)
enum { LANES = 16, XV = 2, NR = 12 };
#elif defined(__AVX__)
enum { LANES = 8, XV = 2, NR = 6 };
#else /* SSE2 only (the sanitizer build has no -march) */
enum { LANES = 4, XV = 2, NR = 6 };
#endif
enum { XB = XV * LANES, KC = 64 };
typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

static inline vec load_vec(const float *p) {
  vec v;
  memcpy(&v, p, sizeof v);
  return v;
}

size_t cpu_panel_scratch_floats(int64_t cols) {
  return (size_t)cols * ((PANEL_MAX_M + XB - 1) / XB * XB);
}

/* x block XT ([K][XB], rows of x across) times weight rows W[0..NR) (each
 * K floats): OUT[r * XB + j] = sum over k of W[r][k] * XT[k][j], as a sum
 * of chains of KC terms each (the chain restarts from zero every KC k's and
 * is added to the total): float32 error then grows as sqrt(KC) + sqrt(K /
 * KC) roundings, not sqrt(K). One chain over all of K was 4x less accurate
 * than OpenBLAS's small-matrix sgemm on a 32-token SmolLM2 batch, enough to
 * fail test_lora's gradient tolerance. */
static void block_product(const float *const *w, const float *restrict xt, int K, float *out) {
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int k1 = K - k0 < KC ? K : k0 + KC;
    vec acc[NR][XV];
    for (int r = 0; r < NR; r++)
      for (int v = 0; v < XV; v++) acc[r][v] = (vec){0};
    for (int k = k0; k < k1; k++) {
      vec xv[XV];
      for (int v = 0; v < XV; v++) xv[v] = load_vec(xt + (size_t)k * XB + v * LANES);
      for (int r = 0; r < NR; r++) {
        const float wk = w[r][k];
        for (int v = 0; v < XV; v++) acc[r][v] += wk * xv[v];
      }
    }
    /* the totals wait in OUT: in registers they left too few for the chains */
    for (int r = 0; r < NR; r++)
      for (int v = 0; v < XV; v++) {
        float *o = out + r * XB + v * LANES;
        const vec t = k0 == 0 ? acc[r][v] : load_vec(o) + acc[r][v];
        memcpy(o, &t, sizeof t);
      }
  }
}

/* Rows MB * XB .. of x (M rows of K) into block MB of XT, [K][XB], the
 * rows past M zero. */
static void transpose_block(const float *x, int M, int K, int mb, float *xt) {
  float *b = xt + (size_t)mb * K * XB;
  for (int j = 0; j < XB; j++) {
    const int m = mb * XB + j;
    if (m < M)
      for (int k = 0; k < K; k++) b[(size_t)k * XB + j] = x[(size_t)m * K + k];
    else
      for (int k = 0; k < K; k++) b[(size_t)k * XB + j] = 0.0f;
  }
}

void cpu_matmul_panel(const cpu_scratch *s, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                      const rg_bweight *bias, float beta) {
  const int K = (int)w->cols, N = (int)w->rows, x_blocks = (M + XB - 1) / XB, w_blocks = (N + NR - 1) / NR;
  float *xt = s->panel_xt;
  const int team = s->threads < w_blocks ? s->threads : w_blocks;
#pragma omp parallel num_threads(team)
  {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    for (int mb = tid; mb < x_blocks; mb += nt) transpose_block(x->data, M, K, mb, xt);
#pragma omp barrier
    float *rows = s->tile + (size_t)tid * s->tile_floats;
    float out[NR * XB];
    for (int b = w_blocks * tid / nt; b < w_blocks * (tid + 1) / nt; b++) {
      const int n0 = b * NR, R = N - n0 < NR ? N - n0 : NR;
      rg_dequantize_row(w->t->type, row_ptr(w, n0), rows, (int64_t)R * K);
      /* a short last block repeats its last row; those sums are not stored */
      const float *wp[NR];
      for (int r = 0; r < NR; r++) wp[r] = rows + (size_t)(r < R ? r : R - 1) * K;
      for (int mb = 0; mb < x_blocks; mb++) {
        block_product(wp, xt + (size_t)mb * K * XB, K, out);
        const int rows_here = M - mb * XB < XB ? M - mb * XB : XB;
        for (int j = 0; j < rows_here; j++) {
          float *yr = y->data + (size_t)(mb * XB + j) * N + n0;
          for (int r = 0; r < R; r++)
            yr[r] = beta != 0.0f ? yr[r] + out[r * XB + j] : out[r * XB + j] + (bias ? bias->f32[n0 + r] : 0.0f);
        }
      }
    }
  }
}
