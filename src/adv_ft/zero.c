/* zero.c: ZeRO stages 1 and 2 over the data-parallel ranks (zero.h). */
#include "adv_ft/zero.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Floats [at, at + n) of parameter PARAM sit at FLAT in their bucket's view. */
typedef struct {
  int param;
  size_t at, n, flat;
} piece;

typedef struct {
  int block;          /* the transformer block of its parameters; -1: the rest */
  size_t n, shard;    /* its floats, and one rank's share of them padded (n <= W * shard) */
  size_t shard_at;    /* where its shard starts in a rank's shard */
  int first, n_pieces;
} bucket;

struct rg_zero {
  rg_weights *w;
  rg_grads *g;
  rg_backend *be;
  int stage, W, rank;
  rg_comm *dp, *sp;
  bucket *buckets;
  int n_buckets;
  piece *pieces;
  int n_pieces;
  size_t shard;      /* floats of this rank's shard */
  size_t most;       /* the largest bucket's W * shard */
  rg_buf *stage_buf; /* one bucket's W * shard floats: a reduction's input, a gather's output */
  rg_buf *recv;      /* stage 2: one bucket's shard of one micro-batch's sum */
  rg_buf *grad;      /* stage 2: the gradient shard */
};

static size_t param_len(const rg_weights *w, int i) { return (size_t)rg_tensor_nelems(rg_weights_tensor(w, i)); }

/* Cuts the parameters into buckets (zero.h). Two passes: COUNT_ONLY
 * counts the buckets and pieces; the second fills them. */
static void cut(rg_zero *z, bool count_only) {
  const int P = rg_weights_count(z->w);
  int nb = 0, np = 0;
  bucket *cur = NULL, counting;
  size_t shard_at = 0;
  for (int i = 0; i < P; i++) {
    const int block = rg_weights_param_block(z->w, i);
    for (size_t at = 0, len = param_len(z->w, i); at < len;) {
      const bool open = cur && cur->block == block && cur->n < RG_ZERO_BUCKET_FLOATS;
      if (!open) {
        if (cur) shard_at += cur->shard;
        cur = count_only ? &counting : &z->buckets[nb];
        *cur = (bucket){.block = block, .shard_at = shard_at, .first = np};
        nb++;
      }
      const size_t room = RG_ZERO_BUCKET_FLOATS - cur->n, n = len - at < room ? len - at : room;
      if (!count_only) z->pieces[np] = (piece){.param = i, .at = at, .n = n, .flat = cur->n};
      np++;
      cur->n_pieces++;
      cur->n += n;
      cur->shard = (cur->n + (size_t)z->W - 1) / (size_t)z->W;
      at += n;
    }
  }
  if (cur) shard_at += cur->shard;
  z->n_buckets = nb;
  z->n_pieces = np;
  z->shard = shard_at;
}

static int zero_hook(void *ctx, int block);

rg_zero *rg_zero_new(rg_weights *w, rg_grads *g, const rg_zero_opts *o) {
  if (o->stage < 1 || o->stage > 2 || !o->dp) {
    rg_error_set("ZeRO: stage %d over %s", o->stage, o->dp ? "its ranks" : "no data-parallel ranks");
    return NULL;
  }
  rg_zero *z = calloc(1, sizeof *z);
  if (!z) {
    rg_error_set("ZeRO: out of memory");
    return NULL;
  }
  *z = (rg_zero){.w = w, .g = g, .be = rg_weights_backend(w), .stage = o->stage, .W = rg_comm_size(o->dp),
                 .rank = rg_comm_rank(o->dp), .dp = o->dp, .sp = o->sp};
  cut(z, true);
  z->buckets = calloc((size_t)z->n_buckets + 1, sizeof *z->buckets);
  z->pieces = calloc((size_t)z->n_pieces + 1, sizeof *z->pieces);
  if (!z->buckets || !z->pieces) {
    rg_zero_free(z);
    rg_error_set("ZeRO: out of memory");
    return NULL;
  }
  cut(z, false);
  size_t most_shard = 1;
  for (int b = 0; b < z->n_buckets; b++)
    if (z->buckets[b].shard > most_shard) most_shard = z->buckets[b].shard;
  z->most = most_shard * (size_t)z->W;
  int rc = (z->stage_buf = rg_buf_new(z->be, z->most)) ? 0 : -1;
  if (rc == 0 && z->stage == 2 && (!(z->recv = rg_buf_new(z->be, most_shard)) || !(z->grad = rg_buf_new(z->be, z->shard))))
    rc = -1;
  if (rc < 0) {
    rg_error_prefix("ZeRO buffers");
    rg_zero_free(z);
    return NULL;
  }
  /* written once now, as the optimizer's moments are (optimizer.c) */
  rg_buf_zero(z->be, z->stage_buf, 0, z->most);
  if (z->grad) rg_buf_zero(z->be, z->grad, 0, z->shard);
  if (z->stage == 2) rg_grads_set_block_hook(g, zero_hook, z);
  return z;
}

void rg_zero_free(rg_zero *z) {
  if (!z) return;
  rg_buf_free(z->be, z->stage_buf);
  rg_buf_free(z->be, z->recv);
  rg_buf_free(z->be, z->grad);
  free(z->buckets);
  free(z->pieces);
  free(z);
}

int rg_zero_stage(const rg_zero *z) { return z->stage; }
int rg_zero_rank(const rg_zero *z) { return z->rank; }
int rg_zero_ranks(const rg_zero *z) { return z->W; }
size_t rg_zero_shard_floats(const rg_zero *z) { return z->shard; }
size_t rg_zero_bytes(const rg_zero *z) {
  return (z->most + (z->recv ? z->recv->n : 0) + (z->grad ? z->grad->n : 0)) * sizeof(float);
}

/* A view of N floats of B from AT (never freed). */
static rg_buf view(const rg_buf *b, size_t at, size_t n) { return (rg_buf){.n = n, .data = b->data + at}; }

/* The part of piece P inside this rank's shard of its bucket B: *lo and
 * *hi in the bucket's flat view; false when they do not meet. */
static bool own_part(const rg_zero *z, const bucket *b, const piece *p, size_t *lo, size_t *hi) {
  const size_t mine_lo = (size_t)z->rank * b->shard, mine_hi = mine_lo + b->shard;
  *lo = p->flat > mine_lo ? p->flat : mine_lo;
  *hi = p->flat + p->n < mine_hi ? p->flat + p->n : mine_hi;
  return *lo < *hi;
}

void rg_zero_begin(rg_zero *z) {
  if (z->grad) rg_buf_zero(z->be, z->grad, 0, z->shard);
}

/* Stage 2: bucket B's gradient (this rank's share of this micro-batch)
 * reduce-scattered over the ranks, this rank's shard of the sum added to
 * the gradient shard. */
static int reduce_bucket(rg_zero *z, const bucket *b) {
  const size_t padded = b->shard * (size_t)z->W;
  rg_buf_zero(z->be, z->stage_buf, b->n, padded - b->n);
  for (int k = 0; k < b->n_pieces; k++) {
    const piece *p = &z->pieces[b->first + k];
    rg_buf_copy(z->be, z->stage_buf, p->flat, rg_grads_buf(z->g, p->param), p->at, p->n);
  }
  if (rg_backend_status(z->be) < 0 || rg_comm_reduce_scatter_block(z->dp, z->recv->data, z->stage_buf->data, b->shard) < 0)
    return -1;
  rg_buf dst = view(z->grad, b->shard_at, b->shard), got = view(z->recv, 0, b->shard);
  rg_op_add(z->be, &dst, &dst, &got, b->shard);
  return 0;
}

/* The block hook of stage 2 (backward.h): every bucket of BLOCK reduced,
 * then the block's gradient buffers zeroed for the next block, which
 * shares them. */
static int zero_hook(void *ctx, int block) {
  rg_zero *z = ctx;
  for (int b = 0; b < z->n_buckets; b++)
    if (z->buckets[b].block == block && reduce_bucket(z, &z->buckets[b]) < 0)
      return rg_error_prefix("ZeRO-2: reducing the gradient of block %d over %d ranks", block, z->W);
  for (int i = 0; i < rg_grads_count(z->g); i++)
    if (rg_weights_param_block(z->w, i) == block) rg_buf_zero(z->be, rg_grads_buf(z->g, i), 0, param_len(z->w, i));
  return rg_backend_status(z->be) < 0 ? rg_error_prefix("ZeRO-2") : 0;
}

int rg_zero_end_grads(rg_zero *z) {
  if (z->stage != 2 || !z->sp) return 0;
  if (rg_backend_status(z->be) < 0 || rg_comm_allreduce_sum(z->sp, z->grad->data, z->shard) < 0)
    return rg_error_prefix("ZeRO-2: summing the gradient shard over the sequence-parallel group");
  return 0;
}

int rg_zero_sum_squares(rg_zero *z, double *ss) {
  *ss = 0;
  if (z->stage == 1) { /* the whole gradient is here: as the optimizer sums it without ZeRO */
    for (int i = 0; i < rg_grads_count(z->g); i++) {
      double part;
      if (rg_op_sum_squares(z->be, rg_grads_buf(z->g, i), &part) < 0) return -1;
      *ss += part;
    }
    return 0;
  }
  if (rg_op_sum_squares(z->be, z->grad, ss) < 0) return -1;
  return rg_comm_allreduce_sum_f64(z->dp, ss, 1) < 0 ? rg_error_prefix("ZeRO-2: the gradient norm") : 0;
}

/* The gradient of flat floats [lo, hi) of bucket B, piece P. */
static rg_buf grad_of(rg_zero *z, const bucket *b, const piece *p, size_t lo, size_t hi) {
  if (z->stage == 2) return view(z->grad, b->shard_at + lo - (size_t)z->rank * b->shard, hi - lo);
  return view(rg_grads_buf(z->g, p->param), p->at + (lo - p->flat), hi - lo);
}

/* Bucket B's shards gathered from every rank into the parameters. */
static int gather_bucket(rg_zero *z, const bucket *b) {
  const size_t mine = (size_t)z->rank * b->shard;
  rg_buf params[1];
  for (int k = 0; k < b->n_pieces; k++) { /* this rank's floats into its block of the staging buffer */
    const piece *p = &z->pieces[b->first + k];
    size_t lo, hi;
    if (!own_part(z, b, p, &lo, &hi)) continue;
    if (rg_bweight_f32_view(z->be, rg_weights_param(z->w, p->param), params) < 0) return -1;
    rg_buf_copy(z->be, z->stage_buf, lo, params, p->at + (lo - p->flat), hi - lo);
  }
  if (rg_backend_status(z->be) < 0 ||
      rg_comm_allgather(z->dp, z->stage_buf->data, z->stage_buf->data + mine, b->shard) < 0)
    return -1;
  for (int k = 0; k < b->n_pieces; k++) {
    const piece *p = &z->pieces[b->first + k];
    if (rg_bweight_f32_view(z->be, rg_weights_param(z->w, p->param), params) < 0) return -1;
    rg_buf_copy(z->be, params, p->at, z->stage_buf, p->flat, p->n);
  }
  return rg_backend_status(z->be);
}

int rg_zero_adamw(rg_zero *z, rg_buf *m, rg_buf *v, const rg_adamw_step *st) {
  for (int bi = 0; bi < z->n_buckets; bi++) {
    const bucket *b = &z->buckets[bi];
    for (int k = 0; k < b->n_pieces; k++) {
      const piece *p = &z->pieces[b->first + k];
      size_t lo, hi;
      if (!own_part(z, b, p, &lo, &hi)) continue;
      const size_t at = b->shard_at + lo - (size_t)z->rank * b->shard;
      rg_buf gr = grad_of(z, b, p, lo, hi), mv = view(m, at, hi - lo), vv = view(v, at, hi - lo);
      rg_adamw_step s = *st;
      s.offset = p->at + (lo - p->flat);
      s.count = hi - lo;
      rg_op_adamw(z->be, rg_weights_param(z->w, p->param), &gr, &mv, &vv, &s);
    }
  }
  if (rg_backend_status(z->be) < 0) return rg_error_prefix("ZeRO: AdamW on the shard");
  for (int bi = 0; bi < z->n_buckets; bi++)
    if (gather_bucket(z, &z->buckets[bi]) < 0)
      return rg_error_prefix("ZeRO: gathering the updated parameters over %d ranks", z->W);
  return 0;
}
