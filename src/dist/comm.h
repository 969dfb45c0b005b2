/* comm.h: the collectives that sequence parallelism needs, behind one small
 * interface (as backend.h is for the math).
 *
 * A communicator is a group of ranks that each hold a part of a training
 * batch: "self" (one rank; every collective is a copy), "mpi" (an MPI
 * communicator: ranks from mpirun) and, in a CUDA build, "nccl", which
 * fills the same table on device pointers (rg_comm_nccl).
 *
 * Conventions:
 *  - Float arrays are in the memory of the backend the caller computes on:
 *    host memory for the CPU backend (what the MPI communicator reads),
 *    device memory for a device backend with its own communicator.
 *  - Every collective is called by every rank of the group, in the same
 *    order, with the same counts arrays.
 *  - Results are deterministic for a fixed group size: reductions add the
 *    ranks' contributions in one fixed order.
 *  - Errors: a collective returns 0, or -1 with the error set. It fails
 *    when it does not complete within the communicator's deadline (a rank
 *    died or hangs): MPI cannot cancel a pending collective, so the
 *    communicator is then broken, and rg_comm_free of a broken MPI
 *    communicator ends the whole MPI job (MPI_Abort) rather than hang in
 *    MPI_Finalize. mpirun names a rank that died (by exit or signal) and
 *    stops the others itself; the deadline covers a rank that stays alive
 *    but never arrives.
 *
 * Ownership: a communicator from rg_comm_mpi_world / rg_comm_split is the
 * caller's to free (before MPI is finalized); rg_comm_self's is static.
 */
#ifndef RG_COMM_H
#define RG_COMM_H

#include <stddef.h>

typedef struct rg_comm rg_comm;

/* The most floats one collective works on at a time: longer all-reduces go
 * in pieces, because MPI's reduce-scatter with a user operation holds a
 * temporary copy of what it reduces (a whole 28M-float embedding gradient
 * made that 113 MB). A memory plan counts this scratch (sp_plan.h). */
enum { RG_COMM_PIECE_FLOATS = 1 << 22 };

typedef struct rg_comm_iface {
  const char *name;
  void (*free)(rg_comm *c);
  /* the ranks with the same COLOR, ordered by KEY (MPI_Comm_split) */
  rg_comm *(*split)(rg_comm *c, int color, int key);
  int (*allgather_int)(rg_comm *c, int *all, int mine);
  int (*allgatherv_int)(rg_comm *c, int *all, const int *counts, const int *mine);
  int (*allgatherv)(rg_comm *c, float *all, const int *counts, const float *mine);
  int (*reduce_scatterv)(rg_comm *c, float *mine, const float *all, const int *counts);
  int (*alltoallv)(rg_comm *c, float *recv, const int *recv_counts, const float *send, const int *send_counts);
  int (*reduce_scatter_block)(rg_comm *c, float *mine, const float *all, size_t count);
  int (*allgather)(rg_comm *c, float *all, const float *mine, size_t count);
  int (*allreduce_sum)(rg_comm *c, float *x, size_t n);
  int (*allreduce_sum_f64)(rg_comm *c, double *x, int n);
} rg_comm_iface;

struct rg_comm {
  const rg_comm_iface *iface;
  int rank, size;
};

/* The one-rank communicator (no MPI). */
rg_comm *rg_comm_self(void);

/* A communicator of SIZE ranks that moves no data, as rank 0 (what a
 * session on a plan backend needs to size its sequence-parallel buffers;
 * backend/plan.h): every collective fails. NULL with the error set. */
rg_comm *rg_comm_plan(int size);

/* MPI's world (MPI_Init on first use, MPI_Finalize at exit). Each
 * collective waits at most TIMEOUT_S seconds (<= 0: 600). NULL with the
 * error set (MPI failed to start). */
rg_comm *rg_comm_mpi_world(double timeout_s);

/* Splits WORLD into groups of GROUP consecutive ranks (a sequence-parallel
 * group: ranks g*GROUP .. g*GROUP+GROUP-1) and, in *across, the ranks with
 * the same place in every group (a data-parallel group; across may be
 * NULL). GROUP must divide the world's size. NULL with the error set. */
rg_comm *rg_comm_split(rg_comm *world, int group, rg_comm **across);

/* Ranks computing on the GPU backend BE (backend/gpu/gpu.cu), the same ranks
 * as HOST's (an MPI communicator, borrowed, to be freed after this one):
 * NCCL carries the float collectives on BE's device buffers, in BE's
 * stream; HOST carries those on host arrays (ints, doubles) and hands NCCL
 * its id. Every rank of HOST calls it. NULL with the error set (no CUDA
 * build, no NCCL library, a rank that cannot join). comm_nccl.cu. */
typedef struct rg_backend rg_backend;
rg_comm *rg_comm_nccl(rg_comm *host, rg_backend *be, double timeout_s);

static inline void rg_comm_free(rg_comm *c) {
  if (c) c->iface->free(c);
}
static inline int rg_comm_rank(const rg_comm *c) { return c->rank; }
static inline int rg_comm_size(const rg_comm *c) { return c->size; }

/* all[r] = rank r's MINE. */
static inline int rg_comm_allgather_int(rg_comm *c, int *all, int mine) {
  return c->iface->allgather_int(c, all, mine);
}
/* ALL = the ranks' MINE arrays concatenated in rank order; rank r gives
 * counts[r] ints. */
static inline int rg_comm_allgatherv_int(rg_comm *c, int *all, const int *counts, const int *mine) {
  return c->iface->allgatherv_int(c, all, counts, mine);
}
/* The same for floats. */
static inline int rg_comm_allgatherv(rg_comm *c, float *all, const int *counts, const float *mine) {
  return c->iface->allgatherv(c, all, counts, mine);
}
/* The transpose of allgatherv: ALL is a concatenation of per-rank blocks
 * (counts[r] floats each) on every rank; rank r's MINE becomes the sum over
 * ranks of block r. */
static inline int rg_comm_reduce_scatterv(rg_comm *c, float *mine, const float *all, const int *counts) {
  return c->iface->reduce_scatterv(c, mine, all, counts);
}
/* SEND is a concatenation of per-rank blocks, send_counts[r] floats for
 * rank r; RECV becomes the concatenation, in rank order, of the blocks the
 * ranks sent to this one (recv_counts[r] floats from rank r). */
static inline int rg_comm_alltoallv(rg_comm *c, float *recv, const int *recv_counts, const float *send,
                                    const int *send_counts) {
  return c->iface->alltoallv(c, recv, recv_counts, send, send_counts);
}
/* The same with COUNT floats per rank (MPI_Reduce_scatter_block,
 * ncclReduceScatter): ALL holds size * COUNT floats; MINE (COUNT floats,
 * not inside ALL) becomes the sum over ranks of block rank. ZeRO's
 * gradient shards (adv_ft/zero.h). */
static inline int rg_comm_reduce_scatter_block(rg_comm *c, float *mine, const float *all, size_t count) {
  return c->iface->reduce_scatter_block(c, mine, all, count);
}
/* ALL (size * COUNT floats) = every rank's COUNT floats of MINE in rank
 * order (MPI_Allgather, ncclAllGather); MINE may be ALL's own block. */
static inline int rg_comm_allgather(rg_comm *c, float *all, const float *mine, size_t count) {
  return c->iface->allgather(c, all, mine, count);
}
/* x = the sum over ranks of x, in place (n floats). */
static inline int rg_comm_allreduce_sum(rg_comm *c, float *x, size_t n) { return c->iface->allreduce_sum(c, x, n); }
static inline int rg_comm_allreduce_sum_f64(rg_comm *c, double *x, int n) {
  return c->iface->allreduce_sum_f64(c, x, n);
}

#endif
