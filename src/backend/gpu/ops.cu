/* backend/gpu/ops.cu: the GPU backend's elementwise, row, loss and
 * optimizer operations, forward and backward (backend.h). Each follows the
 * CPU backend's formula (backend/cpu/cpu.c, backend/cpu/grad.c) in the same
 * precision: row sums of squares and dot products in double, the softmax's
 * terms as float expf summed in double.
 *
 * Determinism without atomics: where several tokens add into one row (the
 * embedding and gather gradients, RMSNorm's weight gradient, a bias), one
 * thread owns each column and walks the rows in order, so every float is
 * the same sequence of additions on every run. */
#include <math.h>

#include "backend/gpu/gpu_internal.h"

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static cudaStream_t stream(rg_backend *be) { return gpu(be)->stream; }

/* ---------------------------------------------------------------- rows */

__global__ static void gather_rows_kernel(float *dst, const float *src, const int *rows, int n, int width) {
  GRID_STRIDE(i, (size_t)n * width) dst[i] = src[(size_t)rows[i / width] * width + i % width];
}

/* dst[rows[i], j] += src[i, j]: thread j walks i in order (rows may repeat). */
__global__ static void scatter_add_kernel(float *dst, const float *src, const int *rows, int n, int width) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < width; j += gridDim.x * blockDim.x)
    for (int i = 0; i < n; i++) dst[(size_t)rows[i] * width + j] += src[(size_t)i * width + j];
}

/* ROWS as device ints in the scratch; NULL on failure. */
static const int *device_rows(rg_backend *be, const int *rows, int n) {
  int *d = (int *)gpu_scratch(be, (size_t)(n > 0 ? n : 1) * sizeof *d);
  if (d) gpu_upload(be, d, rows, (size_t)n * sizeof *d);
  return d;
}

void gpu_gather_rows(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n, int width) {
  const int *d = n > 0 ? device_rows(be, rows, n) : NULL;
  if (d) RG_LAUNCH(gather_rows_kernel, gpu_blocks((size_t)n * width), GPU_THREADS, 0, stream(be), dst->data, src->data, d, n, width);
  gpu_check(be, "gather rows");
}

void gpu_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width) {
  const int *d = n > 0 ? device_rows(be, rows, n) : NULL;
  if (d) RG_LAUNCH(scatter_add_kernel, gpu_blocks((size_t)width), GPU_THREADS, 0, stream(be), dsrc->data, ddst->data, d, n, width);
  gpu_check(be, "gather rows backward");
}

__global__ static void embed_kernel(float *out, const float *w, const uint16_t *w16, const int32_t *ids, int n, int d) {
  GRID_STRIDE(i, (size_t)n * d) {
    const size_t at = (size_t)ids[i / d] * d + i % d;
    out[i] = w ? w[at] : gpu_bf16_to_f32(w16[at]);
  }
}

void gpu_embed(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b) {
  const int d = (int)w->cols;
  if (b->n > 0)
    RG_LAUNCH(embed_kernel, gpu_blocks((size_t)b->n * d), GPU_THREADS, 0, stream(be), out->data, w->f32, w->bf16, b->ids, b->n, d);
  gpu_check(be, "embed");
}

void gpu_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d) {
  if (b->n > 0) RG_LAUNCH(scatter_add_kernel, gpu_blocks((size_t)d), GPU_THREADS, 0, stream(be), dw->data, dy->data, b->ids, b->n, d);
  gpu_check(be, "embed backward");
}

/* ---------------------------------------------------------------- RMSNorm */

/* One block per row: y = g * (x * r), r = 1 / sqrt(mean(x^2) + eps). */
__global__ static void rmsnorm_kernel(float *y, const float *x, const float *g, int d, float eps) {
  __shared__ double sh[GPU_THREADS];
  const float *xr = x + (size_t)blockIdx.x * d;
  float *yr = y + (size_t)blockIdx.x * d;
  double ss = 0;
  for (int i = threadIdx.x; i < d; i += blockDim.x) ss += (double)xr[i] * xr[i];
  ss = gpu_block_sum(ss, sh);
  const float inv = (float)(1.0 / sqrt(ss / d + eps));
  for (int i = threadIdx.x; i < d; i += blockDim.x) yr[i] = g[i] * (xr[i] * inv);
}

void gpu_rmsnorm(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d, float eps) {
  if (rows > 0) RG_LAUNCH(rmsnorm_kernel, dim3((unsigned)rows), GPU_THREADS, 0, stream(be), y->data, x->data, w->f32, d, eps);
  gpu_check(be, "rmsnorm");
}

/* dx += r g dy - x r^3 / d * sum_i g_i dy_i x_i; R[row] = (float)r for dw. */
__global__ static void rmsnorm_backward_kernel(float *dx, float *r_out, const float *dy, const float *x, const float *g,
                                               int d, float eps) {
  __shared__ double sh[GPU_THREADS];
  const size_t at = (size_t)blockIdx.x * d;
  double dot = 0, ss = 0;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    dot += (double)g[i] * dy[at + i] * x[at + i];
    ss += (double)x[at + i] * x[at + i];
  }
  dot = gpu_block_sum(dot, sh);
  ss = gpu_block_sum(ss, sh);
  const double rr = 1.0 / sqrt(ss / d + eps);
  const float a = (float)rr, b = (float)(rr * rr * rr * dot / d);
  for (int i = threadIdx.x; i < d; i += blockDim.x) dx[at + i] += a * g[i] * dy[at + i] - b * x[at + i];
  if (threadIdx.x == 0) r_out[blockIdx.x] = (float)rr;
}

/* dw[i] += sum over rows of dy x r, rows in order. */
__global__ static void rmsnorm_dw_kernel(float *dw, const float *dy, const float *x, const float *r, int rows, int d) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d; i += gridDim.x * blockDim.x) {
    float acc = dw[i];
    for (int row = 0; row < rows; row++) acc += dy[(size_t)row * d + i] * x[(size_t)row * d + i] * r[row];
    dw[i] = acc;
  }
}

void gpu_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                          const rg_bweight *w, int rows, int d, float eps) {
  float *r = rows > 0 ? (float *)gpu_scratch(be, (size_t)rows * sizeof *r) : NULL;
  if (r) {
    RG_LAUNCH(rmsnorm_backward_kernel, dim3((unsigned)rows), GPU_THREADS, 0, stream(be), dx->data, r, dy->data, x->data,
              w->f32, d, eps);
    if (dw) RG_LAUNCH(rmsnorm_dw_kernel, gpu_blocks((size_t)d), GPU_THREADS, 0, stream(be), dw->data, dy->data, x->data, r, rows, d);
  }
  gpu_check(be, "rmsnorm backward");
}

/* ---------------------------------------------------------------- RoPE */

/* One thread per (token, head, pair); SIGN -1 rotates back (the backward). */
__global__ static void rope_kernel(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                                   const float *inv_freq, bool adjacent, float sign) {
  const int half = head_dim / 2;
  GRID_STRIDE(e, (size_t)n_tokens * n_heads * half) {
    const int i = (int)(e % half);
    const size_t th = e / half; /* token * n_heads + head */
    const int t = (int)(th / n_heads);
    const float ang = (float)pos[t] * inv_freq[i], cs = cosf(ang), sn = sign * sinf(ang);
    float *v = x + th * head_dim;
    const int i0 = adjacent ? 2 * i : i, i1 = adjacent ? 2 * i + 1 : i + half;
    const float x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * cs - x1 * sn;
    v[i1] = x1 * cs + x0 * sn;
  }
}

static void rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
                 bool adjacent, float sign) {
  const size_t n = (size_t)b->n * n_heads * (head_dim / 2);
  if (n > 0)
    RG_LAUNCH(rope_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), x->data, b->pos, b->n, n_heads, head_dim,
              inv_freq->data, adjacent, sign);
  gpu_check(be, "rope");
}

void gpu_rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
              bool adjacent) {
  rope(be, x, b, n_heads, head_dim, inv_freq, adjacent, 1.0f);
}

/* a rotation's transpose is the rotation by the opposite angle */
void gpu_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                       const rg_buf *inv_freq, bool adjacent) {
  rope(be, dx, b, n_heads, head_dim, inv_freq, adjacent, -1.0f);
}

/* ---------------------------------------------------------------- elementwise */

__global__ static void swiglu_kernel(float *o, const float *g, const float *u, size_t n) {
  GRID_STRIDE(i, n) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void gpu_swiglu(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n) {
  if (n > 0) RG_LAUNCH(swiglu_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), out->data, gate->data, up->data, n);
  gpu_check(be, "swiglu");
}

/* out = silu(g) u: dout/du = silu(g), dout/dg = u s (1 + g (1 - s)). */
__global__ static void swiglu_backward_kernel(float *dg, float *du, const float *dy, const float *g, const float *u,
                                              size_t n) {
  GRID_STRIDE(i, n) {
    const float s = 1.0f / (1.0f + expf(-g[i]));
    dg[i] += dy[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] += dy[i] * g[i] * s;
  }
}

void gpu_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                         const rg_buf *up, size_t n) {
  if (n > 0)
    RG_LAUNCH(swiglu_backward_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), dgate->data, dup->data, dy->data,
              gate->data, up->data, n);
  gpu_check(be, "swiglu backward");
}

__global__ static void add_kernel(float *y, const float *a, const float *b, size_t n) { GRID_STRIDE(i, n) y[i] = a[i] + b[i]; }

void gpu_add(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n) {
  if (n > 0) RG_LAUNCH(add_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), y->data, a->data, b->data, n);
  gpu_check(be, "add");
}

__global__ static void scale_kernel(float *x, size_t n, float c) { GRID_STRIDE(i, n) x[i] *= c; }

void gpu_scale(rg_backend *be, rg_buf *x, size_t n, float c) {
  if (n > 0) RG_LAUNCH(scale_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), x->data, n, c);
  gpu_check(be, "scale");
}

/* One block per row: x -= (x . u) u. */
__global__ static void ablate_kernel(float *x, const float *u, int d) {
  __shared__ double sh[GPU_THREADS];
  float *xr = x + (size_t)blockIdx.x * d;
  double dot = 0;
  for (int i = threadIdx.x; i < d; i += blockDim.x) dot += (double)xr[i] * u[i];
  const float p = (float)gpu_block_sum(dot, sh);
  for (int i = threadIdx.x; i < d; i += blockDim.x) xr[i] -= p * u[i];
}

void gpu_ablate(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit) {
  if (rows > 0) RG_LAUNCH(ablate_kernel, dim3((unsigned)rows), GPU_THREADS, 0, stream(be), x->data, unit->data, d);
  gpu_check(be, "ablate");
}

__global__ static void add_scaled_kernel(float *x, size_t n, int d, const float *v, float c) {
  GRID_STRIDE(i, n) x[i] += c * v[i % d];
}

void gpu_add_scaled(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c) {
  const size_t n = (size_t)rows * d;
  if (n > 0) RG_LAUNCH(add_scaled_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), x->data, n, d, v->data, c);
  gpu_check(be, "add scaled");
}

/* ---------------------------------------------------------------- KV cache */

__global__ static void kv_store_kernel(float *kc, float *vc, const float *k, const float *v, const int *seq,
                                       const int *pos, int n, int kvd, int max_ctx) {
  GRID_STRIDE(e, (size_t)n * kvd) {
    const int t = (int)(e / kvd), i = (int)(e % kvd);
    const size_t slot = ((size_t)seq[t] * max_ctx + pos[t]) * kvd + i;
    kc[slot] = k[e];
    vc[slot] = v[e];
  }
}

void gpu_kv_store(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                  const rg_attn_desc *a) {
  const rg_batch *b = a->batch;
  const int kvd = a->n_kv_heads * a->head_dim;
  if (b->n > 0)
    RG_LAUNCH(kv_store_kernel, gpu_blocks((size_t)b->n * kvd), GPU_THREADS, 0, stream(be), k_cache->data,
              v_cache->data, k->data, v->data, b->seq, b->pos, b->n, kvd, a->max_ctx);
  gpu_check(be, "kv store");
}

/* dk[t] += dk_cache[slot of t] (the same for v), then the slot is zeroed. */
__global__ static void kv_store_backward_kernel(float *dk, float *dv, float *dkc, float *dvc, const int *seq,
                                                const int *pos, int n, int kvd, int max_ctx) {
  GRID_STRIDE(e, (size_t)n * kvd) {
    const int t = (int)(e / kvd), i = (int)(e % kvd);
    const size_t slot = ((size_t)seq[t] * max_ctx + pos[t]) * kvd + i;
    dk[e] += dkc[slot];
    dv[e] += dvc[slot];
    dkc[slot] = 0;
    dvc[slot] = 0;
  }
}

void gpu_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                           const rg_attn_desc *a) {
  const rg_batch *b = a->batch;
  const int kvd = a->n_kv_heads * a->head_dim;
  if (b->n > 0)
    RG_LAUNCH(kv_store_backward_kernel, gpu_blocks((size_t)b->n * kvd), GPU_THREADS, 0, stream(be), dk->data,
              dv->data, dk_cache->data, dv_cache->data, b->seq, b->pos, b->n, kvd, a->max_ctx);
  gpu_check(be, "kv store backward");
}

/* ---------------------------------------------------------------- losses */

/* The row's maximum, and the sum of exp(z - max) over v != skip (-1: all),
 * every thread getting both. */
__device__ static void row_exp_sum(const float *z, int vocab, int skip, float *m_out, double *sum_out, float *shf,
                                   double *shd) {
  float m = -INFINITY;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, z[v]);
  m = gpu_block_max(m, shf);
  double sum = 0;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x)
    if (v != skip) sum += expf(z[v] - m);
  *sum_out = gpu_block_sum(sum, shd);
  *m_out = m;
}

__global__ static void cross_entropy_kernel(float *losses, float *dlogits, const float *logits, const int32_t *targets,
                                            const float *scale, int vocab) {
  __shared__ float shf[GPU_THREADS];
  __shared__ double shd[GPU_THREADS];
  const int r = blockIdx.x, y = targets[r];
  const float *z = logits + (size_t)r * vocab;
  float m;
  double sum;
  row_exp_sum(z, vocab, -1, &m, &sum, shf, shd);
  if (threadIdx.x == 0) losses[r] = (float)(m + log(sum) - z[y]);
  if (!dlogits || scale[r] == 0) return;
  float *g = dlogits + (size_t)r * vocab;
  const float c = (float)(scale[r] / sum); /* softmax = exp(z - m) / sum */
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) g[v] += c * expf(z[v] - m);
  __syncthreads();
  if (threadIdx.x == 0) g[y] -= scale[r];
}

/* backend/cpu/grad.c's cpu_unlikelihood gives the formulas. */
__global__ static void unlikelihood_kernel(float *losses, float *dlogits, const float *logits, const int32_t *targets,
                                           const float *scale, int vocab, float log_p_min) {
  __shared__ float shf[GPU_THREADS];
  __shared__ double shd[GPU_THREADS];
  const int r = blockIdx.x, y = targets[r];
  const float *z = logits + (size_t)r * vocab;
  float m;
  double rest;
  row_exp_sum(z, vocab, y, &m, &rest, shf, shd);
  const double e = exp((double)z[y] - m), sum = rest + e;
  const bool kept = (double)z[y] - m - log(sum) >= log_p_min;
  if (threadIdx.x == 0) losses[r] = kept ? (float)-log(rest / sum) : 0.0f;
  if (!dlogits || !kept || scale[r] == 0) return;
  float *g = dlogits + (size_t)r * vocab;
  const float c = (float)(scale[r] * e / (sum * rest));
  for (int v = threadIdx.x; v < vocab; v += blockDim.x)
    if (v != y) g[v] -= c * expf(z[v] - m);
  if (threadIdx.x == 0) g[y] += (float)(scale[r] * e / sum);
}

/* The targets and scales of a loss in the scratch: *t and *s (NULL when
 * SCALE is). 0, or -1 with the failure recorded. */
static int loss_inputs(rg_backend *be, const int32_t *targets, const float *scale, int rows, int32_t **t, float **s) {
  char *p = (char *)gpu_scratch(be, (size_t)rows * (sizeof **t + sizeof **s));
  if (!p) return -1;
  *t = (int32_t *)p;
  *s = scale ? (float *)(p + (size_t)rows * sizeof **t) : NULL;
  gpu_upload(be, *t, targets, (size_t)rows * sizeof **t);
  if (scale) gpu_upload(be, *s, scale, (size_t)rows * sizeof **s);
  return gpu_check(be, "loss inputs");
}

void gpu_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab) {
  int32_t *t;
  float *s;
  if (rows > 0 && loss_inputs(be, targets, scale, rows, &t, &s) == 0)
    RG_LAUNCH(cross_entropy_kernel, dim3((unsigned)rows), GPU_THREADS, 0, stream(be), losses->data,
              dlogits ? dlogits->data : NULL, logits->data, t, s, vocab);
  gpu_check(be, "cross entropy");
}

void gpu_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                      const float *scale, int rows, int vocab, float log_p_min) {
  int32_t *t;
  float *s;
  if (rows > 0 && loss_inputs(be, targets, scale, rows, &t, &s) == 0)
    RG_LAUNCH(unlikelihood_kernel, dim3((unsigned)rows), GPU_THREADS, 0, stream(be), losses->data,
              dlogits ? dlogits->data : NULL, logits->data, t, s, vocab, log_p_min);
  gpu_check(be, "unlikelihood");
}

/* ---------------------------------------------------------------- training */

enum { SUM_BLOCKS = 256 }; /* fixed, so the partial sums and their order do not depend on the device */

__global__ static void sum_squares_kernel(double *partial, const float *x, size_t n) {
  __shared__ double sh[GPU_THREADS];
  double ss = 0;
  GRID_STRIDE(i, n) ss += (double)x[i] * x[i];
  ss = gpu_block_sum(ss, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = ss;
}

int gpu_sum_squares(rg_backend *be, const rg_buf *b, double *out) {
  double *partial = (double *)gpu_scratch(be, SUM_BLOCKS * sizeof *partial), host[SUM_BLOCKS];
  *out = 0;
  if (partial) {
    RG_LAUNCH(sum_squares_kernel, dim3(SUM_BLOCKS), GPU_THREADS, 0, stream(be), partial, b->data, b->n);
    if (gpu_check(be, "sum of squares") == 0)
      gpu_ok(be, cudaMemcpyAsync(host, partial, sizeof host, cudaMemcpyDeviceToHost, stream(be)), "sum of squares");
  }
  const int rc = rg_backend_status(be);
  if (rc == 0)
    for (int i = 0; i < SUM_BLOCKS; i++) *out += host[i];
  return rc;
}

/* cpu_adamw's formula, elementwise. */
__global__ static void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float scale, float b1,
                                    float b2, float one_b1, float one_b2, float step, float decay, float sbc2, float eps) {
  GRID_STRIDE(k, n) {
    const float gk = g[k] * scale;
    m[k] = b1 * m[k] + one_b1 * gk;
    v[k] = b2 * v[k] + one_b2 * gk * gk;
    p[k] = p[k] * decay - step * m[k] / (sqrtf(v[k]) / sbc2 + eps);
  }
}

void gpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st) {
  const size_t whole = (size_t)param->rows * (size_t)param->cols, n = st->count ? st->count : whole;
  if (!param->f32 || st->offset > whole || n > whole - st->offset || grad->n < n || m->n < n || v->n < n) {
    gpu_fail(be, "adamw: %s is not a float32 weight of %zu floats with gradient and moments",
             param->t->name ? param->t->name : "(tensor)", st->offset + n);
    return;
  }
  const double bc1 = 1 - pow(st->beta1, (double)st->step), bc2 = 1 - pow(st->beta2, (double)st->step);
  RG_LAUNCH(adamw_kernel, gpu_blocks(n), GPU_THREADS, 0, stream(be), param->f32 + st->offset, grad->data, m->data, v->data, n,
            st->grad_scale, (float)st->beta1, (float)st->beta2, (float)(1 - st->beta1), (float)(1 - st->beta2),
            (float)(st->lr / bc1), (float)(1 - st->lr * st->weight_decay), (float)sqrt(bc2), (float)st->eps);
  gpu_check(be, "adamw");
}
