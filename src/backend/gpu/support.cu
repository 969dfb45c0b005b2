/* backend/gpu/support.cu: what every file of the GPU backend calls: error
 * recording (gpu_fail, gpu_ok, gpu_check), the shared scratch and uploads
 * (gpu_internal.h). A file of its own, below the operation files and the
 * table (gpu.cu), so that none of them calls back into another. */
#include <stdarg.h>
#include <stdio.h>

#include "backend/gpu/gpu_internal.h"

/* ---------------------------------------------------------------- errors */

void gpu_fail(rg_backend *be, const char *fmt, ...) {
  gpu_backend *g = gpu(be);
  if (g->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->error, sizeof g->error, fmt, ap);
  va_end(ap);
  g->failed = true;
}

int gpu_ok(rg_backend *be, cudaError_t e, const char *what) {
  if (e != cudaSuccess) gpu_fail(be, "%s: %s", what, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : -1;
}

int gpu_check(rg_backend *be, const char *what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) gpu_fail(be, "%s: %s", what, cudaGetErrorString(e));
  return gpu(be)->failed ? -1 : 0;
}

/* ---------------------------------------------------------------- memory */

void *gpu_scratch(rg_backend *be, size_t bytes) {
  gpu_backend *g = gpu(be);
  if (bytes <= g->scratch_bytes) return g->scratch;
  (void)cudaStreamSynchronize(g->stream); /* queued work may still read the old scratch */
  (void)cudaFree(g->scratch);
  g->scratch = NULL;
  g->scratch_bytes = 0;
  const size_t grown = bytes + bytes / 2;
  if (cudaMalloc((void **)&g->scratch, grown) != cudaSuccess) {
    (void)cudaGetLastError();
    gpu_fail(be, "out of device memory for %zu bytes of scratch", grown);
    return NULL;
  }
  g->scratch_bytes = grown;
  return g->scratch;
}

/* CUDA's async copy from pageable memory returns once it has read the
 * host array; HIP promises that only for pinned memory (HIP-CPU reads it
 * when the stream runs), so on HIP an upload waits for its copy. */
void gpu_upload(rg_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes > 0) gpu_ok(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, gpu(be)->stream), "upload");
#if defined(RG_GPU_HIP) || defined(RG_GPU_HIP_CPU)
  gpu_ok(be, cudaStreamSynchronize(gpu(be)->stream), "upload");
#endif
}
