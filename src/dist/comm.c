/* comm.c: the one-rank communicator and the group split (comm.h). */
#include "dist/comm.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void self_free(rg_comm *c) { (void)c; }

static rg_comm *self_split(rg_comm *c, int color, int key) { return c; }

static int self_allgather_int(rg_comm *c, int *all, int mine) {
  all[0] = mine;
  return 0;
}

static int self_allgatherv_int(rg_comm *c, int *all, const int *counts, const int *mine) {
  if (all != mine) memmove(all, mine, (size_t)counts[0] * sizeof *all);
  return 0;
}

static int self_allgatherv(rg_comm *c, float *all, const int *counts, const float *mine) {
  if (all != mine) memmove(all, mine, (size_t)counts[0] * sizeof *all);
  return 0;
}

static int self_reduce_scatterv(rg_comm *c, float *mine, const float *all, const int *counts) {
  if (all != mine) memmove(mine, all, (size_t)counts[0] * sizeof *mine);
  return 0;
}

static int self_alltoallv(rg_comm *c, float *recv, const int *recv_counts, const float *send,
                          const int *send_counts) {
  if (recv != send) memmove(recv, send, (size_t)send_counts[0] * sizeof *recv);
  return 0;
}

static int self_reduce_scatter_block(rg_comm *c, float *mine, const float *all, size_t count) {
  if (all != mine) memmove(mine, all, count * sizeof *mine);
  return 0;
}

static int self_allgather(rg_comm *c, float *all, const float *mine, size_t count) {
  if (all != mine) memmove(all, mine, count * sizeof *all);
  return 0;
}

static int self_allreduce_sum(rg_comm *c, float *x, size_t n) { return 0; }
static int self_allreduce_sum_f64(rg_comm *c, double *x, int n) { return 0; }

static const rg_comm_iface SELF_IFACE = {
    .name = "self",
    .free = self_free,
    .split = self_split,
    .allgather_int = self_allgather_int,
    .allgatherv_int = self_allgatherv_int,
    .allgatherv = self_allgatherv,
    .reduce_scatterv = self_reduce_scatterv,
    .alltoallv = self_alltoallv,
    .reduce_scatter_block = self_reduce_scatter_block,
    .allgather = self_allgather,
    .allreduce_sum = self_allreduce_sum,
    .allreduce_sum_f64 = self_allreduce_sum_f64,
};

rg_comm *rg_comm_self(void) {
  static rg_comm self = {.iface = &SELF_IFACE, .rank = 0, .size = 1};
  return &self;
}

/* ---------------------------------------------------------------- plan */

static void plan_free(rg_comm *c) { free(c); }
static rg_comm *plan_split(rg_comm *c, int color, int key) {
  rg_error_set("a plan communicator cannot be split");
  return NULL;
}
static int plan_refuse(void) { return rg_error_set("a plan communicator moves no data"); }
static int plan_allgather_int(rg_comm *c, int *all, int mine) { return plan_refuse(); }
static int plan_allgatherv_int(rg_comm *c, int *all, const int *counts, const int *mine) { return plan_refuse(); }
static int plan_allgatherv(rg_comm *c, float *all, const int *counts, const float *mine) { return plan_refuse(); }
static int plan_reduce_scatterv(rg_comm *c, float *mine, const float *all, const int *counts) { return plan_refuse(); }
static int plan_alltoallv(rg_comm *c, float *recv, const int *recv_counts, const float *send, const int *send_counts) {
  return plan_refuse();
}
static int plan_reduce_scatter_block(rg_comm *c, float *mine, const float *all, size_t count) { return plan_refuse(); }
static int plan_allgather(rg_comm *c, float *all, const float *mine, size_t count) { return plan_refuse(); }
static int plan_allreduce_sum(rg_comm *c, float *x, size_t n) { return plan_refuse(); }
static int plan_allreduce_sum_f64(rg_comm *c, double *x, int n) { return plan_refuse(); }

static const rg_comm_iface PLAN_IFACE = {
    .name = "plan",
    .free = plan_free,
    .split = plan_split,
    .allgather_int = plan_allgather_int,
    .allgatherv_int = plan_allgatherv_int,
    .allgatherv = plan_allgatherv,
    .reduce_scatterv = plan_reduce_scatterv,
    .alltoallv = plan_alltoallv,
    .reduce_scatter_block = plan_reduce_scatter_block,
    .allgather = plan_allgather,
    .allreduce_sum = plan_allreduce_sum,
    .allreduce_sum_f64 = plan_allreduce_sum_f64,
};

rg_comm *rg_comm_plan(int size) {
  rg_comm *c = size >= 1 ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    rg_error_set(size >= 1 ? "out of memory" : "a communicator of %d ranks", size);
    return NULL;
  }
  *c = (rg_comm){.iface = &PLAN_IFACE, .rank = 0, .size = size};
  return c;
}

#if !defined(REFGEO_GPU_CUDA)
rg_comm *rg_comm_nccl(rg_comm *host, rg_backend *be, double timeout_s) {
  rg_error_set("this build has no NCCL communicator (a CUDA build has)");
  return NULL;
}
#endif

/* ---------------------------------------------------------------- split */

rg_comm *rg_comm_split(rg_comm *world, int group, rg_comm **across) {
  if (across) *across = NULL;
  if (group < 1 || world->size % group != 0) {
    rg_error_set("sequence-parallel degree %d does not divide the %d ranks", group, world->size);
    return NULL;
  }
  rg_comm *in = world->iface->split(world, world->rank / group, world->rank % group);
  if (!in) return NULL;
  if (across && !(*across = world->iface->split(world, world->rank % group, world->rank / group))) {
    rg_comm_free(in);
    return NULL;
  }
  return in;
}
