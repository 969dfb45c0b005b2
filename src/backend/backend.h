/* backend.h: the compute operations a Llama-family forward pass needs.
 *
 * A backend is a table of operations on backend-owned float32 buffers (in
 * the spirit of ggml's backend interface). forward.c, backward.c and the
 * optimizer call only these operations, so a CUDA or HIP backend fills the
 * same table without them changing. Backends are made by name
 * (rg_backend_new): "cpu" (backend/cpu/cpu.c: OpenBLAS sgemm + OpenMP) and,
 * in a GPU build, "cuda" or "hip" (backend/gpu/gpu.cu: CUDA and HIP from one
 * source).
 *
 * Conventions:
 *  - Activations are row-major float32 matrices [rows, width] in rg_buf
 *    buffers; an "offset" is counted in floats from the buffer start.
 *  - The per-token metadata of a batch (token id, sequence id, position)
 *    lives in an rg_batch in backend memory, set once per forward pass
 *    (rg_batch_set) and read by every operation of that pass; the RoPE
 *    frequencies are a buffer. Host int arrays are passed only to the few
 *    once-per-pass operations (gathering rows, the loss targets).
 *  - Weights are rg_tensor views (any dtype rg_dequantize_row supports) that
 *    the backend turns into an rg_bweight once (rg_backend_weight), either
 *    as float32 in backend memory or in the file dtype, dequantized on use.
 *    A weight can later be turned into a writable float32 copy in place
 *    (rg_bweight_make_f32) for training: everything that holds the
 *    rg_bweight pointer sees the new values.
 *  - In-place use (y == x) is allowed for the elementwise operations
 *    (rmsnorm, add, scale, swiglu, ablate, add_scaled) and for rope.
 *  - Errors: operations do not return a status, because a device backend
 *    queues them and learns of a failure later (as CUDA reports a kernel's
 *    error at the next synchronization). A failing operation records the
 *    first error on the backend; rg_backend_status returns it (and clears
 *    it), and every download returns it too. Callers validate ids and
 *    sizes; what can still fail is memory an operation takes for itself
 *    (the CPU backend's attention grows a scratch for long sequences) and,
 *    on a device, the device.
 *
 * Threads: each backend has its own thread count (rg_backend_opts.threads);
 * two backends in one process do not change each other's.
 *
 * Ownership: buffers, batches and weights belong to their backend; free them
 * before rg_backend_free. None of these objects is thread-safe; use one
 * backend from one thread at a time (it parallelizes internally).
 */
#ifndef RG_BACKEND_H
#define RG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

typedef struct rg_backend rg_backend;
typedef struct rg_buf rg_buf;     /* a float32 buffer in backend memory */
typedef struct rg_batch rg_batch; /* a batch's token metadata in backend memory */
/* A weight prepared for the backend; its struct is private to the backend
 * that made it. */
typedef struct rg_bweight rg_bweight;

/* How a backend keeps a non-f32 weight. */
typedef enum {
  RG_FORM_F32 = 0, /* a float32 copy in backend memory */
  RG_FORM_FILE,    /* the file dtype, dequantized in tiles by each matmul */
  RG_FORM_FILE_Q8  /* RG_FORM_FILE, but every product quantizes the activations to
                    * 8 bits per block of 32 and uses integer dot products where
                    * the backend has them for the dtype (the CPU's:
                    * backend/cpu/q8/q8.c). Faster, and off the float32 result by the
                    * activations' rounding. */
} rg_weight_form;

typedef struct {
  const char *name; /* "cpu", a GPU backend's name; NULL: rg_backend_default_name() ($REFGEO_DEVICE, else "cpu") */
  int threads;      /* <= 0: all online CPUs */
  /* Commit memory when it is allocated (the CPU backend writes every new
   * buffer's pages): the process then holds from the start what it will
   * hold at its peak, which the trainer's memory plan reports, and a run
   * that does not fit fails at its start, not hours in. Off: pages are
   * taken when first written (a session sized for its longest batch holds
   * what its batches touched). */
  bool commit;
} rg_backend_opts;

/* The attention problem of one ragged batch: token t of the batch belongs
 * to sequence seq[t] at position pos[t]; its keys/values have already been
 * stored in the cache (rg_backend_kv_store), and it attends to cache
 * positions j <= pos[t] of its own sequence (and j > pos[t] - window when
 * window > 0). */
typedef struct {
  const rg_batch *batch;
  int n_heads, n_kv_heads, head_dim;
  int window;  /* sliding window length, 0 = full causal */
  int max_ctx; /* cache slots per sequence */
} rg_attn_desc;

/* One AdamW update (adv_ft/adamw.h gives the recipe and its defaults). */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  long step;        /* 1, 2, ...: the bias corrections use it */
  float grad_scale; /* the clipping coefficient the gradient is scaled by */
  /* Elements [offset, offset + count) of the weight only (count 0: all of
   * it), with grad, m and v holding those elements from their index 0: a
   * ZeRO shard's piece of a parameter (adv_ft/zero.h). */
  size_t offset, count;
} rg_adamw_step;

/* ---------------------------------------------------------------- the table
 * Every backend fills one rg_backend_iface; rg_backend is the common header
 * of its context struct. Callers use the rg_* wrappers below, never iface. */

struct rg_buf {
  size_t n;    /* floats */
  float *data; /* host pointer (CPU) or device pointer */
};

struct rg_batch {
  int n, cap;   /* tokens set / room for */
  int32_t *ids; /* [cap] token ids, in backend memory */
  int *seq;     /* [cap] sequence ids */
  int *pos;     /* [cap] positions within the sequences */
};

typedef struct rg_backend_iface {
  const char *name;
  void (*free)(rg_backend *be);
  int (*status)(rg_backend *be);
  rg_buf *(*buf_new)(rg_backend *be, size_t n);
  void (*buf_free)(rg_backend *be, rg_buf *b);
  void (*buf_upload)(rg_backend *be, rg_buf *dst, size_t offset, const float *src, size_t n);
  int (*buf_download)(rg_backend *be, const rg_buf *src, size_t offset, float *dst, size_t n);
  rg_batch *(*batch_new)(rg_backend *be, int cap);
  void (*batch_free)(rg_backend *be, rg_batch *b);
  void (*batch_set)(rg_backend *be, rg_batch *b, const int32_t *ids, const int *seq, const int *pos, int n);
  void (*gather_rows)(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n, int width);
  void (*buf_copy)(rg_backend *be, rg_buf *dst, size_t dst_offset, const rg_buf *src, size_t src_offset, size_t n);
  void (*buf_copy_rows)(rg_backend *be, rg_buf *dst, size_t dst_offset, size_t dst_stride, const rg_buf *src,
                        size_t src_offset, size_t src_stride, int rows, size_t width);
  rg_bweight *(*weight_new)(rg_backend *be, const rg_tensor *t, rg_weight_form form);
  void (*weight_free)(rg_backend *be, rg_bweight *w);
  size_t (*weight_bytes)(const rg_bweight *w);
  int (*weight_make_f32)(rg_backend *be, rg_bweight *w);
  int (*weight_download)(rg_backend *be, const rg_bweight *w, float *dst);
  int (*weight_upload)(rg_backend *be, rg_bweight *w, const float *src);
  void (*matmul)(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w, const rg_bweight *bias);
  void (*matmul_add)(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w);
  void (*embed)(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b);
  void (*rmsnorm)(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d, float eps);
  void (*rope)(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
               bool adjacent);
  void (*kv_store)(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                   const rg_attn_desc *a);
  void (*attention)(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                    const rg_buf *v_cache, const rg_attn_desc *a);
  void (*swiglu)(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n);
  void (*add)(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n);
  void (*scale)(rg_backend *be, rg_buf *x, size_t n, float c);
  void (*ablate)(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit);
  void (*add_scaled)(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c);
  /* gradients */
  void (*buf_zero)(rg_backend *be, rg_buf *b, size_t offset, size_t n);
  void (*gather_rows_backward)(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width);
  void (*matmul_backward)(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                          int M, const rg_bweight *w);
  void (*embed_backward)(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d);
  void (*rmsnorm_backward)(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                           const rg_bweight *w, int rows, int d, float eps);
  void (*rope_backward)(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                        const rg_buf *inv_freq, bool adjacent);
  void (*swiglu_backward)(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                          const rg_buf *up, size_t n);
  void (*attention_backward)(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                             const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                             const rg_buf *v_cache, const rg_attn_desc *a);
  void (*kv_store_backward)(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                            const rg_attn_desc *a);
  void (*cross_entropy)(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                        const float *scale, int rows, int vocab);
  void (*unlikelihood)(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab, float log_p_min);
  /* training */
  int (*sum_squares)(rg_backend *be, const rg_buf *b, double *out);
  void (*adamw)(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st);
  int (*weight_f32_view)(rg_backend *be, rg_bweight *w, rg_buf *view);
} rg_backend_iface;

struct rg_backend {
  const rg_backend_iface *iface;
  int threads;
};

/* The backend named o->name ("cpu", a GPU backend's name, or NULL for
 * rg_backend_default_name()). NULL with the error set (an unknown name
 * lists the known ones, no such device, out of memory). */
rg_backend *rg_backend_new(const rg_backend_opts *o);
/* The instruction set of the CPU backend's 8-bit products (RG_FORM_FILE_Q8,
 * --fast-decode) on this CPU under REFGEO_MAX_ISA: "avx512" or "avx2"
 * into *NAME, or NULL where they take the float32 path. 0, or -1 with the
 * error set for an unknown REFGEO_MAX_ISA. */
int rg_cpu_fast_decode_isa(const char **name);
/* "cuda" or "hip": the GPU backend of this build, or NULL. */
const char *rg_gpu_backend_name(void);
/* The GPU devices this process sees (0 without a GPU build). */
int rg_gpu_device_count(void);
/* Device I's name (into NAME) and memory in bytes; 0, or -1 with the error set. */
int rg_gpu_device_info(int i, char *name, size_t name_len, size_t *bytes);
/* The backend rg_backend_new makes when opts->name is NULL: REFGEO_DEVICE
 * from the environment (what the CLI's --device sets), else "cpu". */
const char *rg_backend_default_name(void);
/* 0 when NAME is a device of this build ("cpu", "cuda", "cuda:1", "hip",
 * ...), else -1 with an error that lists them. Whether the device is
 * present is known only when a backend starts on it. */
int rg_backend_check_device(const char *name);

static inline void rg_backend_free(rg_backend *be) {
  if (be) be->iface->free(be);
}
static inline const char *rg_backend_name(const rg_backend *be) { return be->iface->name; }
static inline int rg_backend_threads(const rg_backend *be) { return be->threads; }
/* 0, or -1 with the error set: the first failure of an operation since the
 * last call (which clears it). */
static inline int rg_backend_status(rg_backend *be) { return be->iface->status(be); }

/* ---------------------------------------------------------------- buffers */

/* A zero-filled buffer of N floats; NULL with the error set. */
static inline rg_buf *rg_buf_new(rg_backend *be, size_t n) { return be->iface->buf_new(be, n); }
static inline void rg_buf_free(rg_backend *be, rg_buf *b) {
  if (b) be->iface->buf_free(be, b);
}
static inline void rg_buf_upload(rg_backend *be, rg_buf *dst, size_t offset, const float *src, size_t n) {
  be->iface->buf_upload(be, dst, offset, src, n);
}
/* Waits for the queued operations and copies n floats out. Returns 0, or -1
 * with the error set: an earlier operation failed (rg_backend_status). */
static inline int rg_buf_download(rg_backend *be, const rg_buf *src, size_t offset, float *dst, size_t n) {
  return be->iface->buf_download(be, src, offset, dst, n);
}
/* dst[dst_offset + i] = src[src_offset + i] for i < n (the ranges do not
 * overlap): a sequence's KV cache forked into another (rg_session_fork). */
static inline void rg_buf_copy(rg_backend *be, rg_buf *dst, size_t dst_offset, const rg_buf *src, size_t src_offset,
                               size_t n) {
  be->iface->buf_copy(be, dst, dst_offset, src, src_offset, n);
}
/* A strided block copy: for i < rows, the WIDTH floats at src_offset + i *
 * src_stride go to dst_offset + i * dst_stride (no overlap): a column block
 * of a row-major matrix in or out of a packed buffer (sequence
 * parallelism's head blocks, sp_attention.c). */
static inline void rg_buf_copy_rows(rg_backend *be, rg_buf *dst, size_t dst_offset, size_t dst_stride,
                                    const rg_buf *src, size_t src_offset, size_t src_stride, int rows, size_t width) {
  be->iface->buf_copy_rows(be, dst, dst_offset, dst_stride, src, src_offset, src_stride, rows, width);
}
/* Copies rows: dst[i, :] = src[rows[i], :] (width floats each). */
static inline void rg_buf_gather_rows(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n,
                                      int width) {
  be->iface->gather_rows(be, dst, src, rows, n, width);
}

/* Room for the metadata of batches of up to CAP tokens; NULL with the error set. */
static inline rg_batch *rg_batch_new(rg_backend *be, int cap) { return be->iface->batch_new(be, cap); }
static inline void rg_batch_free(rg_backend *be, rg_batch *b) {
  if (b) be->iface->batch_free(be, b);
}
/* Copies a batch's metadata (n <= cap tokens; ids may be NULL when no
 * operation of the pass reads them). */
static inline void rg_batch_set(rg_backend *be, rg_batch *b, const int32_t *ids, const int *seq, const int *pos,
                                int n) {
  be->iface->batch_set(be, b, ids, seq, pos, n);
}

/* ---------------------------------------------------------------- weights */

/* Prepares tensor T (a vector, or a [in, out] matrix in ggml order) for use
 * by the backend in FORM (vectors are always float32). T's data must stay
 * valid while the weight lives. NULL with the error set (unsupported dtype,
 * size mismatch, out of memory). */
static inline rg_bweight *rg_backend_weight(rg_backend *be, const rg_tensor *t, rg_weight_form form) {
  return be->iface->weight_new(be, t, form);
}
static inline void rg_bweight_free(rg_backend *be, rg_bweight *w) {
  if (w) be->iface->weight_free(be, w);
}
/* Bytes of backend memory held by W (0 when it only views the file). */
static inline size_t rg_bweight_bytes(rg_backend *be, const rg_bweight *w) { return be->iface->weight_bytes(w); }
/* Makes W a writable float32 copy in backend memory, in place (a no-op when
 * it already is one). Returns 0, or -1 with the error set. */
static inline int rg_bweight_make_f32(rg_backend *be, rg_bweight *w) { return be->iface->weight_make_f32(be, w); }
/* W's values as float32, rows * cols floats in the tensor's element order.
 * Returns 0 or -1 with the error set. */
static inline int rg_bweight_download(rg_backend *be, const rg_bweight *w, float *dst) {
  return be->iface->weight_download(be, w, dst);
}
/* Sets a float32 weight (rg_bweight_make_f32) to src[rows * cols], in the
 * tensor's element order (what resuming a run needs). Returns 0, or -1 with
 * the error set (W not float32). */
static inline int rg_bweight_upload(rg_backend *be, rg_bweight *w, const float *src) {
  return be->iface->weight_upload(be, w, src);
}

/* ---------------------------------------------------------------- operations */

/* y[M, N] = x[M, K] . W^T (+ bias[N]); W is an [N rows of K] weight. */
static inline void rg_op_matmul(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                                const rg_bweight *bias) {
  be->iface->matmul(be, y, x, M, w, bias);
}
/* y[M, N] += x[M, K] . W^T: a second product added to an output (a LoRA
 * adapter's, weights.h). */
static inline void rg_op_matmul_add(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w) {
  be->iface->matmul_add(be, y, x, M, w);
}
/* out[i, :] = row ids[i] of the embedding table W ([vocab rows of d]) for
 * the batch's tokens; ids must be in range (the caller validates them). */
static inline void rg_op_embed(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b) {
  be->iface->embed(be, out, w, b);
}
/* y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * w  (Llama RMSNorm). */
static inline void rg_op_rmsnorm(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d,
                                 float eps) {
  be->iface->rmsnorm(be, y, x, w, rows, d, eps);
}
/* Rotary embedding in place on x[b->n, n_heads * head_dim]; token t is at
 * position b->pos[t]; inv_freq[head_dim/2] are the per-pair frequencies
 * (after any scaling); the angle is (float)pos * inv_freq[i] as in
 * transformers. adjacent: rotate (x[2i], x[2i+1]) (GGUF llama); otherwise
 * HF rotate-half (x[i], x[i + head_dim/2]). head_dim <= RG_MAX_HEAD_DIM. */
enum { RG_MAX_HEAD_DIM = 512 };
static inline void rg_op_rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim,
                              const rg_buf *inv_freq, bool adjacent) {
  be->iface->rope(be, x, b, n_heads, head_dim, inv_freq, adjacent);
}
/* Writes k/v rows [n_tokens, n_kv_heads*head_dim] into one layer's caches
 * ([max_seqs, max_ctx, n_kv_heads*head_dim]) at (seq[t], pos[t]). */
static inline void rg_op_kv_store(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                                  const rg_attn_desc *a) {
  be->iface->kv_store(be, k_cache, v_cache, k, v, a);
}
/* out[t, h*hd ...] = softmax(q_h . K^T / sqrt(hd)) V over the masked cache
 * rows of token t's sequence; query head h uses kv head h / (n_heads /
 * n_kv_heads) (GQA). lse (NULL: not wanted) [n_tokens, n_heads] gets each
 * query's log-sum-exp of its visible scores, what the backward needs: the
 * attention never holds a matrix of all queries by all keys, and the
 * backward recomputes the probabilities from lse, tile by tile. */
static inline void rg_op_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                                   const rg_buf *v_cache, const rg_attn_desc *a) {
  be->iface->attention(be, out, lse, q, k_cache, v_cache, a);
}
/* out = silu(gate) * up, n floats. */
static inline void rg_op_swiglu(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n) {
  be->iface->swiglu(be, out, gate, up, n);
}
/* y = a + b, n floats. */
static inline void rg_op_add(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n) {
  be->iface->add(be, y, a, b, n);
}
/* x *= c, n floats. */
static inline void rg_op_scale(rg_backend *be, rg_buf *x, size_t n, float c) { be->iface->scale(be, x, n, c); }
/* Directional ablation of every row: x[i] -= (x[i] . u) u, u = unit[d]. */
static inline void rg_op_ablate(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit) {
  be->iface->ablate(be, x, rows, d, unit);
}
/* x[i] += c * v for every row, v[d]. */
static inline void rg_op_add_scaled(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c) {
  be->iface->add_scaled(be, x, rows, d, v, c);
}

/* ---------------------------------------------------------------- gradients
 * The backward of each forward operation, for training and for gradients
 * with respect to the input (GCG). Every one ADDS into its gradient outputs
 * (dx += ...), as llm.c does, so that branches (q, k and v all read xn) and
 * micro-batches accumulate; zero the buffers first with rg_buf_zero. A
 * weight gradient is a float32 buffer of the weight's [rows, cols]; NULL
 * skips it (a frozen weight). The backward of add is the identity, that of
 * ablate is ablate (the projection is symmetric) and that of add_scaled the
 * identity, so they need no operation of their own. */

/* b[offset .. offset+n) = 0. */
static inline void rg_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n) {
  be->iface->buf_zero(be, b, offset, n);
}
/* For rg_buf_gather_rows: dsrc[rows[i], :] += ddst[i, :]. */
static inline void rg_op_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows,
                                              int n, int width) {
  be->iface->gather_rows_backward(be, dsrc, ddst, rows, n, width);
}
/* For y = x . W^T + bias (rg_op_matmul): dx[M, K] += dy . W, dw[N, K] +=
 * dy^T . x, dbias[N] += column sums of dy. dx, dw, dbias may each be NULL. */
static inline void rg_op_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy,
                                         const rg_buf *x, int M, const rg_bweight *w) {
  be->iface->matmul_backward(be, dx, dw, dbias, dy, x, M, w);
}
/* For rg_op_embed: dw[ids[i], :] += dy[i, :] (dw is [vocab, d]). */
static inline void rg_op_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d) {
  be->iface->embed_backward(be, dw, dy, b, d);
}
/* For rg_op_rmsnorm: dx += d y / d x applied to dy, dw[d] += sum over rows of
 * dy * x * rsqrt(mean(x^2) + eps). dx must not alias dy or x; dw may be NULL. */
static inline void rg_op_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                                          const rg_bweight *w, int rows, int d, float eps) {
  be->iface->rmsnorm_backward(be, dx, dw, dy, x, w, rows, d, eps);
}
/* For rg_op_rope, in place: dx becomes the gradient before the rotation
 * (each pair rotated back by the same angle). A non-accumulating gradient
 * operation. */
static inline void rg_op_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                                       const rg_buf *inv_freq, bool adjacent) {
  be->iface->rope_backward(be, dx, b, n_heads, head_dim, inv_freq, adjacent);
}
/* For out = silu(gate) * up: dgate += dy * up * silu'(gate), dup += dy *
 * silu(gate). */
static inline void rg_op_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy,
                                         const rg_buf *gate, const rg_buf *up, size_t n) {
  be->iface->swiglu_backward(be, dgate, dup, dy, gate, up, n);
}
/* For rg_op_attention over the batch's tokens, given its q, out and lse
 * (the same cache and batch): dq[n_tokens, n_heads*hd] +=, and the
 * cache-shaped dk_cache / dv_cache += at every cache row the batch attended
 * to (rows cached by earlier calls get gradients too, but nothing carries
 * them further: train on whole sequences in one batch). */
static inline void rg_op_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache,
                                            const rg_buf *dy, const rg_buf *q, const rg_buf *out, const rg_buf *lse,
                                            const rg_buf *k_cache, const rg_buf *v_cache, const rg_attn_desc *a) {
  be->iface->attention_backward(be, dq, dk_cache, dv_cache, dy, q, out, lse, k_cache, v_cache, a);
}
/* For rg_op_kv_store: dk[t] += dk_cache[slot of t], the same for v, and the
 * slots are zeroed after they are read. A batch of whole sequences attends
 * only to its own slots, so the cache-shaped gradients are zero again after
 * this call: zero them once, not per layer (at 7B with 8 x 2048 tokens that
 * saves 17 GB of memset per backward). */
static inline void rg_op_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache,
                                           rg_buf *dv_cache, const rg_attn_desc *a) {
  be->iface->kv_store_backward(be, dk, dv, dk_cache, dv_cache, a);
}
/* Cross entropy of logits[rows, vocab] against targets[rows] (each in
 * [0, vocab)): losses[r] = logsumexp(logits[r]) - logits[r, targets[r]]
 * (overwritten), and, when dlogits is not NULL, dlogits[r] += scale[r] *
 * (softmax(logits[r]) - onehot(targets[r])), the gradient of
 * sum_r scale[r] * losses[r] (scale may be NULL without dlogits). */
static inline void rg_op_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits,
                                       const int32_t *targets, const float *scale, int rows, int vocab) {
  be->iface->cross_entropy(be, losses, dlogits, logits, targets, scale, rows, vocab);
}
/* Unlikelihood loss (Welleck et al. 2019, "Neural text generation with
 * unlikelihood training"), the away loss of R2D2: with p = softmax(logits[r])
 * [targets[r]], losses[r] = -log(1 - p) when log p >= log_p_min and 0 when
 * log p < log_p_min (a target the model already finds unlikely gets no push;
 * HarmBench 8e1604d adversarial_training/alignment-handbook/scripts/
 * adv_training_utils.py:477-483). Overwrites losses; when dlogits is not
 * NULL, adds scale[r] * d losses[r] / d logits[r]:
 *   +p at the target, -softmax(logits[r])_v * p / (1 - p) elsewhere,
 * and nothing for a dropped row (the gradient of the constant 0). */
static inline void rg_op_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits,
                                      const int32_t *targets, const float *scale, int rows, int vocab,
                                      float log_p_min) {
  be->iface->unlikelihood(be, losses, dlogits, logits, targets, scale, rows, vocab, log_p_min);
}

/* ---------------------------------------------------------------- training */

/* *out = sum of b's squared entries, accumulated in double. Waits for the
 * queued operations; returns 0 or -1 with the error set. */
static inline int rg_op_sum_squares(rg_backend *be, const rg_buf *b, double *out) {
  return be->iface->sum_squares(be, b, out);
}
/* *VIEW = a float32 weight's (rg_bweight_make_f32) values as a buffer of
 * rows * cols floats that the buffer operations (rg_buf_copy) and the
 * collectives (dist/comm.h) read and write in place: what ZeRO's
 * all-gather of the updated shards writes into. The view is not a buffer
 * of its own (never rg_buf_free it). 0, or -1 with the error set (not a
 * float32 weight). */
static inline int rg_bweight_f32_view(rg_backend *be, rg_bweight *w, rg_buf *view) {
  return be->iface->weight_f32_view(be, w, view);
}
/* One AdamW step on a float32 weight (rg_bweight_make_f32) with its gradient
 * and moment buffers (all rows * cols floats), elementwise, as
 * torch.optim.AdamW (foreach=False) computes it:
 *   g = grad * grad_scale;  p -= lr * wd * p;  m = b1 m + (1-b1) g;
 *   v = b2 v + (1-b2) g^2;  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * With st->count > 0, on elements [st->offset, st->offset + st->count) of
 * the weight, grad, m and v holding st->count floats. */
static inline void rg_op_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v,
                               const rg_adamw_step *st) {
  be->iface->adamw(be, param, grad, m, v, st);
}

#endif
