/* backend/cpu/cpu_internal.h: the CPU backend's state and the operations
 * its table holds, shared by backend/cpu/cpu.c (the forward operations and
 * the table), backend/cpu/attention.c (attention and its gradient),
 * backend/cpu/grad.c (the other gradient operations), fail.c and rope.c.
 * The kernels see only cpu_types.h and q8/q8_types.h. */
#ifndef RG_BACKEND_CPU_INTERNAL_H
#define RG_BACKEND_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_types.h"
#include "backend/cpu/q8/q8_types.h"

typedef struct {
  rg_backend base;
  cpu_scratch scratch;          /* the kernels' (grown by weight_new), with the thread count */
  const struct q8_kernels *q8; /* the 8-bit products' kernels this CPU runs, or NULL (cpu_q8_pick) */
  bool split;                   /* the split products run here (cpu_split_pick) */
  bool commit;     /* rg_backend_opts.commit */
  bool failed;     /* an operation failed since the last rg_backend_status */
  char error[256]; /* its message */
} cpu_backend;

static inline cpu_backend *cpu(rg_backend *be) { return (cpu_backend *)be; }

/* backend/cpu/fail.c: records the first failure of an operation (backend.h,
 * "Errors"). */
void cpu_fail(rg_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* backend/cpu/rope.c: rotates x's pairs by sign * (float)pos[t] * inv_freq[i]: +1 is RoPE, -1
 * its transpose (the backward of RoPE). */
void cpu_rope_rotate(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim, const rg_buf *inv_freq,
                     bool adjacent, float sign);

/* backend/cpu/attention.c: attention and its gradient. */
void cpu_attention(rg_backend *be, rg_buf *out, rg_buf *lse, const rg_buf *q, const rg_buf *k_cache,
                   const rg_buf *v_cache, const rg_attn_desc *a);
void cpu_attention_backward(rg_backend *be, rg_buf *dq, rg_buf *dk_cache, rg_buf *dv_cache, const rg_buf *dy,
                            const rg_buf *q, const rg_buf *out, const rg_buf *lse, const rg_buf *k_cache,
                            const rg_buf *v_cache, const rg_attn_desc *a);

/* backend/cpu/grad.c: the gradient entries of the operation table. */
void cpu_buf_zero(rg_backend *be, rg_buf *b, size_t offset, size_t n);
void cpu_gather_rows_backward(rg_backend *be, rg_buf *dsrc, const rg_buf *ddst, const int *rows, int n, int width);
void cpu_matmul_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, rg_buf *dbias, const rg_buf *dy, const rg_buf *x,
                         int M, const rg_bweight *w);
void cpu_embed_backward(rg_backend *be, rg_buf *dw, const rg_buf *dy, const rg_batch *b, int d);
void cpu_rmsnorm_backward(rg_backend *be, rg_buf *dx, rg_buf *dw, const rg_buf *dy, const rg_buf *x,
                          const rg_bweight *w, int rows, int d, float eps);
void cpu_rope_backward(rg_backend *be, rg_buf *dx, const rg_batch *b, int n_heads, int head_dim,
                       const rg_buf *inv_freq, bool adjacent);
void cpu_swiglu_backward(rg_backend *be, rg_buf *dgate, rg_buf *dup, const rg_buf *dy, const rg_buf *gate,
                         const rg_buf *up, size_t n);
void cpu_kv_store_backward(rg_backend *be, rg_buf *dk, rg_buf *dv, rg_buf *dk_cache, rg_buf *dv_cache,
                           const rg_attn_desc *a);
void cpu_cross_entropy(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                       const float *scale, int rows, int vocab);
void cpu_unlikelihood(rg_backend *be, rg_buf *losses, rg_buf *dlogits, const rg_buf *logits, const int32_t *targets,
                      const float *scale, int rows, int vocab, float log_p_min);
int cpu_sum_squares(rg_backend *be, const rg_buf *b, double *out);
void cpu_adamw(rg_backend *be, rg_bweight *param, const rg_buf *grad, rg_buf *m, rg_buf *v, const rg_adamw_step *st);

#endif
