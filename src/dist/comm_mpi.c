/* comm_mpi.c: the MPI communicator (comm.h) on host memory.
 *
 * Every collective is MPI-3 non-blocking, waited for with a deadline, so
 * that a rank that never arrives turns into an error on the others instead
 * of a hang (Debian's Open MPI 4.1 has no ULFM: a blocking collective
 * waits forever for a dead peer: the MPI fault-tolerance extension, ULFM,
 * ships with Open MPI 5.0).
 *
 * Sums are reproducible and equal on every rank: floats are reduced with a
 * user operation declared non-commutative, which MPI must apply in rank
 * order, and an all-reduce is a reduce-scatter followed by an all-gather,
 * so each block is summed once, by one rank, and copied to the others.
 */
#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "util/error.h"

typedef struct {
  rg_comm base;
  MPI_Comm mc;
  double timeout_s;
  bool broken; /* a collective timed out with its request pending */
} mpi_comm;

static mpi_comm *mpi(rg_comm *c) { return (mpi_comm *)c; }

static MPI_Op op_sum_f32 = MPI_OP_NULL, op_sum_f64 = MPI_OP_NULL;

static void sum_f32(void *in, void *inout, int *len, MPI_Datatype *t) {
  const float *a = in;
  float *b = inout;
  for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}
static void sum_f64(void *in, void *inout, int *len, MPI_Datatype *t) {
  const double *a = in;
  double *b = inout;
  for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}

/* Waits for REQ until the deadline: spins on MPI_Test for the first
 * millisecond (the common case: the peers are there), then sleeps 100 us
 * between tests so that a waiting rank leaves the cores to those still
 * computing (ranks may outnumber cores). */
static int wait_for(mpi_comm *c, MPI_Request *req, const char *what) {
  const double start = MPI_Wtime();
  for (long polls = 0;; polls++) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return rg_error_set("rank %d: MPI %s failed", c->base.rank, what);
    if (done) return 0;
    const double waited = MPI_Wtime() - start;
    if (waited > c->timeout_s) {
      c->broken = true;
      return rg_error_set("rank %d: MPI %s did not complete in %.0f s: another rank of the %d died or hangs",
                          c->base.rank, what, c->timeout_s, c->base.size);
    }
    if (waited > 1e-3) nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
  }
}

static int started(mpi_comm *c, int rc, MPI_Request *req, const char *what) {
  if (c->broken) return rg_error_set("rank %d: MPI %s: an earlier collective failed", c->base.rank, what);
  if (rc != MPI_SUCCESS) return rg_error_set("rank %d: MPI %s failed to start", c->base.rank, what);
  return wait_for(c, req, what);
}

/* Displacements from counts; -1 with the error set when they overflow
 * MPI's int. */
static int displs_of(mpi_comm *c, const int *counts, int *displs) {
  long long at = 0;
  for (int r = 0; r < c->base.size; r++) {
    if (counts[r] < 0 || at > INT_MAX) return rg_error_set("MPI: %lld elements exceed an int count", at);
    displs[r] = (int)at;
    at += counts[r];
  }
  return 0;
}

static int gatherv(rg_comm *cc, void *all, const int *counts, const void *mine, MPI_Datatype t) {
  mpi_comm *c = mpi(cc);
  int *displs = malloc((size_t)c->base.size * sizeof *displs);
  if (!displs) return rg_error_set("MPI allgatherv: out of memory");
  int rc = displs_of(c, counts, displs);
  MPI_Request req;
  if (rc == 0)
    rc = started(c, MPI_Iallgatherv(mine, counts[c->base.rank], t, all, counts, displs, t, c->mc, &req), &req,
                 "allgatherv");
  free(displs);
  return rc;
}

static int mpi_allgather_int(rg_comm *cc, int *all, int mine) {
  mpi_comm *c = mpi(cc);
  MPI_Request req;
  return started(c, MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT, c->mc, &req), &req, "allgather");
}

static int mpi_allgatherv_int(rg_comm *c, int *all, const int *counts, const int *mine) {
  return gatherv(c, all, counts, mine, MPI_INT);
}

static int mpi_allgatherv(rg_comm *c, float *all, const int *counts, const float *mine) {
  return gatherv(c, all, counts, mine, MPI_FLOAT);
}

static int reduce_scatter(mpi_comm *c, void *mine, const void *all, const int *counts, MPI_Datatype t, MPI_Op op) {
  MPI_Request req;
  return started(c, MPI_Ireduce_scatter(all, mine, counts, t, op, c->mc, &req), &req, "reduce_scatter");
}

static int mpi_reduce_scatterv(rg_comm *cc, float *mine, const float *all, const int *counts) {
  return reduce_scatter(mpi(cc), mine, all, counts, MPI_FLOAT, op_sum_f32);
}

static int mpi_alltoallv(rg_comm *cc, float *recv, const int *recv_counts, const float *send,
                         const int *send_counts) {
  mpi_comm *c = mpi(cc);
  const int P = c->base.size;
  int *displs = malloc(2 * (size_t)P * sizeof *displs);
  if (!displs) return rg_error_set("MPI alltoallv: out of memory");
  int rc = displs_of(c, send_counts, displs);
  if (rc == 0) rc = displs_of(c, recv_counts, displs + P);
  MPI_Request req;
  if (rc == 0)
    rc = started(c,
                 MPI_Ialltoallv(send, send_counts, displs, MPI_FLOAT, recv, recv_counts, displs + P, MPI_FLOAT, c->mc,
                                &req),
                 &req, "alltoallv");
  free(displs);
  return rc;
}

/* Equal blocks (comm.h), in pieces of at most RG_COMM_PIECE_FLOATS floats
 * per rank, so that MPI's scratch stays bounded as allreduce's does: piece
 * j of every block is one MPI_Ireduce_scatter_block on a packed copy
 * (SCRATCH) of those pieces, unless one piece is the whole block. */
static int mpi_reduce_scatter_block(rg_comm *cc, float *mine, const float *all, size_t count) {
  mpi_comm *c = mpi(cc);
  const int P = c->base.size;
  const size_t most = count < (size_t)RG_COMM_PIECE_FLOATS ? count : (size_t)RG_COMM_PIECE_FLOATS;
  float *scratch = most < count ? malloc((size_t)P * most * sizeof *scratch) : NULL;
  if (most < count && !scratch) return rg_error_set("MPI reduce_scatter_block: out of memory");
  int rc = 0;
  for (size_t at = 0; rc == 0 && at < count; at += most) {
    const size_t piece = count - at < most ? count - at : most;
    const float *send = all;
    if (scratch) {
      for (int r = 0; r < P; r++) memcpy(scratch + (size_t)r * piece, all + (size_t)r * count + at, piece * sizeof *all);
      send = scratch;
    }
    MPI_Request req;
    rc = started(c, MPI_Ireduce_scatter_block(send, mine + at, (int)piece, MPI_FLOAT, op_sum_f32, c->mc, &req), &req,
                 "reduce_scatter_block");
  }
  free(scratch);
  return rc;
}

static int mpi_allgather(rg_comm *cc, float *all, const float *mine, size_t count) {
  mpi_comm *c = mpi(cc);
  if (count > INT_MAX) return rg_error_set("MPI allgather: %zu floats exceed an int count", count);
  const bool in_place = mine == all + (size_t)c->base.rank * count;
  MPI_Request req;
  return started(c, MPI_Iallgather(in_place ? MPI_IN_PLACE : mine, (int)count, MPI_FLOAT, all, (int)count, MPI_FLOAT,
                                   c->mc, &req),
                 &req, "allgather");
}

/* In-place all-reduce of N elements of SIZE bytes in pieces of at most
 * RG_COMM_PIECE_FLOATS elements (comm.h: that bounds MPI's scratch): each
 * piece is cut into one block per rank, reduced onto its rank, then
 * gathered back. */
static int allreduce(mpi_comm *c, void *x, size_t n, size_t size, MPI_Datatype t, MPI_Op op) {
  const int P = c->base.size;
  int *counts = malloc(2 * (size_t)P * sizeof *counts);
  if (!counts) return rg_error_set("MPI allreduce: out of memory");
  int *displs = counts + P, rc = 0;
  for (size_t at = 0; rc == 0 && at < n;) {
    const size_t piece = n - at < (size_t)RG_COMM_PIECE_FLOATS ? n - at : (size_t)RG_COMM_PIECE_FLOATS;
    for (int r = 0; r < P; r++) counts[r] = (int)(piece * (r + 1) / P - piece * r / P);
    rc = displs_of(c, counts, displs);
    char *base = (char *)x + at * size;
    MPI_Request req;
    if (rc == 0)
      rc = started(c, MPI_Ireduce_scatter(MPI_IN_PLACE, base, counts, t, op, c->mc, &req), &req, "reduce_scatter");
    /* in place, rank r's block lands at the start of its buffer: move it
     * to its place before gathering every block back */
    if (rc == 0) memmove(base + (size_t)displs[c->base.rank] * size, base, (size_t)counts[c->base.rank] * size);
    if (rc == 0)
      rc = started(c, MPI_Iallgatherv(MPI_IN_PLACE, 0, t, base, counts, displs, t, c->mc, &req), &req, "allgatherv");
    at += piece;
  }
  free(counts);
  return rc;
}

static int mpi_allreduce_sum(rg_comm *cc, float *x, size_t n) {
  return allreduce(mpi(cc), x, n, sizeof *x, MPI_FLOAT, op_sum_f32);
}
static int mpi_allreduce_sum_f64(rg_comm *cc, double *x, int n) {
  return allreduce(mpi(cc), x, (size_t)n, sizeof *x, MPI_DOUBLE, op_sum_f64);
}

static rg_comm *mpi_wrap(MPI_Comm mc, double timeout_s);

static rg_comm *mpi_split(rg_comm *cc, int color, int key) {
  mpi_comm *c = mpi(cc);
  MPI_Comm sub;
  if (MPI_Comm_split(c->mc, color, key, &sub) != MPI_SUCCESS) {
    rg_error_set("MPI_Comm_split failed");
    return NULL;
  }
  rg_comm *out = mpi_wrap(sub, c->timeout_s);
  if (!out) MPI_Comm_free(&sub);
  return out;
}

static void mpi_free(rg_comm *cc) {
  mpi_comm *c = mpi(cc);
  if (c->broken) MPI_Abort(MPI_COMM_WORLD, 1); /* a pending request: MPI_Finalize would wait for it forever */
  if (c->mc != MPI_COMM_WORLD) MPI_Comm_free(&c->mc);
  free(c);
}

static const rg_comm_iface MPI_IFACE = {
    .name = "mpi",
    .free = mpi_free,
    .split = mpi_split,
    .allgather_int = mpi_allgather_int,
    .allgatherv_int = mpi_allgatherv_int,
    .allgatherv = mpi_allgatherv,
    .reduce_scatterv = mpi_reduce_scatterv,
    .alltoallv = mpi_alltoallv,
    .reduce_scatter_block = mpi_reduce_scatter_block,
    .allgather = mpi_allgather,
    .allreduce_sum = mpi_allreduce_sum,
    .allreduce_sum_f64 = mpi_allreduce_sum_f64,
};

static rg_comm *mpi_wrap(MPI_Comm mc, double timeout_s) {
  mpi_comm *c = calloc(1, sizeof *c);
  if (!c) {
    rg_error_set("MPI communicator: out of memory");
    return NULL;
  }
  c->base.iface = &MPI_IFACE;
  c->mc = mc;
  c->timeout_s = timeout_s;
  MPI_Comm_rank(mc, &c->base.rank);
  MPI_Comm_size(mc, &c->base.size);
  return &c->base;
}

static void finalize_at_exit(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

rg_comm *rg_comm_mpi_world(double timeout_s) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
      rg_error_set("MPI_Init failed");
      return NULL;
    }
    atexit(finalize_at_exit);
  }
  if (op_sum_f32 == MPI_OP_NULL) { /* 0: not commutative, so applied in rank order */
    MPI_Op_create(sum_f32, 0, &op_sum_f32);
    MPI_Op_create(sum_f64, 0, &op_sum_f64);
  }
  /* a broken communicator aborts the job itself (mpi_free) */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return mpi_wrap(MPI_COMM_WORLD, timeout_s > 0 ? timeout_s : 600);
}
