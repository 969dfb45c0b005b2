/* backend/cpu/q8/q8_types.h: the 8-bit and split products as the CPU
 * backend's operation table (cpu.c) sees them: which CPU runs them, which
 * weights they take, their scratch and their entry points. Their kernels'
 * own types are in q8_internal.h. */
#ifndef RG_BACKEND_CPU_Q8_TYPES_H
#define RG_BACKEND_CPU_Q8_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_types.h"

struct q8_kernels;

/* backend/cpu/q8/q8.c: y = x . W^T + bias (beta 0) or y += x . W^T (beta 1)
 * for any M, with the activations quantized to 8 bits (RG_FORM_FILE_Q8).
 * Only for weights whose cpu_q8_supported is true, with s->q8 of
 * at least cpu_q8_scratch_bytes(cols, threads).
 * cpu_q8_pick sets *OUT to the best kernels this CPU runs under the cap of
 * the environment's REFGEO_MAX_ISA (avx512, avx2 or none), or to NULL; -1
 * with the error set for an unknown cap. */
int cpu_q8_pick(const struct q8_kernels **out);
bool cpu_q8_supported(const struct q8_kernels *k, int type, int64_t cols);
size_t cpu_q8_scratch_bytes(int64_t cols, int threads);
void cpu_matmul_q8(const cpu_scratch *s, const struct q8_kernels *k, rg_buf *y, const rg_buf *x, int M,
                   const rg_bweight *w, const rg_bweight *bias, float beta);

/* backend/cpu/q8/q8.c, split products: y = x . W^T + bias (beta 0) or
 * y += x . W^T (beta 1) in float32 on AMX-BF16 tiles, x cut into three
 * bf16 parts (backend/cpu/q8/split_amx.c), for weights whose
 * cpu_split_supported is true (on a CPU cpu_split_pick accepts) and s->q8 of at least
 * cpu_split_scratch_bytes(cols, rows, threads). Every product of such a
 * weight runs here, whatever M: each row's result is then the same
 * operations whatever the batch (a prompt's rows alone or in a batch,
 * GCG's suffix rows on a cached prefix or the whole sequence), where
 * sgemm below some M and the tiles above it differed by float32
 * rounding. Decoding the blocks costs a few-row product more than a
 * cache-resident sgemv would, but a whole model's float32 copy is not
 * cache-resident, so generation gains (docs/benchmarks.md, "Figures behind
 * the CPU kernels' choices"). cpu_split_pick: whether the CPU runs them
 * under the cap that chose the 8-bit kernels K (they are AMX kernels). */
bool cpu_split_pick(const struct q8_kernels *k);
bool cpu_split_supported(int type, int64_t cols);
size_t cpu_split_scratch_bytes(int64_t cols, int64_t rows, int threads);
void cpu_matmul_split(const cpu_scratch *s, const struct q8_kernels *k, rg_buf *y, const rg_buf *x, int M,
                      const rg_bweight *w, const rg_bweight *bias, float beta);

#endif
