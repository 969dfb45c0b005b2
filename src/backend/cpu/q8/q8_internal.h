/* backend/cpu/q8/q8_internal.h: what the 8-bit products' driver
 * (backend/cpu/q8/q8.c: formats, dispatch, threads) shares with its kernels,
 * one file per instruction set (backend/cpu/q8/avx512.c,
 * backend/cpu/q8/avx2.c), whose weight decoders are written once in
 * backend/cpu/q8/unpack.h. Private to the CPU backend. */
#ifndef RG_BACKEND_CPU_Q8_INTERNAL_H
#define RG_BACKEND_CPU_Q8_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

enum {
  Q8_PANEL = 16, /* weight rows decoded together: one per 32-bit lane of 512 bits */
  Q8_XROWS = 16, /* activation rows multiplied with a decoded panel per call */
  Q8_CHUNK = 64, /* columns per 16 64-byte registers of a decoded panel */
  Q8_QK_K = 256  /* elements per block of the K formats */
};

typedef enum { Q8_Q4_0, Q8_Q4_1, Q8_Q5_0, Q8_Q8_0, Q8_Q4_K, Q8_Q6_K, Q8_FORMATS } q8_format_id;

/* A block format as the kernels see it: the dequantized weight is exactly
 * wd * (u - offset) + wm, u an unpacked byte: at most 15 for the 4-bit
 * formats, 31 for q5_0, 63 for q6_K and 255 for q8_0 (umax, which bounds
 * the AVX2 kernels' int16 sums). */
typedef struct {
  q8_format_id id;
  int block;  /* elements per block of the file format: 32 or 256 */
  int group;  /* elements per sub-block (one wd, wm): 16 or 32 */
  int offset; /* o in wd * (u - o) + wm */
  bool bias;  /* wm is used */
} q8_format;

/* The decoders read 16 rows at a time: 16 interleaved streams, which the
 * hardware prefetcher follows badly, and DRAM then idled while the panel
 * was decoded. Each decoder step (a block of its format) fetches its share
 * of the next panel's bytes (contiguous) into L2 instead. */
typedef struct {
  const char *next; /* the next panel, or NULL */
  size_t bytes, done, per_step;
} q8_prefetch;

static inline void q8_prefetch_step(q8_prefetch *pf) {
  if (!pf->next) return;
  const size_t end = pf->done + pf->per_step < pf->bytes ? pf->done + pf->per_step : pf->bytes;
  for (; pf->done < end; pf->done += 64) _mm_prefetch(pf->next + pf->done, _MM_HINT_T1);
}

/* Quantized activation rows: q[K] per row and a scale per 32; and, for
 * the product's format (G elements a sub-block, offset o), each
 * sub-block's o * (sum of q) and each block of 32's dx * (float)(sum of
 * q): terms every weight row's scaling repeats, made once per row by the
 * driver (computed in the kernels' inner loops, they cost 12-20% of a
 * 576 x 1536 product on AVX-512 VNNI and on AVX2). */
typedef struct {
  const int8_t *q;
  const float *d;
  const int32_t *offset_qsum; /* [K / G] per row */
  const float *dx_qsum;       /* [K / 32] per row */
} q8_acts;

/* Unpacks a panel of 16 weight rows of K elements (row r at
 * rows + r * row_bytes) into the layout the products read: "register" j
 * (64 bytes at wt + 64 j) holds elements 4j..4j+3 of every row, row r in
 * 32-bit word r, as unsigned bytes u; and per sub-block s the 16 rows'
 * scales at wd + 16 s and, for formats with a bias, biases at wm + 16 s.
 * The layout is the same for every instruction set. */
typedef void (*q8_unpack_fn)(const uint8_t *rows, size_t row_bytes, int K, uint8_t *wt, float *wd, float *wm,
                             q8_prefetch *pf);

/* X(G, O, B) for each (group, offset, bias) of the formats: the constants a
 * kernel specializes its sub-block loop on. */
#define Q8_SHAPES(X)                                                                                                   \
  X(32, 0, true)    /* q4_1, q4_K */                                                                                   \
  X(32, 8, false)   /* q4_0 */                                                                                         \
  X(32, 16, false)  /* q5_0 */                                                                                         \
  X(32, 128, false) /* q8_0 */                                                                                         \
  X(16, 32, false)  /* q6_K */

/* One instruction set's kernels. All give bitwise the same results: the
 * integer sums are exact, and the float operations are the same ones in
 * the same order (backend/cpu/q8/q8.c). */
typedef struct q8_kernels {
  const char *name; /* "amx", "avx512", "avx2": REFGEO_MAX_ISA's values */
  q8_unpack_fn unpack[Q8_FORMATS];
  /* One block of 32 elements of x quantized: q[32], its scale *d and the
   * sums of q over each half (sum16[0..1]). */
  void (*quantize_block)(const float *x, int8_t *q, float *d, int32_t *sum16);
  /* out[16 m + r] = row r of the unpacked panel (wt, wd, wm) times row m
   * of x, for M <= Q8_XROWS rows. */
  void (*panel_dots)(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm, const q8_acts *x, int K,
                     int M, float *out);
  bool (*cpu_has)(void); /* this CPU runs them */
} q8_kernels;

extern const q8_kernels q8_kernels_amx, q8_kernels_avx512, q8_kernels_avx2;

/* AMX's multiplication and test (backend/cpu/q8/amx.c); its decoders and
 * quantizer are the AVX-512 kernels', whose file (backend/cpu/q8/avx512.c)
 * holds q8_kernels_amx and calls these. q8_amx_tile_dots takes panels of
 * at least Q8_AMX_MIN_ROWS rows; q8_amx_tiles_usable tells whether the CPU
 * has the tiles and the kernel grants them; q8_amx_cpu_has (avx512.c) whether
 * the AVX-512 kernels run too, i.e. whether q8_kernels_amx does. */
/* Below this many activation rows a tile multiply does less work than
 * VNNI's broadcasts, which are then cheaper: a decode step's product goes
 * to the AVX-512 kernel (the same bits). */
enum { Q8_AMX_MIN_ROWS = 4 };
void q8_amx_tile_dots(const q8_format *f, const uint8_t *wt, const float *wd, const float *wm, const q8_acts *x,
                      int K, int M, float *out);
bool q8_amx_tiles_usable(void);
bool q8_amx_cpu_has(void);

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_tile_config;

/* A thread keeps a tile configuration loaded until another shape comes;
 * shapes are the kernels' own numbers: the 8-bit kernels' M * 64 + G
 * (below AMX_SHAPE_SPLIT), the split kernels' AMX_SHAPE_SPLIT + G. */
enum { AMX_SHAPE_SPLIT = 1 << 12 };
bool amx_tiles_loaded(int shape);
void amx_tiles_load(int shape, const amx_tile_config *cfg);

/* The split products' operands (backend/cpu/q8/split_amx.c): two decoded
 * weight panels (rows r0..r0+15 and r0+16..r0+31) as bf16 B tiles with
 * their scales and biases, and 32 activation rows cut into bf16 parts. */
typedef struct {
  uint16_t *bf16[2]; /* split_amx_panel_bf16 of each panel (the products only read them) */
  float *wd[2], *wm[2];
} split_panels;
typedef struct {
  const uint16_t *tiles; /* two groups of 16 rows, 3 K bf16 each row (split_amx_pack_row) */
  const float *sums;     /* per row, K / 32 block sums of x (bias formats) */
} split_acts;

/* Row R (< 16) of a group of 16 rows: x's K floats (NULL: zeros) cut
 * into parts in the group's TILES (G elements a sub-block); with SUMS,
 * each block of 32's float32 sum there. */
void split_amx_pack_row(const float *x, int K, int group, uint16_t *tiles, int r, float *sums);
/* A decoded panel (q8_unpack_fn's wt) as B tiles of (u - offset) in bf16,
 * 2 K bf16 at WB. */
void split_amx_panel_bf16(const uint8_t *wt, int K, int offset, uint16_t *wb);
/* acc[32 m + n] = activation row m times weight row n (n < 16: panel 0). */
void split_amx_products(const q8_format *f, const split_panels *w, const split_acts *x, int K, float *acc);
/* AMX-BF16 and AVX-512 BF16, and the tile state granted (q8_amx_cpu_has). */
bool split_amx_cpu_has(void);

#endif
