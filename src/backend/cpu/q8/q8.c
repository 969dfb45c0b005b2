/* backend/cpu/q8/q8.c: matrix products on block-quantized weights with the
 * activations quantized to 8 bits and integer dot products: the arithmetic
 * llama.cpp runs prompts and decode steps with. Weights of
 * the RG_FORM_FILE_Q8 form take this path (backend.h); RG_FORM_FILE's
 * skinny path (backend/cpu/skinny.c) keeps float32 activations. This file
 * holds the formats, the dispatch and the threads; the kernels are per
 * instruction set (backend/cpu/q8/q8_internal.h).
 *
 * Why: a decode step reads every weight once, and backend/cpu/skinny.c
 * spends about 5 instructions per weight converting the blocks to float32
 * and multiplying them; on Qwen2.5-0.5B that made a batch-1 step compute
 * bound at half of llama.cpp's speed. Here one VNNI instruction (vpdpbusd)
 * multiplies 16 weight rows by 4 activation bytes, accumulating in int32
 * (on AVX2, vpmaddubsw and vpmaddwd, as llama.cpp does there).
 *
 * The arithmetic (docs/ARCHITECTURE.md, "8-bit decode products"):
 *  - Activations: each row of x is cut into blocks of 32; a block's scale is
 *    dx = max|x| / 127 and its values q = round-half-even(x / dx) in
 *    [-127, 127] (llama.cpp's q8_0 rule with its rounding made explicit).
 *  - Weights: each format's block is unpacked to unsigned bytes u with a
 *    float scale wd and bias wm per sub-block of G elements (G = 32, or 16
 *    for q6_K) and an integer offset o per format, so that the dequantized
 *    weight is exactly wd * (u - o) + wm (the value dequant.c computes).
 *  - Per sub-block: an exact int32 sum  S = sum u*q - o * sum q,  then
 *    acc = fma((float)S, wd * dx, acc) and, for formats with a bias,
 *    acc = fma(wm, dx * (float)sum q, acc), sub-block after sub-block.
 *    |S| < 2^24, so the conversion to float is exact, and the result is
 *    the float32 evaluation of  sum_k w_k * dx_b(k) * q_k  in that order.
 * It differs from the exact product by the activations' rounding, at most
 * sum_k |w_k| * dx_b(k) / 2 (test_q8_matmul checks that bound and the
 * formula above, in double, for every format). Every instruction set's
 * kernels compute exactly this, so they give the same bits.
 *
 * Batch invariance: every (weight row, activation row) pair's result is the
 * same sequence of operations whatever the other rows are, so a sequence's
 * logits do not depend on its batch.
 *
 * Layout: a thread decodes a panel of 16 weight rows at a time, one row
 * per 32-bit lane of a 512-bit vector (q8_unpack_fn). The decoded panel
 * stays in cache while up to PASS_ROWS activation rows, 16 at a time, are
 * multiplied with it, so a prompt decodes each weight once per 256 rows.
 *
 * Dispatch: the best kernels this CPU runs, AMX then AVX-512 VNNI then
 * AVX2, chosen when the backend starts (cpu_q8_pick). REFGEO_MAX_ISA caps
 * the choice: "avx512" to run the VNNI kernels on an AMX machine, "avx2"
 * the AVX2 kernels on an AVX-512 machine, "none" for no 8-bit
 * kernels. Without kernels, and for other dtypes or rows not a multiple of
 * 64 long, RG_FORM_FILE_Q8 weights take the float32 skinny path. Float32,
 * f16 and bf16 matrices are quantized to q8_0 once, when the weight is made
 * (backend/cpu/cpu.c), so that their products run here too. */
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/q8/q8_internal.h"
#include "backend/cpu/q8/q8_types.h"
#include "tensor/dtype.h"
#include "util/error.h"

enum { PASS_ROWS = 256 }; /* activation rows quantized per pass over the weights (the scratch) */

static const q8_format *format_of(int type) {
  static const q8_format formats[Q8_FORMATS] = {
      [Q8_Q4_0] = {Q8_Q4_0, 32, 32, 8, false},     [Q8_Q4_1] = {Q8_Q4_1, 32, 32, 0, true},
      [Q8_Q5_0] = {Q8_Q5_0, 32, 32, 16, false},    [Q8_Q8_0] = {Q8_Q8_0, 32, 32, 128, false},
      [Q8_Q4_K] = {Q8_Q4_K, Q8_QK_K, 32, 0, true}, [Q8_Q6_K] = {Q8_Q6_K, Q8_QK_K, 16, 32, false}};
  switch (type) {
  case RG_Q4_0: return &formats[Q8_Q4_0];
  case RG_Q4_1: return &formats[Q8_Q4_1];
  case RG_Q5_0: return &formats[Q8_Q5_0];
  case RG_Q8_0: return &formats[Q8_Q8_0];
  case RG_Q4_K: return &formats[Q8_Q4_K];
  case RG_Q6_K: return &formats[Q8_Q6_K];
  default: return NULL;
  }
}

int cpu_q8_pick(const q8_kernels **out) {
  static const q8_kernels *const best_first[] = {&q8_kernels_amx, &q8_kernels_avx512, &q8_kernels_avx2};
  const int n = (int)(sizeof best_first / sizeof best_first[0]);
  const char *cap = getenv("REFGEO_MAX_ISA");
  int first = 0;
  if (cap && *cap) {
    first = strcmp(cap, "none") == 0 ? n : -1;
    for (int i = 0; i < n && first < 0; i++)
      if (strcmp(cap, best_first[i]->name) == 0) first = i;
    if (first < 0) {
      rg_error_set("REFGEO_MAX_ISA: unknown value '%s' (amx, avx512, avx2 or none)", cap);
      return -1;
    }
  }
  *out = NULL;
  for (int i = first; i < n && !*out; i++)
    if (best_first[i]->cpu_has()) *out = best_first[i];
  return 0;
}

int rg_cpu_fast_decode_isa(const char **name) {
  const q8_kernels *k;
  if (cpu_q8_pick(&k) < 0) return -1;
  *name = k ? k->name : NULL;
  return 0;
}

bool cpu_q8_supported(const q8_kernels *k, int type, int64_t cols) {
  return k && format_of(type) && cols % Q8_CHUNK == 0;
}

/* A thread's panel scratch for rows of K elements: the unpacked bytes, wd
 * and wm (at most K / 16 sub-blocks x 16 lanes), and a zero-padded copy of
 * a last panel of fewer than 16 rows (row bytes <= 34 per 32 elements);
 * 64 for alignment. */
static size_t panel_scratch_bytes(size_t K) {
  return Q8_PANEL * K + 2 * K * sizeof(float) + Q8_PANEL * (K + K / 16) + 64;
}

size_t cpu_q8_scratch_bytes(int64_t cols, int threads) {
  const size_t K = (size_t)cols;
  const size_t acts = PASS_ROWS * (K + 2 * (K / 32) * sizeof(float) + K / 16 * sizeof(int32_t)) + 5 * 64;
  return acts + (size_t)threads * panel_scratch_bytes(K);
}

static inline void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* One product's operands, shared by the team. */
typedef struct {
  const q8_kernels *k;
  const q8_format *f;
  const rg_bweight *w, *bias;
  float *y;
  float beta;
  int M, K, N, n_panels;
  q8_acts x;
  uint8_t *panels; /* panel_scratch_bytes(K) per thread */
} q8_job;

/* Unpacks the 16 weight rows from R0 of ROWS (N rows of RB bytes; rows
 * past N are zeros, via PAD) into WT, WD, WM, prefetching the 16 after
 * them when NEXT. */
static void unpack_panel(const q8_kernels *k, const q8_format *f, const uint8_t *rows, size_t rb, int N, int K, int r0,
                         bool next, uint8_t *wt, float *wd, float *wm, uint8_t *pad) {
  const int n = N - r0 < Q8_PANEL ? N - r0 : Q8_PANEL;
  const uint8_t *src = rows + (size_t)r0 * rb;
  if (n < Q8_PANEL) { /* the decoders read 16 rows: pad the last panel with zero rows */
    const int have = n > 0 ? n : 0;
    if (have) memcpy(pad, src, (size_t)have * rb);
    memset(pad + (size_t)have * rb, 0, (size_t)(Q8_PANEL - have) * rb);
    src = pad;
  }
  const size_t panel_file_bytes = Q8_PANEL * rb;
  q8_prefetch pf = {next && n == Q8_PANEL ? (const char *)src + panel_file_bytes : NULL, panel_file_bytes, 0,
                    (panel_file_bytes / (size_t)(K / f->block) + 63) & ~(size_t)63};
  k->unpack[f->id](src, rb, K, wt, wd, wm, &pf);
}

/* Rows m0..m0+mr-1 of y, columns r0..r0+n-1, from LANES (row m's at
 * lanes + m * stride): y = lanes + bias, or y += lanes (beta 1). */
static void store_rows(float *y, int N, int m0, int mr, int r0, int n, const float *lanes, int stride,
                       const rg_bweight *bias, float beta) {
  const float *b = bias ? bias->f32 + r0 : NULL;
  /* the cases outside the loops, so that each row is one vector op */
  for (int m = 0; m < mr; m++) {
    const float *lane = lanes + (size_t)stride * m;
    float *out = y + (size_t)(m0 + m) * N + r0;
    if (beta != 0.0f)
      for (int r = 0; r < n; r++) out[r] += lane[r];
    else if (b)
      for (int r = 0; r < n; r++) out[r] = lane[r] + b[r];
    else
      for (int r = 0; r < n; r++) out[r] = lane[r] + 0.0f; /* + 0: -0 as +0, as with a bias of 0 */
  }
}

/* Thread TID of NT: its share of the panels, unpacked and multiplied. */
static void panels_of_thread(const q8_job *j, int tid, int nt) {
  const int K = j->K, N = j->N, M = j->M;
  uint8_t *wt = align64(j->panels + (size_t)tid * panel_scratch_bytes((size_t)K));
  float *wd = (float *)(wt + (size_t)Q8_PANEL * K), *wm = wd + K;
  uint8_t *pad = (uint8_t *)(wm + K);
  const int p0 = j->n_panels * tid / nt, p1 = j->n_panels * (tid + 1) / nt;
  for (int p = p0; p < p1; p++) {
    const int r0 = p * Q8_PANEL;
    unpack_panel(j->k, j->f, j->w->q8_rows, j->w->q8_row_bytes, N, K, r0, p + 1 < p1, wt, wd, wm, pad);
    for (int m0 = 0; m0 < M; m0 += Q8_XROWS) { /* the panel stays in cache for all rows of x */
      const int mr = M - m0 < Q8_XROWS ? M - m0 : Q8_XROWS;
      const q8_acts x = {j->x.q + (size_t)m0 * K, j->x.d + (size_t)m0 * (K / 32),
                         j->x.offset_qsum + (size_t)m0 * (K / j->f->group), j->x.dx_qsum + (size_t)m0 * (K / 32)};
      float dots[Q8_XROWS * Q8_PANEL];
      j->k->panel_dots(j->f, wt, wd, wm, &x, K, mr, dots);
      store_rows(j->y, N, m0, mr, r0, N - r0 < Q8_PANEL ? N - r0 : Q8_PANEL, dots, Q8_PANEL, j->bias, j->beta);
    }
  }
}

void cpu_matmul_q8(const cpu_scratch *s, const q8_kernels *k, rg_buf *y, const rg_buf *x, int M,
                   const rg_bweight *w, const rg_bweight *bias, float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  int8_t *xq = align64(s->q8);
  float *xd = align64(xq + (size_t)PASS_ROWS * K);
  int32_t *xoq = align64(xd + (size_t)PASS_ROWS * (K / 32));
  float *xdq = align64(xoq + (size_t)PASS_ROWS * (K / 16));
  const q8_format *f = format_of(w->q8_type);
  q8_job job = {.k = k, .f = f, .w = w, .bias = bias, .beta = beta, .K = K, .N = N,
                .n_panels = (N + Q8_PANEL - 1) / Q8_PANEL, .x = {xq, xd, xoq, xdq},
                .panels = align64(xdq + (size_t)PASS_ROWS * (K / 32))};
  const int team = s->threads < job.n_panels ? s->threads : job.n_panels;
  for (int m0 = 0; m0 < M; m0 += PASS_ROWS) { /* a prompt: PASS_ROWS rows per pass over the weights */
    job.M = M - m0 < PASS_ROWS ? M - m0 : PASS_ROWS;
    job.y = y->data + (size_t)m0 * N;
    const float *xm = x->data + (size_t)m0 * K;
#pragma omp parallel num_threads(team)
    {
      /* the activations, split by blocks of 32 over the team */
      const int blocks = job.M * (K / 32);
#pragma omp for schedule(static)
      for (int i = 0; i < blocks; i++) {
        const int m = i / (K / 32), b = i % (K / 32);
        const size_t blk = (size_t)m * (K / 32) + b;
        int32_t s16[2];
        job.k->quantize_block(xm + (size_t)m * K + 32 * b, xq + (size_t)m * K + 32 * b, xd + blk, s16);
        const int32_t qsum = s16[0] + s16[1];
        xdq[blk] = xd[blk] * (float)qsum;
        if (f->group == 32)
          xoq[blk] = f->offset * qsum;
        else
          xoq[2 * blk] = f->offset * s16[0], xoq[2 * blk + 1] = f->offset * s16[1];
      }
      panels_of_thread(&job, omp_get_thread_num(), omp_get_num_threads());
    }
  }
}

/* ---------------------------------------------------------------- split products */

bool cpu_split_pick(const q8_kernels *k) { return k == &q8_kernels_amx && split_amx_cpu_has(); }

bool cpu_split_supported(int type, int64_t cols) {
  return format_of(type) && cols % Q8_CHUNK == 0;
}

/* Activation rows cut into parts per pass over the weights: about 1 MiB
 * of parts (6 bytes a float), which stay in L2 while every panel passes
 * over them, in whole groups of 32 rows. */
static int split_pass_rows(int K) {
  const int rows = (1 << 20) / (6 * K) / 32 * 32;
  return rows < 32 ? 32 : rows > PASS_ROWS ? PASS_ROWS : rows;
}

/* A pair of panels decoded for the tiles: per panel wd, wm (K floats:
 * at most K / 16 sub-blocks x 16 lanes) and the bf16 B tiles (2 x 16 x K
 * bytes). A thread decodes each of its pairs once per product when they
 * fit in SPLIT_KEEP_BYTES (SmolLM2's 1536 x 576 weights take 1.1 MiB a
 * thread): decoding them again in every pass of rows was 6% of a 16 x
 * 128 prefill. Otherwise (a 7B model's 11008 x 4096, 43 MiB a thread) it
 * decodes a pair per pass, into one slot. */
enum { SPLIT_KEEP_BYTES = 4 << 20 };

static size_t split_pair_bytes(size_t K) { return 2 * (2 * K * sizeof(float) + 2 * Q8_PANEL * K); }

static int split_slots(int K, int N, int threads) {
  const int pairs = (N + 31) / 32, mine = (pairs + threads - 1) / threads;
  return (size_t)mine * split_pair_bytes((size_t)K) <= SPLIT_KEEP_BYTES ? mine : 1;
}

/* A thread's scratch: the unpacked bytes of one panel (the decoders'
 * layout, made into bf16 tiles at once), a zero-padded copy of a short
 * panel's file rows (at most 34 bytes per 32 elements), the 32 x 32
 * products and SLOTS decoded pairs. Carved from BASE (64-byte aligned;
 * NULL: only sized); returns the bytes it takes, a multiple of 64. */
typedef struct {
  uint8_t *wt, *pad;
  float *acc;
  uint8_t *pairs;
} split_thread;

static void *carve(uint8_t *base, size_t *used, size_t bytes) {
  const size_t at = (*used + 63) & ~(size_t)63;
  *used = at + bytes;
  return base ? base + at : NULL;
}

static size_t split_thread_carve(uint8_t *base, size_t K, int slots, split_thread *t) {
  size_t used = 0;
  t->wt = carve(base, &used, Q8_PANEL * K);
  t->pad = carve(base, &used, Q8_PANEL * (K + K / 16));
  t->acc = carve(base, &used, 32 * 32 * sizeof(float));
  t->pairs = carve(base, &used, (size_t)slots * split_pair_bytes(K));
  return (used + 63) & ~(size_t)63; /* a multiple of 64: the next thread's base stays aligned */
}

/* Slot I's panels (split_pair_bytes apart; 64-byte multiples). */
static split_panels split_slot(const split_thread *t, size_t K, int i) {
  uint8_t *b = t->pairs + (size_t)i * split_pair_bytes(K);
  float *wd0 = (float *)b, *wm0 = wd0 + K, *wd1 = wm0 + K, *wm1 = wd1 + K;
  uint16_t *bf0 = (uint16_t *)(wm1 + K), *bf1 = bf0 + Q8_PANEL * K;
  return (split_panels){{bf0, bf1}, {wd0, wd1}, {wm0, wm1}};
}

/* The pass's parts (3 bf16 a float) and block sums, then each thread's. */
size_t cpu_split_scratch_bytes(int64_t cols, int64_t rows, int threads) {
  const size_t K = (size_t)cols, pass = (size_t)split_pass_rows((int)cols);
  split_thread t;
  return pass * 3 * K * sizeof(uint16_t) + pass * (K / 32) * sizeof(float) + 3 * 64 +
         (size_t)threads * split_thread_carve(NULL, K, split_slots((int)cols, (int)rows, threads), &t);
}

void cpu_matmul_split(const cpu_scratch *s, const q8_kernels *k, rg_buf *y, const rg_buf *x, int M,
                      const rg_bweight *w, const rg_bweight *bias, float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  const q8_format *f = format_of(w->t->type);
  const int pass = split_pass_rows(K), pairs = (N + 31) / 32;
  const int team = s->threads < pairs ? s->threads : pairs, slots = split_slots(K, N, team);
  uint16_t *tiles = align64(s->q8);
  float *sums = align64(tiles + (size_t)pass * 3 * K);
  uint8_t *per_thread = align64(sums + (size_t)pass * (K / 32));
  split_thread sized;
  const size_t thread_bytes = split_thread_carve(NULL, (size_t)K, slots, &sized);
#pragma omp parallel num_threads(team)
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const int p0 = pairs * tid / nt, p1 = pairs * (tid + 1) / nt;
    const bool keep = p1 - p0 <= slots; /* each pair its slot, decoded in the first pass */
    split_thread t;
    split_thread_carve(per_thread + (size_t)tid * thread_bytes, (size_t)K, slots, &t);
    for (int m0 = 0; m0 < M; m0 += pass) {
      const int mr = M - m0 < pass ? M - m0 : pass, padded = (mr + 31) / 32 * 32;
#pragma omp for schedule(static)
      for (int m = 0; m < padded; m++) /* rows past M: zeros, whose products are dropped */
        split_amx_pack_row(m < mr ? x->data + (size_t)(m0 + m) * K : NULL, K, f->group,
                           tiles + (size_t)(m / 16) * 16 * 3 * K, m % 16,
                           f->bias ? sums + (size_t)m * (K / 32) : NULL);
      for (int p = p0; p < p1; p++) {
        const int r0 = 32 * p;
        const split_panels panels = split_slot(&t, (size_t)K, keep ? p - p0 : 0);
        if (!keep || m0 == 0)
          for (int i = 0; i < 2; i++) {
            unpack_panel(k, f, w->t->data, w->row_bytes, N, K, r0 + 16 * i, i == 0 || p + 1 < p1, t.wt,
                         panels.wd[i], panels.wm[i], t.pad);
            split_amx_panel_bf16(t.wt, K, f->offset, panels.bf16[i]);
          }
        for (int g = 0; g < padded; g += 32) { /* the panels stay in cache for all rows of the pass */
          const split_acts xa = {tiles + (size_t)g * 3 * K, sums + (size_t)g * (K / 32)};
          split_amx_products(f, &panels, &xa, K, t.acc);
          store_rows(y->data, N, m0 + g, mr - g < 32 ? mr - g : 32, r0, N - r0 < 32 ? N - r0 : 32, t.acc, 32, bias,
                     beta);
        }
      }
      if (m0 + pass < M) {
#pragma omp barrier /* the next pass packs over these parts */
      }
    }
  }
}
