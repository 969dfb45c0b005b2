/* backend/cpu/rope.c: the rotation of rotary position embeddings, which
 * the forward RoPE (cpu.c) and its gradient (grad.c) both run. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"

void cpu_rope_rotate(rg_backend *be, rg_buf *x, const rg_batch *b, int n_heads, int head_dim,
                     const rg_buf *inv_freq_buf, bool adjacent, float sign) {
  const int half = head_dim / 2, n_tokens = b->n;
  const int *pos = b->pos;
  const float *inv_freq = inv_freq_buf->data;
  float *xd = x->data;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)n_tokens * n_heads * head_dim > PAR_MIN)
  for (int t = 0; t < n_tokens; t++) {
    float cs[RG_MAX_HEAD_DIM / 2], sn[RG_MAX_HEAD_DIM / 2];
    for (int i = 0; i < half; i++) {
      float ang = (float)pos[t] * inv_freq[i];
      cs[i] = cosf(ang);
      sn[i] = sign * sinf(ang);
    }
    for (int h = 0; h < n_heads; h++) {
      float *v = xd + ((size_t)t * n_heads + h) * head_dim;
      for (int i = 0; i < half; i++) {
        int i0 = adjacent ? 2 * i : i, i1 = adjacent ? 2 * i + 1 : i + half;
        float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * cs[i] - x1 * sn[i];
        v[i1] = x1 * cs[i] + x0 * sn[i];
      }
    }
  }
}
