/* backend/gpu/gpu.cu: the GPU backend's table, status, buffers, batches and
 * weights (backend.h), for CUDA (nvcc) and, from the same source, HIP
 * (hipcc, or HIP-CPU on the host: gpu_vendor.h). The operations are in
 * backend/gpu/gemm.cu, backend/gpu/ops.cu and backend/gpu/attention.cu, the
 * helpers they and this file call in backend/gpu/support.cu;
 * backend/gpu/gpu_internal.h says how memory and weights are kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu/gpu_internal.h"

/* ---------------------------------------------------------------- errors */

/* Waits for the stream; returns the first failure (and clears it). */
static int gpu_status(rg_backend *be) {
  gpu_backend *g = gpu(be);
  const cudaError_t e = cudaStreamSynchronize(g->stream);
  if (e != cudaSuccess) gpu_fail(be, "%s", cudaGetErrorString(e));
  if (!g->failed) return 0;
  g->failed = false;
  return rg_error_set("%s backend: %s", RG_GPU_VENDOR_NAME, g->error);
}

/* ---------------------------------------------------------------- memory */

static rg_buf *gpu_buf_new(rg_backend *be, size_t n) {
  rg_buf *b = (rg_buf *)calloc(1, sizeof *b);
  if (!b || cudaMalloc((void **)&b->data, (n > 0 ? n : 1) * sizeof(float)) != cudaSuccess) {
    (void)cudaGetLastError();
    free(b);
    rg_error_set("%s backend: out of device memory for %zu floats", RG_GPU_VENDOR_NAME, n);
    return NULL;
  }
  b->n = n;
  /* zero-filled, as backend.h promises; the fill also commits the pages */
  gpu_ok(be, cudaMemsetAsync(b->data, 0, n * sizeof(float), gpu(be)->stream), "new buffer");
  return b;
}

static void gpu_buf_free(rg_backend *be, rg_buf *b) {
  (void)cudaStreamSynchronize(gpu(be)->stream);
  (void)cudaFree(b->data);
  free(b);
}

static void gpu_buf_upload(rg_backend *be, rg_buf *dst, size_t offset, const float *src, size_t n) {
  gpu_upload(be, dst->data + offset, src, n * sizeof(float));
}

static int gpu_buf_download(rg_backend *be, const rg_buf *src, size_t offset, float *dst, size_t n) {
  if (n > 0)
    gpu_ok(be, cudaMemcpyAsync(dst, src->data + offset, n * sizeof(float), cudaMemcpyDeviceToHost, gpu(be)->stream),
           "download");
  return gpu_status(be);
}

static void gpu_buf_copy(rg_backend *be, rg_buf *dst, size_t dst_offset, const rg_buf *src, size_t src_offset,
                         size_t n) {
  if (n > 0)
    gpu_ok(be,
           cudaMemcpyAsync(dst->data + dst_offset, src->data + src_offset, n * sizeof(float), cudaMemcpyDeviceToDevice,
                           gpu(be)->stream),
           "buffer copy");
}

static void gpu_buf_copy_rows(rg_backend *be, rg_buf *dst, size_t dst_offset, size_t dst_stride, const rg_buf *src,
                              size_t src_offset, size_t src_stride, int rows, size_t width) {
  if (rows > 0 && width > 0)
    gpu_ok(be,
           cudaMemcpy2DAsync(dst->data + dst_offset, dst_stride * sizeof(float), src->data + src_offset,
                             src_stride * sizeof(float), width * sizeof(float), (size_t)rows,
                             cudaMemcpyDeviceToDevice, gpu(be)->stream),
           "strided copy");
}

static void gpu_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n) {
  if (n > 0) gpu_ok(be, cudaMemsetAsync(b->data + offset, 0, n * sizeof(float), gpu(be)->stream), "zero");
}

/* ---------------------------------------------------------------- batches */

static void gpu_batch_free(rg_backend *be, rg_batch *b) {
  gpu_batch *gb = (gpu_batch *)b;
  (void)cudaStreamSynchronize(gpu(be)->stream);
  (void)(void)cudaFree(b->ids), (void)cudaFree(b->seq), (void)cudaFree(b->pos), (void)cudaFree(gb->order), (void)cudaFree(gb->seqs);
  free(gb->host);
  free(gb);
}

static rg_batch *gpu_batch_new(rg_backend *be, int cap) {
  gpu_batch *gb = (gpu_batch *)calloc(1, sizeof *gb);
  const size_t n = cap > 0 ? (size_t)cap : 1;
  bool ok = gb && (gb->host = (int *)malloc(6 * n * sizeof(int)));
  if (ok) {
    gb->base.cap = cap;
    ok = cudaMalloc((void **)&gb->base.ids, n * sizeof(int32_t)) == cudaSuccess &&
         cudaMalloc((void **)&gb->base.seq, n * sizeof(int)) == cudaSuccess &&
         cudaMalloc((void **)&gb->base.pos, n * sizeof(int)) == cudaSuccess &&
         cudaMalloc((void **)&gb->order, n * sizeof(int)) == cudaSuccess &&
         cudaMalloc((void **)&gb->seqs, 4 * n * sizeof(int)) == cudaSuccess;
  }
  if (!ok) {
    (void)cudaGetLastError();
    if (gb) gpu_batch_free(be, &gb->base);
    rg_error_set("%s backend: out of memory for a %d-token batch", RG_GPU_VENDOR_NAME, cap);
    return NULL;
  }
  return &gb->base;
}

/* Sets the metadata and, from the host arrays, attention's walk of the
 * batch (gpu_batch): the tokens grouped by sequence in batch order. */
static void gpu_batch_set(rg_backend *be, rg_batch *b, const int32_t *ids, const int *seq, const int *pos, int n) {
  gpu_batch *gb = (gpu_batch *)b;
  if (n < 0 || n > b->cap) {
    gpu_fail(be, "batch of %d tokens, room for %d", n, b->cap);
    return;
  }
  int *order = gb->host, *seqs = gb->host + b->cap, *slot = gb->host + 5 * (size_t)b->cap;
  int n_seqs = 0, max_pos = 0;
  for (int t = 0, s = 0; t < n; t++) { /* the sequences in order of first appearance */
    if (n_seqs == 0 || seqs[4 * s] != seq[t]) { /* mostly the previous token's sequence */
      for (s = 0; s < n_seqs && seqs[4 * s] != seq[t]; s++) {}
      if (s == n_seqs) {
        seqs[4 * s] = seq[t], seqs[4 * s + 2] = 0, seqs[4 * s + 3] = 0;
        n_seqs++;
      }
    }
    slot[t] = s;
    seqs[4 * s + 2]++;
    if (pos[t] > seqs[4 * s + 3]) seqs[4 * s + 3] = pos[t];
    if (pos[t] > max_pos) max_pos = pos[t];
  }
  for (int s = 0, at = 0; s < n_seqs; at += seqs[4 * s + 2], s++) seqs[4 * s + 1] = at;
  for (int t = 0; t < n; t++) order[seqs[4 * slot[t] + 1]++] = t; /* each sequence's tokens in batch order */
  for (int s = 0; s < n_seqs; s++) seqs[4 * s + 1] -= seqs[4 * s + 2];  /* the cursors back to the starts */
  gb->n_seqs = n_seqs;
  gb->max_pos = max_pos;
  b->n = n;
  if (ids) gpu_upload(be, b->ids, ids, (size_t)n * sizeof *ids);
  gpu_upload(be, b->seq, seq, (size_t)n * sizeof *seq);
  gpu_upload(be, b->pos, pos, (size_t)n * sizeof *pos);
  gpu_upload(be, gb->order, order, (size_t)n * sizeof *order);
  gpu_upload(be, gb->seqs, seqs, 4 * (size_t)n_seqs * sizeof *seqs);
}

/* ---------------------------------------------------------------- weights */

static const char *tensor_name(const rg_tensor *t) { return t->name ? t->name : "(tensor)"; }

/* Copies W to the device: a bf16 file's bytes as they are (to BF16), or its
 * rows dequantized on the host to float32 (to F32), CHUNK rows at a time.
 * 0 or -1 with the error set. */
static int upload_rows(const rg_bweight *w, float *f32, uint16_t *bf16) {
  const size_t row_bytes = rg_dtype_row_bytes(w->t->type, w->cols);
  if (bf16) {
    const cudaError_t e = cudaMemcpy(bf16, w->t->data, (size_t)w->rows * row_bytes, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? 0 : rg_error_set("%s: upload: %s", tensor_name(w->t), cudaGetErrorString(e));
  }
  const int64_t chunk = (1 << 22) / w->cols > 0 ? (1 << 22) / w->cols : 1;
  float *host = (float *)malloc((size_t)chunk * (size_t)w->cols * sizeof *host);
  int rc = host ? 0 : rg_error_set("%s: out of host memory for its upload", tensor_name(w->t));
  for (int64_t r0 = 0; rc == 0 && r0 < w->rows; r0 += chunk) {
    const int64_t nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
    for (int64_t r = 0; r < nr; r++)
      rg_dequantize_row(w->t->type, (const char *)w->t->data + (size_t)(r0 + r) * row_bytes, host + r * w->cols,
                        w->cols);
    const cudaError_t e = cudaMemcpy(f32 + (size_t)r0 * w->cols, host, (size_t)nr * w->cols * sizeof *host,
                                     cudaMemcpyHostToDevice);
    if (e != cudaSuccess) rc = rg_error_set("%s: upload: %s", tensor_name(w->t), cudaGetErrorString(e));
  }
  free(host);
  return rc;
}

static void gpu_weight_free(rg_backend *be, rg_bweight *w) {
  (void)cudaStreamSynchronize(gpu(be)->stream);
  (void)cudaFree(w->f32);
  (void)cudaFree(w->bf16);
  free(w);
}

static rg_bweight *gpu_weight_new(rg_backend *be, const rg_tensor *t, rg_weight_form form) {
  const rg_dtype_info *info = rg_dtype_get(t->type);
  if (!info || !info->can_dequantize) {
    rg_error_set("%s: dtype %d cannot be used for compute", tensor_name(t), t->type);
    return NULL;
  }
  const int64_t cols = t->ne[0], rows = rg_tensor_nrows(t);
  const size_t row_bytes = rg_dtype_row_bytes(t->type, cols);
  if (cols <= 0 || rows <= 0 || row_bytes == 0 || (size_t)rows > SIZE_MAX / row_bytes ||
      row_bytes * (size_t)rows > t->nbytes) {
    rg_error_set("%s: %lld x %lld %s elements do not fit its %zu bytes", tensor_name(t), (long long)rows,
                 (long long)cols, info->name, t->nbytes);
    return NULL;
  }
  rg_bweight *w = (rg_bweight *)calloc(1, sizeof *w);
  if (!w) {
    rg_error_set("%s: out of memory", tensor_name(t));
    return NULL;
  }
  w->t = t;
  w->rows = rows;
  w->cols = cols;
  /* bf16 only where it is exact: a bf16 file's matrices in a file form */
  const bool f32 = rows == 1 || form == RG_FORM_F32 || t->type != RG_BF16;
  const size_t n = (size_t)rows * (size_t)cols;
  void **dst = f32 ? (void **)&w->f32 : (void **)&w->bf16;
  if (cudaMalloc(dst, n * (f32 ? sizeof(float) : sizeof(uint16_t))) != cudaSuccess) {
    (void)cudaGetLastError();
    free(w);
    rg_error_set("%s: out of device memory for %lld x %lld %s", tensor_name(t), (long long)rows, (long long)cols,
                 f32 ? "f32" : "bf16");
    return NULL;
  }
  if (upload_rows(w, w->f32, w->bf16) < 0) {
    gpu_weight_free(be, w);
    return NULL;
  }
  return w;
}

static size_t gpu_weight_bytes(const rg_bweight *w) {
  return (size_t)w->rows * (size_t)w->cols * (w->f32 ? sizeof(float) : sizeof(uint16_t));
}

__global__ static void bf16_to_f32_kernel(float *dst, const uint16_t *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = gpu_bf16_to_f32(src[i]);
}

static int gpu_weight_make_f32(rg_backend *be, rg_bweight *w) {
  if (w->f32) return 0;
  const size_t n = (size_t)w->rows * (size_t)w->cols;
  float *f = NULL;
  if (cudaMalloc((void **)&f, n * sizeof *f) != cudaSuccess) {
    (void)cudaGetLastError();
    return rg_error_set("%s: out of device memory for a %zu-float f32 copy", tensor_name(w->t), n);
  }
  /* from the file, not the bf16 copy: training starts from the exact weights */
  w->f32 = f;
  if (upload_rows(w, w->f32, NULL) < 0) return -1;
  (void)cudaStreamSynchronize(gpu(be)->stream);
  (void)cudaFree(w->bf16);
  w->bf16 = NULL;
  return gpu_status(be);
}

static int gpu_weight_download(rg_backend *be, const rg_bweight *w, float *dst) {
  const size_t n = (size_t)w->rows * (size_t)w->cols;
  if (w->f32) {
    gpu_ok(be, cudaMemcpyAsync(dst, w->f32, n * sizeof *dst, cudaMemcpyDeviceToHost, gpu(be)->stream),
           "weight download");
    return gpu_status(be);
  }
  float *tmp = (float *)gpu_scratch(be, n * sizeof *tmp);
  if (tmp) RG_LAUNCH(bf16_to_f32_kernel, gpu_blocks(n), GPU_THREADS, 0, gpu(be)->stream, tmp, w->bf16, n);
  if (tmp && gpu_check(be, "weight download") == 0)
    gpu_ok(be, cudaMemcpyAsync(dst, tmp, n * sizeof *dst, cudaMemcpyDeviceToHost, gpu(be)->stream), "weight download");
  return gpu_status(be);
}

static int gpu_weight_upload(rg_backend *be, rg_bweight *w, const float *src) {
  if (!w->f32) return rg_error_set("%s: not a float32 weight (rg_bweight_make_f32)", tensor_name(w->t));
  gpu_upload(be, w->f32, src, (size_t)w->rows * (size_t)w->cols * sizeof *src);
  return gpu_status(be);
}

static int gpu_weight_f32_view(rg_backend *be, rg_bweight *w, rg_buf *view) {
  if (!w->f32) return rg_error_set("%s: not a float32 weight (rg_bweight_make_f32)", tensor_name(w->t));
  *view = rg_buf{(size_t)w->rows * (size_t)w->cols, w->f32};
  return 0;
}

/* ---------------------------------------------------------------- lifetime */

static void gpu_free(rg_backend *be) {
  gpu_backend *g = gpu(be);
  (void)cudaStreamSynchronize(g->stream);
#ifdef RG_GPU_CUBLAS
  gpu_blas_free(be);
#endif
  (void)cudaFree(g->scratch);
  (void)cudaStreamDestroy(g->stream);
  free(g);
}

static const rg_backend_iface GPU_IFACE = {
    RG_GPU_VENDOR_NAME,
    gpu_free,
    gpu_status,
    gpu_buf_new,
    gpu_buf_free,
    gpu_buf_upload,
    gpu_buf_download,
    gpu_batch_new,
    gpu_batch_free,
    gpu_batch_set,
    gpu_gather_rows,
    gpu_buf_copy,
    gpu_buf_copy_rows,
    gpu_weight_new,
    gpu_weight_free,
    gpu_weight_bytes,
    gpu_weight_make_f32,
    gpu_weight_download,
    gpu_weight_upload,
    gpu_matmul,
    gpu_matmul_add,
    gpu_embed,
    gpu_rmsnorm,
    gpu_rope,
    gpu_kv_store,
    gpu_attention,
    gpu_swiglu,
    gpu_add,
    gpu_scale,
    gpu_ablate,
    gpu_add_scaled,
    gpu_buf_zero,
    gpu_gather_rows_backward,
    gpu_matmul_backward,
    gpu_embed_backward,
    gpu_rmsnorm_backward,
    gpu_rope_backward,
    gpu_swiglu_backward,
    gpu_attention_backward,
    gpu_kv_store_backward,
    gpu_cross_entropy,
    gpu_unlikelihood,
    gpu_sum_squares,
    gpu_adamw,
    gpu_weight_f32_view,
};

extern "C" int rg_gpu_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" const char *rg_gpu_backend_name(void) { return RG_GPU_VENDOR_NAME; }

extern "C" int rg_gpu_device_info(int i, char *name, size_t name_len, size_t *bytes) {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
    (void)cudaGetLastError();
    return rg_error_set("%s device %d: not found", RG_GPU_VENDOR_NAME, i);
  }
  snprintf(name, name_len, "%s", p.name);
  *bytes = p.totalGlobalMem;
  return 0;
}

/* opts->name is "cuda", "cuda-tiled" or "hip", and with ":N" the N-th
 * device; NULL is this build's GPU backend on device 0 (rg_backend_new
 * passes the name it resolved, REFGEO_DEVICE included). */
extern "C" rg_backend *rg_backend_gpu_new(const rg_backend_opts *opts) {
  const char *name = opts && opts->name ? opts->name : rg_gpu_backend_name();
  const char *colon = strchr(name, ':');
  const int device = colon ? atoi(colon + 1) : 0, count = rg_gpu_device_count();
  if (device < 0 || device >= count) {
    rg_error_set("%s backend: device %d of %d found", RG_GPU_VENDOR_NAME, device, count);
    return NULL;
  }
  gpu_backend *g = (gpu_backend *)calloc(1, sizeof *g);
  if (!g) {
    rg_error_set("%s backend: out of memory", RG_GPU_VENDOR_NAME);
    return NULL;
  }
  g->base.iface = &GPU_IFACE;
  g->base.threads = 1;
  g->device = device;
#ifdef RG_GPU_CUBLAS
  g->tiled = strncmp(name, "cuda-tiled", 10) == 0;
#endif
  if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreate(&g->stream) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    rg_error_set("%s backend: device %d: %s", RG_GPU_VENDOR_NAME, device, cudaGetErrorString(e));
    free(g);
    return NULL;
  }
#ifdef RG_GPU_CUBLAS
  if (gpu_blas_init(&g->base) < 0) {
    rg_error_prefix("%s backend", RG_GPU_VENDOR_NAME);
    gpu_free(&g->base);
    return NULL;
  }
#endif
  return &g->base;
}
