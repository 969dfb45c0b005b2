/* backend/gpu/gemm.cu: the GPU backend's matrix products (backend.h
 * rg_op_matmul, rg_op_matmul_add, rg_op_matmul_backward).
 *
 * Row-major products are column-major ones transposed: y[M, N] = x W^T is
 * y^T = W x^T, which cuBLAS reads as gemm(T, N) on W [K x N col-major] and
 * x [K x M col-major]. Float32 weights take cublasSgemm in exact float32
 * (no TF32); bf16 weights take cublasGemmEx with the activations rounded to
 * bf16 and float32 accumulation, as a bf16 model runs in torch.
 *
 * HIP builds have no BLAS (Debian ships no rocBLAS), so they take
 * gpu_gemm_tiled, the project's own product: 64 x 64 output tiles, 16-deep
 * slices of A and B staged in shared memory, each of 256 threads summing a
 * 4 x 4 block in k order (deterministic). It reads bf16 weights directly and
 * keeps the activations in float32. CUDA builds compile it too, so that
 * test_backend checks it against cuBLAS (backend name "cuda-tiled"). */
#include "backend/gpu/gpu_internal.h"

#ifdef RG_GPU_CUBLAS
#include <dlfcn.h>
#include <stdlib.h>
#endif

enum { TILE_M = 64, TILE_N = 64, TILE_K = 16 };

template <typename TB>
__device__ static inline float load_b(const TB *b, size_t i);
template <> __device__ inline float load_b<float>(const float *b, size_t i) { return b[i]; }
template <> __device__ inline float load_b<uint16_t>(const uint16_t *b, size_t i) { return gpu_bf16_to_f32(b[i]); }

template <typename TB>
__global__ static void gemm_tiled_kernel(float *c, int ldc, const float *a, long am, long ak, const TB *b, long bk,
                                         long bn, int M, int N, int K, float beta) {
  __shared__ float as[TILE_K][TILE_M];
  __shared__ float bs[TILE_K][TILE_N];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
  float acc[4][4] = {{0}};
  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int e = tid; e < TILE_M * TILE_K; e += blockDim.x) {
      const int m = e / TILE_K, k = e % TILE_K;
      as[k][m] = m0 + m < M && k0 + k < K ? a[(size_t)(m0 + m) * am + (size_t)(k0 + k) * ak] : 0.0f;
    }
    for (int e = tid; e < TILE_K * TILE_N; e += blockDim.x) {
      const int k = e / TILE_N, n = e % TILE_N;
      bs[k][n] = k0 + k < K && n0 + n < N ? load_b(b, (size_t)(k0 + k) * bk + (size_t)(n0 + n) * bn) : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; k++)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += as[k][ty * 4 + i] * bs[k][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N) {
        float *out = c + (size_t)m * ldc + n;
        *out = beta == 0.0f ? acc[i][j] : beta * *out + acc[i][j];
      }
    }
}

void gpu_gemm_tiled(rg_backend *be, float *c, int ldc, const float *a, long am, long ak, const float *b,
                    const uint16_t *b16, long bk, long bn, int M, int N, int K, float beta) {
  if (M <= 0 || N <= 0) return;
  const dim3 grid((unsigned)((N + TILE_N - 1) / TILE_N), (unsigned)((M + TILE_M - 1) / TILE_M));
  if (b16)
    RG_LAUNCH(gemm_tiled_kernel<uint16_t>, grid, dim3(GPU_THREADS), 0, gpu(be)->stream, c, ldc, a, am, ak, b16, bk, bn,
              M, N, K, beta);
  else
    RG_LAUNCH(gemm_tiled_kernel<float>, grid, dim3(GPU_THREADS), 0, gpu(be)->stream, c, ldc, a, am, ak, b, bk, bn, M,
              N, K, beta);
  gpu_check(be, "tiled matmul");
}

/* The own product even where cuBLAS is built in: the "cuda-tiled" backend
 * (rg_backend_gpu_new) sets it, for tests. */
static bool use_tiled(rg_backend *be) {
#ifdef RG_GPU_CUBLAS
  return gpu(be)->tiled;
#else
  (void)be;
  return true;
#endif
}

#ifdef RG_GPU_CUBLAS
/* cuBLAS is opened at run time, not linked: a build made with one CUDA
 * toolkit then runs where another's cuBLAS is installed (a GPU machine
 * often has only the one PyTorch's wheels bring, libcublas.so.12), and the
 * "cuda-tiled" backend needs none. The functions used keep their
 * signatures across CUDA 11 to 13. REFGEO_CUBLAS may name the library. */
static struct {
  bool tried;
  void *lib;
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                          const float *, int, const float *, int, const float *, float *, int);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                            const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
} cublas;

static int open_cublas(void) {
  if (cublas.tried) return cublas.lib ? 0 : rg_error_set("cuBLAS was not found");
  cublas.tried = true;
  const char *names[] = {getenv("REFGEO_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !cublas.lib; i++)
    if (names[i] && *names[i]) cublas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!cublas.lib)
    return rg_error_set("cuBLAS was not found (libcublas.so.13 or .12 on the library path, or REFGEO_CUBLAS=PATH; "
                        "the cuda-tiled backend needs none)");
  *(void **)&cublas.create = dlsym(cublas.lib, "cublasCreate_v2");
  *(void **)&cublas.destroy = dlsym(cublas.lib, "cublasDestroy_v2");
  *(void **)&cublas.set_stream = dlsym(cublas.lib, "cublasSetStream_v2");
  *(void **)&cublas.set_math_mode = dlsym(cublas.lib, "cublasSetMathMode");
  *(void **)&cublas.sgemm = dlsym(cublas.lib, "cublasSgemm_v2");
  *(void **)&cublas.gemm_ex = dlsym(cublas.lib, "cublasGemmEx");
  if (!cublas.create || !cublas.destroy || !cublas.set_stream || !cublas.set_math_mode || !cublas.sgemm ||
      !cublas.gemm_ex) {
    dlclose(cublas.lib);
    cublas.lib = NULL;
    return rg_error_set("cuBLAS lacks a function refgeo calls");
  }
  return 0;
}

int gpu_blas_init(rg_backend *be) {
  gpu_backend *g = gpu(be);
  if (g->tiled) return 0;
  if (open_cublas() < 0) return -1;
  /* exact float32 products (no TF32), as the CPU backend's */
  if (cublas.create(&g->blas) != CUBLAS_STATUS_SUCCESS || cublas.set_stream(g->blas, g->stream) != CUBLAS_STATUS_SUCCESS ||
      cublas.set_math_mode(g->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
    return rg_error_set("cuBLAS could not start");
  return 0;
}

void gpu_blas_free(rg_backend *be) {
  gpu_backend *g = gpu(be);
  if (g->blas) cublas.destroy(g->blas);
}

__device__ static inline uint16_t f32_to_bf16_dev(float f) {
  const uint32_t u = rg_float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

__global__ static void to_bf16_kernel(uint16_t *dst, const float *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = f32_to_bf16_dev(src[i]);
}

/* X [n floats] rounded to bf16 in the scratch; NULL on failure. */
static const uint16_t *as_bf16(rg_backend *be, const float *x, size_t n) {
  uint16_t *xb = (uint16_t *)gpu_scratch(be, n * sizeof *xb);
  if (!xb) return NULL;
  RG_LAUNCH(to_bf16_kernel, gpu_blocks(n), GPU_THREADS, 0, gpu(be)->stream, xb, x, n);
  return gpu_check(be, "bf16 activations") == 0 ? xb : NULL;
}

/* C [cols-major m x n, ldc] = alpha op(A) op(B) + beta C, A = W (float32
 * or bf16, lda) and B = X (float32, rounded to bf16 with a bf16 W). */
static void blas(rg_backend *be, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const rg_bweight *w,
                 int lda, const float *x, size_t x_floats, int ldb, float *c, int ldc, float beta) {
  const float one = 1.0f;
  cublasStatus_t st;
  if (w->f32) {
    st = cublas.sgemm(gpu(be)->blas, ta, tb, m, n, k, &one, w->f32, lda, x, ldb, &beta, c, ldc);
  } else {
    const uint16_t *xb = as_bf16(be, x, x_floats);
    if (!xb) return;
    st = cublas.gemm_ex(gpu(be)->blas, ta, tb, m, n, k, &one, w->bf16, CUDA_R_16BF, lda, xb, CUDA_R_16BF, ldb, &beta,
                        c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (st != CUBLAS_STATUS_SUCCESS) gpu_fail(be, "cuBLAS gemm: status %d", (int)st);
}
#endif

__global__ static void add_bias_kernel(float *y, const float *bias, int M, int N) {
  const size_t n = (size_t)M * N;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] += bias[i % N];
}

/* y = x W^T + bias (beta 0) or y += x W^T (beta 1). */
static void matmul_into(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias,
                        float beta) {
  const int K = (int)w->cols, N = (int)w->rows;
  if (M <= 0) return;
  if (use_tiled(be))
    gpu_gemm_tiled(be, y->data, N, x->data, K, 1, w->f32, w->bf16, 1, K, M, N, K, beta);
#ifdef RG_GPU_CUBLAS
  else
    blas(be, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, w, K, x->data, (size_t)M * K, K, y->data, N, beta);
#endif
  if (bias) RG_LAUNCH(add_bias_kernel, gpu_blocks((size_t)M * N), GPU_THREADS, 0, gpu(be)->stream, y->data, bias->f32, M, N);
  gpu_check(be, "matmul");
}

void gpu_matmul(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias) {
  matmul_into(be, y, x, M, w, bias, 0.0f);
}

void gpu_matmul_add(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w) {
  matmul_into(be, y, x, M, w, NULL, 1.0f);
}

/* dbias[n] += sum over rows of dy[m, n], rows in order (deterministic). */
__global__ static void column_sums_kernel(float *dbias, const float *dy, int M, int N) {
  for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
    float sum = 0;
    for (int m = 0; m < M; m++) sum += dy[(size_t)m * N + n];
    dbias[n] += sum;
  }
}

void gpu_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                         int M, const rg_bweight *w) {
  const int K = (int)w->cols, N = (int)w->rows;
  if (M <= 0) return;
  if (use_tiled(be)) {
    if (dx) gpu_gemm_tiled(be, dx->data, K, dy->data, N, 1, w->f32, w->bf16, K, 1, M, K, N, 1.0f);
    /* dw [N, K] += dy^T x: A(n, m) = dy[m, n], B(m, k) = x[m, k] */
    if (dw) gpu_gemm_tiled(be, dw->data, K, dy->data, 1, N, x->data, NULL, K, 1, N, K, M, 1.0f);
  }
#ifdef RG_GPU_CUBLAS
  else {
    /* dx^T [K x M] += W^T-as-read [K x N] dy^T [N x M] */
    if (dx) blas(be, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, w, K, dy->data, (size_t)M * N, N, dx->data, K, 1.0f);
    /* dw^T [K x N] += x^T [K x M] dy [M x N] */
    const float one = 1.0f;
    if (dw && cublas.sgemm(gpu(be)->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &one, x->data, K, dy->data, N, &one,
                           dw->data, K) != CUBLAS_STATUS_SUCCESS)
      gpu_fail(be, "cuBLAS gemm: weight gradient");
  }
#endif
  if (dbias)
    RG_LAUNCH(column_sums_kernel, gpu_blocks((size_t)N), GPU_THREADS, 0, gpu(be)->stream, dbias->data, dy->data, M, N);
  gpu_check(be, "matmul backward");
}
