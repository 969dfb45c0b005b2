/* backend/cpu/cpu.h: what the CPU backend tells other code beyond backend.h:
 * the scratch it grows for a weight kept in its file dtype, so that the
 * planner (backend/plan.c) counts what the backend will hold without
 * reading the backend's private header. */
#ifndef RG_BACKEND_CPU_H
#define RG_BACKEND_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t tile_floats;  /* per thread: dequantized rows of the weight (skinny, panel and sgemm tiles) */
  size_t panel_floats; /* once: the panel products' transposed activations */
} rg_cpu_scratch;

/* The scratch a tiled weight of COLS columns needs; the backend holds the
 * largest over its weights. */
rg_cpu_scratch rg_cpu_scratch_for(int64_t cols);

#endif
