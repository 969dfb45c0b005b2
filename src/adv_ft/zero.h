/* zero.h: ZeRO stages 1 and 2 (Rajbhandari et al., arXiv 1910.02054;
 * DeepSpeed's deepspeed/runtime/zero/stage_1_and_2.py) over the
 * data-parallel ranks of a run.
 *
 * Partition. The trainable parameters, in their fixed order (weights.h),
 * are cut into buckets: a bucket holds parameters of one transformer block
 * (or of the rest: embedding, final norm, head) and at most
 * RG_ZERO_BUCKET_FLOATS floats, a larger parameter spanning several. Each
 * bucket is a flat view of its floats, zero-padded to a multiple of the W
 * data-parallel ranks and cut into W equal shards: rank r owns floats
 * [r * s, (r + 1) * s) of every bucket (s = padded / W). DeepSpeed pads
 * one flat view per parameter group (to a multiple of 2 W:
 * align_dense_tensors) and cuts it into W consecutive partitions
 * (get_data_parallel_partitions, stage_1_and_2.py); a view per
 * bucket makes every gradient reduction and parameter gather one
 * equal-block collective (MPI_Reduce_scatter_block, ncclReduceScatter;
 * MPI_Allgather, ncclAllGather) and lets a block's gradient be reduced as
 * soon as its backward is done. A rank's shard is its shards of the
 * buckets, concatenated in bucket order; the layout depends only on the
 * parameters and W, so a resume on the same W finds the same floats.
 *
 * Stage 1: every rank holds the whole gradient (summed over the ranks as
 * without ZeRO) and AdamW's m and v of its shard only; it updates the
 * parameters' floats of its shard, and the updated shards are all-gathered
 * into every rank's parameters. The update of each float is the same
 * operation on the same values as without ZeRO: the parameters are
 * bitwise those of zero = 0.
 * Stage 2: also the gradient: the trainer's gradients share one block's
 * buffers (rg_grads_new_per_block), and after each block's backward its
 * buckets are reduce-scattered, each rank adding the sum of its shard to a
 * gradient shard; the gradient's global L2 norm (clipping) is the sum of
 * the shards' squares over the ranks. Only the summation order differs
 * from zero = 0 (per micro-batch, then over micro-batches).
 *
 * Sequence parallelism: the ranks of one sequence-parallel group hold the
 * same shard (their data-parallel rank); their gradient shards are summed
 * over the group after the reductions.
 *
 * Ownership: an rg_zero borrows the weights, the gradients and the
 * communicators (all must outlive it) and owns its buffers.
 */
#ifndef RG_ADV_FT_ZERO_H
#define RG_ADV_FT_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "dist/comm.h"
#include "engine/backward.h"
#include "engine/weights.h"

/* A bucket's most floats: one collective's piece (comm.h), which also
 * bounds the staging buffers a stage-2 reduction and a gather need. */
enum { RG_ZERO_BUCKET_FLOATS = RG_COMM_PIECE_FLOATS };

typedef struct rg_zero rg_zero;

typedef struct {
  int stage;   /* 1 or 2 */
  rg_comm *dp; /* the data-parallel ranks (W = its size), on the weights' backend's buffers */
  rg_comm *sp; /* this rank's sequence-parallel group, on the same buffers; NULL: none */
} rg_zero_opts;

/* The partition of W's parameters over o->dp's ranks, with this rank's
 * buffers (stage 2: the gradient shard and the staging of one bucket);
 * stage 2 sets the block hook of G (rg_grads_new_per_block's). NULL with
 * the error set. */
rg_zero *rg_zero_new(rg_weights *w, rg_grads *g, const rg_zero_opts *o);
void rg_zero_free(rg_zero *z);

int rg_zero_stage(const rg_zero *z);
int rg_zero_rank(const rg_zero *z);
int rg_zero_ranks(const rg_zero *z);
/* Floats of one rank's shard (the sum of its buckets' shards). */
size_t rg_zero_shard_floats(const rg_zero *z);
/* Backend bytes of the buffers rg_zero_new allocated. */
size_t rg_zero_bytes(const rg_zero *z);

/* Before an update's micro-batches: zero the gradient shard (stage 2). */
void rg_zero_begin(rg_zero *z);
/* After them: stage 2 sums the gradient shard over the sequence-parallel
 * group. 0, or -1 with the error set. */
int rg_zero_end_grads(rg_zero *z);

/* The gradient's global sum of squares (every rank gets the same). */
int rg_zero_sum_squares(rg_zero *z, double *ss);

/* One AdamW step on this rank's shard, M and V its moments (shard floats
 * each), then the all-gather of the updated shards into every rank's
 * parameters. 0, or -1 with the error set. */
int rg_zero_adamw(rg_zero *z, rg_buf *m, rg_buf *v, const rg_adamw_step *st);

#endif
