/* bench_matmul: one weight product y = x . W^T on the CPU backend, alone.
 *
 *   bench_matmul [--type q4_1] [--rows M] [--in K] [--out N] [--threads T]
 *                [--repeats R] [--form f32|file]
 *
 * Random blocks of the dtype (finite scales), M random activation rows;
 * prints the median GFLOP/s (2 M N K per product) of R products and which
 * path ran them. The default form is the float32 copy that prompts of a
 * small model use. To compare the paths on one CPU, run it again with
 * REFGEO_MAX_ISA=avx512 (no AMX: the float32 copy goes to OpenBLAS).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cli.h"
#include "backend/backend.h"
#include "backend/registry.h"
#include "tensor/dtype.h"
#include "util/error.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64*, in [-1, 1) */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0;
}

/* Random bytes, then every f16 scale of each block set small and finite:
 * enough for a timing (the formats' layouts are tested elsewhere). */
static int random_blocks(int type, int64_t K, int64_t N, uint8_t **out, size_t *bytes) {
  const size_t rb = rg_dtype_row_bytes(type, K);
  const rg_dtype_info *info = rg_dtype_get(type);
  if (!rb || !info) return rg_error_set("bench_matmul: dtype cannot hold rows of %lld", (long long)K);
  uint8_t *b = malloc(rb * (size_t)N);
  if (!b) return rg_error_set("bench_matmul: out of memory");
  for (size_t i = 0; i < rb * (size_t)N; i++) b[i] = (uint8_t)(urand() * 128 + 128);
  const size_t block_bytes = info->block_bytes, per_row = rb / block_bytes;
  const uint16_t scale = rg_fp32_to_fp16(0.01f);
  for (size_t blk = 0; blk < per_row * (size_t)N; blk++) {
    uint8_t *p = b + blk * block_bytes;
    switch (type) {
    case RG_Q4_1: memcpy(p, &scale, 2), memcpy(p + 2, &scale, 2); break;
    case RG_Q4_K: memcpy(p, &scale, 2), memcpy(p + 2, &scale, 2); break;
    case RG_Q6_K: memcpy(p + 208, &scale, 2); break;
    case RG_Q4_0: case RG_Q5_0: case RG_Q8_0: memcpy(p, &scale, 2); break;
    default: free(b); return rg_error_set("bench_matmul: no random blocks for %s", info->name);
    }
  }
  *out = b, *bytes = rb * (size_t)N;
  return 0;
}

static int dtype_named(const char *name) {
  for (int t = 0; t < RG_DTYPE_COUNT; t++)
    if (rg_dtype_get(t) && strcmp(rg_dtype_get(t)->name, name) == 0) return t;
  return -1;
}

int main(int argc, char **argv) {
  cli_runtime_env(argv);
  const char *type_name = "q4_1", *form_name = "f32";
  int M = 2048, K = 576, N = 1536, threads = 2, repeats = 9;
  const cli_opt opts[] = {
      {"type", CLI_STRING, &type_name, "weight dtype: q4_0, q4_1, q5_0, q8_0, q4_K, q6_K (default q4_1)"},
      {"rows", CLI_INT, &M, "activation rows M (default 2048)"},
      {"in", CLI_INT, &K, "inputs K (default 576)"},
      {"out", CLI_INT, &N, "outputs N (default 1536)"},
      {"threads", CLI_INT, &threads, "threads (default 2)"},
      {"repeats", CLI_INT, &repeats, "timed products (default 9)"},
      {"form", CLI_STRING, &form_name, "f32 (a float32 copy, default) or file (the blocks)"},
  };
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], "bench_matmul [flags]", NULL, 0, &n_pos);
  if (rc) return rc < 0 ? (fprintf(stderr, "bench_matmul: %s\n", rg_error_get()), 2) : 0;
  const int type = dtype_named(type_name);
  const bool file = strcmp(form_name, "file") == 0;
  if (type < 0 || (!file && strcmp(form_name, "f32") != 0) || M < 1 || K < 1 || N < 1 || repeats < 1) {
    fprintf(stderr, "bench_matmul: bad --type, --form or size\n");
    return 2;
  }
  uint8_t *blocks = NULL;
  size_t bytes = 0;
  if (random_blocks(type, K, N, &blocks, &bytes) < 0) {
    fprintf(stderr, "%s\n", rg_error_get());
    return 1;
  }
  rg_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = blocks, .nbytes = bytes};
  rg_backend *be = rg_backend_cpu_new(&(rg_backend_opts){.threads = threads});
  rg_bweight *w = be ? rg_backend_weight(be, &t, file ? RG_FORM_FILE : RG_FORM_F32) : NULL;
  float *x = malloc((size_t)M * K * sizeof *x);
  rg_buf *xb = be ? rg_buf_new(be, (size_t)M * K) : NULL, *yb = be ? rg_buf_new(be, (size_t)M * N) : NULL;
  if (!w || !x || !xb || !yb) {
    fprintf(stderr, "bench_matmul: %s\n", rg_error_get());
    return 1;
  }
  for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)urand();
  rg_buf_upload(be, xb, 0, x, (size_t)M * K);
  double *gflops = malloc((size_t)repeats * sizeof *gflops);
  for (int r = -1; r < repeats; r++) { /* one warm-up */
    const double t0 = bench_now_s();
    rg_op_matmul(be, yb, xb, M, w, NULL);
    if (rg_backend_status(be) < 0) {
      fprintf(stderr, "bench_matmul: %s\n", rg_error_get());
      return 1;
    }
    if (r >= 0) gflops[r] = 2.0 * M * N * K / (bench_now_s() - t0) / 1e9;
  }
  const char *isa = NULL;
  rg_cpu_fast_decode_isa(&isa);
  printf("%s %dx%d, %d rows, %s form, %d threads (8-bit/AMX kernels: %s): %.1f GFLOP/s\n", type_name, N, K, M,
         form_name, threads, isa ? isa : "none", bench_median(gflops, repeats));
  free(gflops), free(x), free(blocks);
  rg_buf_free(be, xb), rg_buf_free(be, yb);
  rg_bweight_free(be, w);
  rg_backend_free(be);
  return 0;
}
