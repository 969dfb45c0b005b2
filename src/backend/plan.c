/* backend/plan.c: the counting backends of backend/plan.h. */
#include "backend/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h" /* the CPU backend's tile and panel scratch sizes */
#include "tensor/dtype.h"
#include "util/error.h"

typedef struct {
  rg_backend base;
  bool gpu;               /* the "plan-gpu" rule for weights */
  int tag;                /* what new allocations are counted under */
  size_t bytes[RG_PLAN_TAGS];
  size_t tile_floats;     /* the CPU rule's dequantization tile, per thread */
  int tile_tag;
  size_t panel_floats;    /* the CPU rule's transposed activations of panel products */
  int panel_tag;
} plan_backend;

/* A buffer: its size and the tag it is counted under; data stays NULL. */
typedef struct {
  rg_buf base;
  int tag;
} plan_buf;

typedef struct {
  rg_batch base;
  int tag;
} plan_batch;

/* A weight (rg_bweight is an opaque type to other backends' code: these
 * records are handed out cast to it). */
typedef struct {
  int64_t rows, cols;
  size_t bytes; /* what the rule says the backend holds */
  int tag;
} plan_weight;

static plan_backend *plan(rg_backend *be) { return (plan_backend *)be; }

static void count(rg_backend *be, int tag, size_t add, size_t sub) {
  plan(be)->bytes[tag] += add;
  plan(be)->bytes[tag] -= sub;
}

static void plan_free(rg_backend *be) { free(be); }
static int plan_status(rg_backend *be) { return 0; }

/* ---------------------------------------------------------------- buffers */

static rg_buf *plan_buf_new(rg_backend *be, size_t n) {
  plan_buf *b = calloc(1, sizeof *b);
  if (!b) {
    rg_error_set("plan backend: out of memory");
    return NULL;
  }
  b->base.n = n;
  b->tag = plan(be)->tag;
  count(be, b->tag, n * sizeof(float), 0);
  return &b->base;
}

static void plan_buf_free(rg_backend *be, rg_buf *b) {
  count(be, ((plan_buf *)b)->tag, 0, b->n * sizeof(float));
  free(b);
}

static void plan_buf_upload(rg_backend *be, rg_buf *dst, size_t offset, const float *src, size_t n) {}

static int plan_buf_download(rg_backend *be, const rg_buf *src, size_t offset, float *dst, size_t n) {
  memset(dst, 0, n * sizeof *dst);
  return 0;
}

/* The CPU backend's batch: ids, sequence ids and positions per token. */
static size_t batch_bytes(int cap) { return (size_t)(cap > 0 ? cap : 1) * (sizeof(int32_t) + 2 * sizeof(int)); }

static rg_batch *plan_batch_new(rg_backend *be, int cap) {
  plan_batch *b = calloc(1, sizeof *b);
  if (!b) {
    rg_error_set("plan backend: out of memory");
    return NULL;
  }
  b->base.cap = cap;
  b->tag = plan(be)->tag;
  count(be, b->tag, batch_bytes(cap), 0);
  return &b->base;
}

static void plan_batch_free(rg_backend *be, rg_batch *b) {
  count(be, ((plan_batch *)b)->tag, 0, batch_bytes(b->cap));
  free(b);
}

/* ---------------------------------------------------------------- weights */

/* The CPU rule grows the per-thread tile, and the panel products'
 * transposed activations, to what the CPU backend grows them to
 * (rg_cpu_scratch_for). */
static void grow_tile(rg_backend *be, int64_t cols) {
  plan_backend *p = plan(be);
  const rg_cpu_scratch need = rg_cpu_scratch_for(cols);
  const size_t xt = need.panel_floats;
  if (xt > p->panel_floats) {
    count(be, p->panel_floats ? p->panel_tag : p->tag, 0, p->panel_floats * sizeof(float));
    p->panel_floats = xt;
    p->panel_tag = p->tag;
    count(be, p->tag, xt * sizeof(float), 0);
  }
  if (p->tile_floats >= need.tile_floats) return;
  const size_t n = need.tile_floats, per = (size_t)be->threads * sizeof(float);
  count(be, p->tile_floats ? p->tile_tag : p->tag, 0, p->tile_floats * per);
  p->tile_floats = n;
  p->tile_tag = p->tag;
  count(be, p->tag, n * per, 0);
}

static rg_bweight *plan_weight_new(rg_backend *be, const rg_tensor *t, rg_weight_form form) {
  const rg_dtype_info *info = rg_dtype_get(t->type);
  const char *name = t->name ? t->name : "(tensor)";
  if (!info || !info->can_dequantize) {
    rg_error_set("%s: dtype %d cannot be used for compute", name, t->type);
    return NULL;
  }
  const int64_t cols = t->ne[0], rows = rg_tensor_nrows(t);
  const size_t row_bytes = rg_dtype_row_bytes(t->type, cols), f32 = (size_t)rows * (size_t)cols * sizeof(float);
  if (cols <= 0 || rows <= 0 || row_bytes == 0 || (size_t)rows > SIZE_MAX / row_bytes) {
    rg_error_set("%s: %lld x %lld %s elements", name, (long long)rows, (long long)cols, info->name);
    return NULL;
  }
  plan_weight *w = calloc(1, sizeof *w);
  if (!w) {
    rg_error_set("%s: out of memory", name);
    return NULL;
  }
  *w = (plan_weight){.rows = rows, .cols = cols, .tag = plan(be)->tag};
  const bool tiled = rows > 1 && form != RG_FORM_F32 && t->type != RG_F32;
  if (plan(be)->gpu) { /* backend/gpu/gpu.cu's rule: only a bf16 file's matrices stay as they are */
    w->bytes = tiled && t->type == RG_BF16 ? row_bytes * (size_t)rows : f32;
  } else {
    const bool aligned_f32 = t->type == RG_F32 && ((uintptr_t)t->data % sizeof(float)) == 0;
    w->bytes = aligned_f32 || tiled ? 0 : f32;
    if (tiled) grow_tile(be, cols);
  }
  count(be, w->tag, w->bytes, 0);
  return (rg_bweight *)w;
}

static void plan_weight_free(rg_backend *be, rg_bweight *bw) {
  plan_weight *w = (plan_weight *)bw;
  count(be, w->tag, 0, w->bytes);
  free(w);
}

static size_t plan_weight_bytes(const rg_bweight *bw) { return ((const plan_weight *)bw)->bytes; }

/* A float32 copy, counted under the current tag (making a weight trainable
 * is a step of its own). */
static int plan_weight_make_f32(rg_backend *be, rg_bweight *bw) {
  plan_weight *w = (plan_weight *)bw;
  const size_t f32 = (size_t)w->rows * (size_t)w->cols * sizeof(float);
  count(be, w->tag, 0, w->bytes);
  w->bytes = f32;
  w->tag = plan(be)->tag;
  count(be, w->tag, f32, 0);
  return 0;
}

static int plan_weight_download(rg_backend *be, const rg_bweight *bw, float *dst) {
  const plan_weight *w = (const plan_weight *)bw;
  memset(dst, 0, (size_t)w->rows * (size_t)w->cols * sizeof *dst);
  return 0;
}

static int plan_weight_upload(rg_backend *be, rg_bweight *w, const float *src) { return 0; }

/* a view of no memory: a plan runs no operation on it */
static int plan_weight_f32_view(rg_backend *be, rg_bweight *bw, rg_buf *view) {
  const plan_weight *w = (const plan_weight *)bw;
  *view = (rg_buf){.n = (size_t)w->rows * (size_t)w->cols, .data = NULL};
  return 0;
}

/* ---------------------------------------------------------------- operations: none */

static void plan_batch_set(rg_backend *be, rg_batch *b, const int32_t *ids, const int *seq, const int *pos, int n) {}
static void plan_gather_rows(rg_backend *be, rg_buf *dst, const rg_buf *src, const int *rows, int n, int width) {}
static void plan_buf_copy(rg_backend *be, rg_buf *dst, size_t dst_offset, const rg_buf *src, size_t src_offset,
                          size_t n) {}
static void plan_buf_copy_rows(rg_backend *be, rg_buf *dst, size_t dst_offset, size_t dst_stride, const rg_buf *src,
                               size_t src_offset, size_t src_stride, int rows, size_t width) {}
static void plan_matmul(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w,
                        const rg_bweight *bias) {}
static void plan_matmul_add(rg_backend *be, rg_buf *y, const rg_buf *x, int M, const rg_bweight *w) {}
static void plan_embed(rg_backend *be, rg_buf *out, const rg_bweight *w, const rg_batch *b) {}
static void plan_rmsnorm(rg_backend *be, rg_buf *y, const rg_buf *x, const rg_bweight *w, int rows, int d,
                         float eps) {}
static void plan_rope(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
                      bool adjacent) {}
static void plan_kv_store(rg_backend *be, rg_buf *k_cache, rg_buf *v_cache, const rg_buf *k, const rg_buf *v,
                          const rg_attn_desc *a) {}
static void plan_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                           const rg_buf *v_cache, const rg_attn_desc *a) {}
static void plan_swiglu(rg_backend *be, rg_buf *out, const rg_buf *gate, const rg_buf *up, size_t n) {}
static void plan_add(rg_backend *be, rg_buf *y, const rg_buf *a, const rg_buf *b, size_t n) {}
static void plan_scale(rg_backend *be, rg_buf *x, size_t n, float c) {}
static void plan_ablate(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *unit) {}
static void plan_add_scaled(rg_backend *be, rg_buf *x, int rows, int d, const rg_buf *v, float c) {}
static void plan_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n) {}
static void plan_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n,
                                      int width) {}
static void plan_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy,
                                 const rg_buf *x, int M, const rg_bweight *w) {}
static void plan_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d) {}
static void plan_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                                  const rg_bweight *w, int rows, int d, float eps) {}
static void plan_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                               const rg_buf *inv_freq, bool adjacent) {}
static void plan_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                                 const rg_buf *up, size_t n) {}
static void plan_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache,
                                    const rg_buf *dy, const rg_buf *q, const rg_buf *out, const rg_buf *lse,
                                    const rg_buf *k_cache, const rg_buf *v_cache, const rg_attn_desc *a) {}
static void plan_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                                   const rg_attn_desc *a) {}
static void plan_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits,
                               const int32_t *targets, const float *scale, int rows, int vocab) {}
static void plan_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits,
                              const int32_t *targets, const float *scale, int rows, int vocab, float log_p_min) {}
static int plan_sum_squares(rg_backend *be, const rg_buf *b, double *out) {
  *out = 0;
  return 0;
}
static void plan_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v,
                       const rg_adamw_step *st) {}

/* ---------------------------------------------------------------- lifetime */

#define PLAN_IFACE(NAME)                                                                                           \
  {                                                                                                                \
    .name = NAME, .free = plan_free, .status = plan_status, .buf_new = plan_buf_new, .buf_free = plan_buf_free,   \
    .buf_upload = plan_buf_upload, .buf_download = plan_buf_download, .batch_new = plan_batch_new,                 \
    .batch_free = plan_batch_free, .batch_set = plan_batch_set, .gather_rows = plan_gather_rows,                  \
    .buf_copy = plan_buf_copy,                                                                                     \
    .buf_copy_rows = plan_buf_copy_rows,                                                                           \
    .weight_new = plan_weight_new, .weight_free = plan_weight_free, .weight_bytes = plan_weight_bytes,             \
    .weight_make_f32 = plan_weight_make_f32, .weight_download = plan_weight_download,                              \
    .weight_upload = plan_weight_upload, .matmul = plan_matmul, .matmul_add = plan_matmul_add,                     \
    .embed = plan_embed, .rmsnorm = plan_rmsnorm, .rope = plan_rope, .kv_store = plan_kv_store,                    \
    .attention = plan_attention, .swiglu = plan_swiglu, .add = plan_add, .scale = plan_scale,                      \
    .ablate = plan_ablate, .add_scaled = plan_add_scaled, .buf_zero = plan_buf_zero,                               \
    .gather_rows_backward = plan_gather_rows_backward, .matmul_backward = plan_matmul_backward,                     \
    .embed_backward = plan_embed_backward, .rmsnorm_backward = plan_rmsnorm_backward,                              \
    .rope_backward = plan_rope_backward, .swiglu_backward = plan_swiglu_backward,                                  \
    .attention_backward = plan_attention_backward, .kv_store_backward = plan_kv_store_backward,                    \
    .cross_entropy = plan_cross_entropy, .unlikelihood = plan_unlikelihood, .sum_squares = plan_sum_squares,       \
    .adamw = plan_adamw, .weight_f32_view = plan_weight_f32_view,                                                  \
  }

static const rg_backend_iface PLAN_CPU_IFACE = PLAN_IFACE("plan-cpu");
static const rg_backend_iface PLAN_GPU_IFACE = PLAN_IFACE("plan-gpu");

static rg_backend *plan_new(const rg_backend_opts *o, const rg_backend_iface *iface, bool gpu) {
  plan_backend *p = calloc(1, sizeof *p);
  if (!p) {
    rg_error_set("plan backend: out of memory");
    return NULL;
  }
  /* the thread count sizes the CPU rule's tiles, as rg_backend_cpu_new counts it */
  int threads = o && o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  p->base = (rg_backend){.iface = iface, .threads = threads < 1 ? 1 : threads};
  p->gpu = gpu;
  return &p->base;
}

rg_backend *rg_backend_plan_cpu_new(const rg_backend_opts *o) { return plan_new(o, &PLAN_CPU_IFACE, false); }
rg_backend *rg_backend_plan_gpu_new(const rg_backend_opts *o) { return plan_new(o, &PLAN_GPU_IFACE, true); }

bool rg_backend_is_plan(const rg_backend *be) {
  return be->iface == &PLAN_CPU_IFACE || be->iface == &PLAN_GPU_IFACE;
}

void rg_plan_set_tag(rg_backend *be, int tag) {
  if (rg_backend_is_plan(be) && tag >= 0 && tag < RG_PLAN_TAGS) plan(be)->tag = tag;
}

size_t rg_plan_bytes(const rg_backend *be, int tag) {
  return rg_backend_is_plan(be) && tag >= 0 && tag < RG_PLAN_TAGS ? ((const plan_backend *)be)->bytes[tag] : 0;
}
