/* comm_nccl.cu: the communicator of ranks that compute on GPUs (comm.h):
 * NCCL carries the float collectives, which read and write device buffers,
 * on the GPU backend's stream, so they are ordered with its kernels; the
 * collectives on host arrays (ints, the doubles of loss sums) and splitting
 * go to the MPI communicator it wraps, which also hands NCCL its unique id.
 *
 * NCCL is opened at run time (libnccl.so.2: the toolkit's, or the one
 * PyTorch's wheels bring), as cuBLAS is (backend/gpu/gemm.cu). Every
 * collective waits for its stream with the MPI communicator's deadline: a
 * rank that never arrives aborts the NCCL communicator and is an error, as
 * under MPI. Variable counts, which NCCL's collectives lack, are grouped
 * point-to-point calls (broadcasts, reductions, sends and receives): rank
 * r's block always comes from, or is summed at, rank r, in a fixed order.
 *
 * Not yet run on a GPU (none has been lent to this project's sessions). */
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/gpu/gpu_internal.h"

extern "C" {
#include "dist/comm.h"
}

static struct {
  bool tried;
  void *lib;
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*abort)(ncclComm_t);
  ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  const char *(*error_string)(ncclResult_t);
} nccl;

static int open_nccl(void) {
  if (nccl.tried) return nccl.lib ? 0 : rg_error_set("NCCL was not found");
  nccl.tried = true;
  const char *names[] = {getenv("REFGEO_NCCL"), "libnccl.so.2", "libnccl.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !nccl.lib; i++)
    if (names[i] && *names[i]) nccl.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!nccl.lib) return rg_error_set("NCCL was not found (libnccl.so.2 on the library path, or REFGEO_NCCL=PATH)");
  struct {
    void **fn;
    const char *name;
  } syms[] = {{(void **)&nccl.get_unique_id, "ncclGetUniqueId"}, {(void **)&nccl.init_rank, "ncclCommInitRank"},
              {(void **)&nccl.destroy, "ncclCommDestroy"},      {(void **)&nccl.abort, "ncclCommAbort"},
              {(void **)&nccl.async_error, "ncclCommGetAsyncError"}, {(void **)&nccl.all_reduce, "ncclAllReduce"},
              {(void **)&nccl.reduce_scatter, "ncclReduceScatter"}, {(void **)&nccl.all_gather, "ncclAllGather"},
              {(void **)&nccl.broadcast, "ncclBroadcast"},      {(void **)&nccl.reduce, "ncclReduce"},
              {(void **)&nccl.send, "ncclSend"},                {(void **)&nccl.recv, "ncclRecv"},
              {(void **)&nccl.group_start, "ncclGroupStart"},   {(void **)&nccl.group_end, "ncclGroupEnd"},
              {(void **)&nccl.error_string, "ncclGetErrorString"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].fn = dlsym(nccl.lib, syms[i].name))) {
      dlclose(nccl.lib);
      nccl.lib = NULL;
      return rg_error_set("NCCL lacks %s", syms[i].name);
    }
  return 0;
}

typedef struct {
  rg_comm base;
  rg_comm *host;  /* the MPI communicator of the same ranks (borrowed) */
  rg_backend *be; /* whose stream the collectives run on (borrowed) */
  ncclComm_t nc;
  double timeout_s;
  bool broken;
} nccl_comm;

static nccl_comm *nc_of(rg_comm *c) { return (nccl_comm *)c; }
static cudaStream_t stream_of(nccl_comm *c) { return gpu(c->be)->stream; }

/* Checks a queued NCCL call, then waits for the stream until the deadline,
 * polling NCCL's asynchronous error. 0, or -1 with the error set. */
static int finish(nccl_comm *c, ncclResult_t queued, const char *what) {
  if (queued != ncclSuccess) return rg_error_set("NCCL %s: %s", what, nccl.error_string(queued));
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_of(c));
    if (e == cudaSuccess) return 0;
    if (e != cudaErrorNotReady) return rg_error_set("NCCL %s: %s", what, cudaGetErrorString(e));
    ncclResult_t async = ncclSuccess;
    nccl.async_error(c->nc, &async);
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double waited = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
    if (async != ncclSuccess || waited > c->timeout_s) {
      c->broken = true;
      nccl.abort(c->nc);
      return async != ncclSuccess
                 ? rg_error_set("NCCL %s on rank %d: %s", what, c->base.rank, nccl.error_string(async))
                 : rg_error_set("NCCL %s on rank %d: no answer from the other %d ranks within %.0f s", what,
                                c->base.rank, c->base.size - 1, c->timeout_s);
    }
  }
}

static void nccl_free(rg_comm *cc) {
  nccl_comm *c = nc_of(cc);
  if (!c->broken) nccl.destroy(c->nc);
  free(c);
}

static rg_comm *nccl_split(rg_comm *cc, int color, int key) {
  rg_error_set("split the MPI communicator, then wrap each part (rg_comm_nccl)");
  return NULL;
}

/* the host collectives: the MPI communicator's */
static int nccl_allgather_int(rg_comm *c, int *all, int mine) { return rg_comm_allgather_int(nc_of(c)->host, all, mine); }
static int nccl_allgatherv_int(rg_comm *c, int *all, const int *counts, const int *mine) {
  return rg_comm_allgatherv_int(nc_of(c)->host, all, counts, mine);
}
static int nccl_allreduce_sum_f64(rg_comm *c, double *x, int n) { return rg_comm_allreduce_sum_f64(nc_of(c)->host, x, n); }

static int nccl_allgatherv(rg_comm *cc, float *all, const int *counts, const float *mine) {
  nccl_comm *c = nc_of(cc);
  size_t at = 0;
  ncclResult_t r = nccl.group_start();
  for (int k = 0; r == ncclSuccess && k < c->base.size; at += (size_t)counts[k], k++)
    if (counts[k] > 0)
      r = nccl.broadcast(k == c->base.rank ? mine : all + at, all + at, (size_t)counts[k], ncclFloat32, k, c->nc,
                         stream_of(c));
  const ncclResult_t end = nccl.group_end();
  return finish(c, r != ncclSuccess ? r : end, "all-gather");
}

static int nccl_reduce_scatterv(rg_comm *cc, float *mine, const float *all, const int *counts) {
  nccl_comm *c = nc_of(cc);
  size_t at = 0;
  ncclResult_t r = nccl.group_start();
  for (int k = 0; r == ncclSuccess && k < c->base.size; at += (size_t)counts[k], k++)
    if (counts[k] > 0)
      r = nccl.reduce(all + at, mine, (size_t)counts[k], ncclFloat32, ncclSum, k, c->nc, stream_of(c));
  const ncclResult_t end = nccl.group_end();
  return finish(c, r != ncclSuccess ? r : end, "reduce-scatter");
}

static int nccl_alltoallv(rg_comm *cc, float *recv, const int *recv_counts, const float *send,
                          const int *send_counts) {
  nccl_comm *c = nc_of(cc);
  size_t sat = 0, rat = 0;
  ncclResult_t r = nccl.group_start();
  for (int k = 0; r == ncclSuccess && k < c->base.size; sat += (size_t)send_counts[k], rat += (size_t)recv_counts[k], k++) {
    if (send_counts[k] > 0) r = nccl.send(send + sat, (size_t)send_counts[k], ncclFloat32, k, c->nc, stream_of(c));
    if (r == ncclSuccess && recv_counts[k] > 0)
      r = nccl.recv(recv + rat, (size_t)recv_counts[k], ncclFloat32, k, c->nc, stream_of(c));
  }
  const ncclResult_t end = nccl.group_end();
  return finish(c, r != ncclSuccess ? r : end, "all-to-all");
}

/* Equal blocks: NCCL's own collectives (ncclAllGather is in place when
 * MINE is ALL's block of this rank, as NCCL documents). */
static int nccl_reduce_scatter_block(rg_comm *cc, float *mine, const float *all, size_t count) {
  nccl_comm *c = nc_of(cc);
  return finish(c, nccl.reduce_scatter(all, mine, count, ncclFloat32, ncclSum, c->nc, stream_of(c)), "reduce-scatter");
}

static int nccl_allgather(rg_comm *cc, float *all, const float *mine, size_t count) {
  nccl_comm *c = nc_of(cc);
  return finish(c, nccl.all_gather(mine, all, count, ncclFloat32, c->nc, stream_of(c)), "all-gather");
}

static int nccl_allreduce_sum(rg_comm *cc, float *x, size_t n) {
  nccl_comm *c = nc_of(cc);
  return finish(c, nccl.all_reduce(x, x, n, ncclFloat32, ncclSum, c->nc, stream_of(c)), "all-reduce");
}

static const rg_comm_iface NCCL_IFACE = {
    "nccl",           nccl_free,       nccl_split,           nccl_allgather_int, nccl_allgatherv_int, nccl_allgatherv,
    nccl_reduce_scatterv, nccl_alltoallv, nccl_reduce_scatter_block, nccl_allgather, nccl_allreduce_sum,
    nccl_allreduce_sum_f64,
};

extern "C" rg_comm *rg_comm_nccl(rg_comm *host, rg_backend *be, double timeout_s) {
  if (strcmp(rg_backend_name(be), RG_GPU_VENDOR_NAME) != 0) {
    rg_error_set("an NCCL communicator needs the %s backend, not %s", RG_GPU_VENDOR_NAME, rg_backend_name(be));
    return NULL;
  }
  if (open_nccl() < 0) return NULL;
  /* rank 0's unique id to every rank, through the MPI communicator */
  enum { ID_INTS = (sizeof(ncclUniqueId) + sizeof(int) - 1) / sizeof(int) };
  int id_ints[ID_INTS] = {0}, mine[ID_INTS] = {0}, *counts = (int *)calloc((size_t)host->size, sizeof *counts);
  if (!counts) {
    rg_error_set("out of memory");
    return NULL;
  }
  counts[0] = ID_INTS;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  int rc = host->rank == 0 && nccl.get_unique_id(&id) != ncclSuccess ? rg_error_set("NCCL: no unique id") : 0;
  memcpy(mine, &id, sizeof id);
  /* every rank joins the gather, even one that failed, so that none waits */
  if (rg_comm_allgatherv_int(host, id_ints, counts, mine) < 0 && rc == 0) rc = -1;
  free(counts);
  memcpy(&id, id_ints, sizeof id);
  nccl_comm *c = rc == 0 ? (nccl_comm *)calloc(1, sizeof *c) : NULL;
  if (rc == 0 && !c) rg_error_set("out of memory");
  if (!c) return NULL;
  *c = nccl_comm{{&NCCL_IFACE, host->rank, host->size}, host, be, NULL, timeout_s > 0 ? timeout_s : 600, false};
  const ncclResult_t r = nccl.init_rank(&c->nc, host->size, id, host->rank);
  if (r != ncclSuccess) {
    rg_error_set("NCCL: rank %d could not join: %s", host->rank, nccl.error_string(r));
    free(c);
    return NULL;
  }
  return &c->base;
}
