/* sp_plan.c: per-rank memory of a long-context step and the SP planner (sp_plan.h). */
#include "adv_ft/sp_plan.h"

#include <string.h>

#include "adv_ft/adamw.h"
#include "adv_ft/optimizer.h"
#include "backend/plan.h"
#include "engine/backward.h"
#include "dist/comm.h"
#include "engine/session.h"
#include "engine/weights.h"
#include "util/error.h"

static const char *const RECOMPUTE_NAMES[] = {"none", "full", "matmuls"};

const char *rg_recompute_name(rg_recompute r) {
  return (unsigned)r <= RG_RECOMPUTE_MATMULS ? RECOMPUTE_NAMES[r] : "?";
}

int rg_recompute_parse(const char *name) {
  for (int r = 0; r <= RG_RECOMPUTE_MATMULS; r++)
    if (strcmp(name, RECOMPUTE_NAMES[r]) == 0) return r;
  return -1;
}

/* Multiply-adds a rank's backward repeats: per layer and local token, the
 * projections it reruns, and under FULL attention's two products over the
 * keys a query sees (S/2 on average in a causal sequence). */
static double recompute_macs(const rg_config *c, int length, int local, rg_recompute r) {
  const double d = c->d_model, q = (double)c->n_heads * c->head_dim, kv = (double)c->n_kv_heads * c->head_dim;
  const double f = c->d_ff;
  double per_token = 0;
  if (r != RG_RECOMPUTE_NONE) per_token = q * d + 2 * d * f;              /* o_proj, gate, up */
  if (r == RG_RECOMPUTE_FULL) per_token += d * (q + 2 * kv) + length * q; /* q, k, v; QK^T and PV */
  return per_token * local * c->n_layers;
}

int rg_sp_plan_one(const rg_model *m, int length, int sp, rg_sp_mode mode, rg_recompute recompute, size_t baseline,
                   rg_sp_plan *out) {
  if (length < sp || sp < 1) return rg_error_set("plan: %d tokens over %d ranks", length, sp);
  const int local = (length + sp - 1) / sp;
  rg_comm *comm = rg_comm_plan(sp);
  rg_weights *w = comm ? rg_weights_open(m, &(rg_backend_opts){.name = "plan-cpu", .threads = 1}, RG_WEIGHTS_AUTO)
                       : NULL;
  rg_session *s = NULL;
  rg_grads *g = NULL;
  rg_optimizer *o = NULL;
  const rg_session_opts so = {.max_batch_tokens = local, .max_logit_rows = local, .train = true,
                              .recompute = recompute, .sp = comm, .sp_mode = mode};
  const rg_adamw_hparams h = rg_adamw_defaults();
  int rc = w && rg_weights_make_trainable(w) == 0 && (s = rg_session_new(w, 1, length, &so)) &&
                   (g = rg_grads_new(s)) && (o = rg_optimizer_new(w, g, &h))
               ? 0
               : -1;
  if (rc == 0) {
    rg_session_bytes sb;
    rg_session_memory(s, &sb);
    rg_backend *be = rg_weights_backend(w);
    *out = (rg_sp_plan){.length = length, .sp = sp, .recompute = recompute, .baseline = baseline};
    /* what the plan backend counted: weights, session, gradients, moments */
    for (int tag = 0; tag < RG_PLAN_TAGS; tag++) out->backend += rg_plan_bytes(be, tag);
    /* the step's ids, targets, rows and per-row scale and losses */
    out->host = sb.host + (size_t)local * (3 * sizeof(int32_t) + 2 * sizeof(float));
    for (int i = 0; i < rg_weights_export_count(w); i++) out->file_map += rg_weights_export_tensor(w, i)->nbytes;
    /* the collectives' scratch: MPI's copy of one all-reduce piece */
    if (sp > 1) out->host += (size_t)RG_COMM_PIECE_FLOATS * sizeof(float);
    out->total = out->backend + out->host + out->file_map + out->baseline;
    const bool ulysses = sp > 1 && (mode == RG_SP_ULYSSES || (mode == RG_SP_AUTO && m->cfg.n_heads % sp == 0 &&
                                                               m->cfg.n_kv_heads % sp == 0));
    out->mode = ulysses ? RG_SP_ULYSSES : RG_SP_ALLGATHER;
    out->recompute_macs = recompute_macs(&m->cfg, length, local, recompute);
  }
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_comm_free(comm);
  return rc < 0 ? rg_error_prefix("plan of %d tokens over %d ranks", length, sp) : 0;
}

int rg_sp_plan_choose(const rg_model *m, int length, double budget, int world, size_t baseline, rg_sp_plan *best,
                      rg_sp_plan *out_all, int *n_all) {
  static const rg_recompute ORDER[] = {RG_RECOMPUTE_NONE, RG_RECOMPUTE_MATMULS, RG_RECOMPUTE_FULL};
  bool found = false;
  rg_sp_plan smallest = {0};
  int n = 0;
  for (int sp = 1; sp <= world && sp <= length; sp++) {
    if (world % sp) continue;
    for (int k = 0; k < 3; k++) {
      rg_sp_plan p;
      if (rg_sp_plan_one(m, length, sp, RG_SP_AUTO, ORDER[k], baseline, &p) < 0) return -1;
      if (out_all) out_all[n] = p;
      n++;
      if (!smallest.total || p.total < smallest.total) smallest = p;
      /* least recompute, then fewest ranks (sp rises in this loop) */
      if ((double)p.total <= budget && (!found || p.recompute_macs < best->recompute_macs)) *best = p, found = true;
    }
  }
  if (n_all) *n_all = n;
  if (!found)
    return rg_error_set("%d tokens do not fit in %.2f GiB per rank on %d ranks: the smallest plan (%d ranks, "
                        "recompute %s) needs %.2f GiB",
                        length, budget / (1 << 30), world, smallest.sp, rg_recompute_name(smallest.recompute),
                        (double)smallest.total / (1 << 30));
  return 0;
}

void rg_sp_plan_print(const rg_sp_plan *p, FILE *out) {
  fprintf(out, "%7d tokens, %d rank%s, %-13s, recompute %-7s: %7.3f GiB per rank, %.3g recomputed MACs\n", p->length,
          p->sp, p->sp > 1 ? "s" : " ", p->sp == 1 ? "-" : p->mode == RG_SP_ULYSSES ? "Ulysses" : "all-gather KV",
          rg_recompute_name(p->recompute), (double)p->total / (1 << 30), p->recompute_macs);
}
