/* backend/plan.h: backends that allocate nothing and compute nothing, but
 * count the bytes a real backend would hold (what `refgeo train --plan`
 * reports, adv_ft/train_plan.h).
 *
 * A plan backend fills the whole operation table (backend.h): buffers,
 * batches and weights are small host records of their size, with no data;
 * every operation is a no-op, every download gives zeros, and the status
 * is always 0. Code that allocates through the backend (rg_weights_new,
 * rg_session_new, rg_grads_new, rg_optimizer_new) therefore runs its own
 * allocation steps unchanged on a plan backend, for any model size, and the
 * counts are the sizes those steps asked for.
 *
 * Two rules for what a weight holds (rg_bweight_bytes):
 *  - "plan-cpu": the CPU backend's (backend/cpu/cpu.c): a float32 copy for a
 *    vector, a float32-form matrix or a misaligned f32 tensor; nothing for
 *    an aligned f32 tensor or a tiled matrix, which view the file map; a
 *    float32 copy after rg_bweight_make_f32. Tiled matrices add the
 *    dequantization tiles (TILE_FLOATS per thread, or one row if longer).
 *  - "plan-gpu": the GPU backend's (backend/gpu/gpu.cu) holds every weight in
 *    device memory: a bf16 file's matrix in a tiled form as its bytes,
 *    everything else and every trainable weight as float32. No tiles.
 *
 * Tags: every allocation is counted under the backend's current tag
 * (rg_plan_set_tag; 0 at first), and a free takes its bytes off the tag it
 * was counted in, so a caller learns what each of its steps holds.
 */
#ifndef RG_BACKEND_PLAN_H
#define RG_BACKEND_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

enum { RG_PLAN_TAGS = 8 };

/* What rg_backend_new makes for "plan-cpu" and "plan-gpu". */
rg_backend *rg_backend_plan_cpu_new(const rg_backend_opts *o);
rg_backend *rg_backend_plan_gpu_new(const rg_backend_opts *o);

/* True for a plan backend. */
bool rg_backend_is_plan(const rg_backend *be);

/* Counts what is allocated from now on under TAG (0 .. RG_PLAN_TAGS-1). */
void rg_plan_set_tag(rg_backend *be, int tag);
/* Bytes held now under TAG. */
size_t rg_plan_bytes(const rg_backend *be, int tag);

#endif
