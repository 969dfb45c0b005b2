/* bench_sp_context: one long sequence, full fine-tuning, split over the
 * ranks of mpirun (sequence parallelism), against its memory plan.
 *
 *   mpirun -np P bench_sp_context --model PATH --length S [--recompute auto|none|matmuls|full]
 *          [--sp-mode auto|ulysses|allgather] [--budget-gib B] [--longest] [--steps N] [--threads N]
 *
 * Each step: S random tokens (seeded) as one sequence, split over the P
 * ranks (P = 1 without mpirun), next-token cross entropy at every position
 * that has one, mean over the sequence, backward, gradients summed over the
 * ranks, AdamW with clipping at 1.0 (lr 1e-5), every weight trainable. The
 * backend commits its memory when it allocates it, as the trainer does, so
 * a rank's peak RSS is what it holds from the start. --recompute auto takes
 * the policy of least recompute that fits --budget-gib per rank at P ranks
 * (adv_ft/sp_plan.h). Prints the plan (rank 0's), the peak RSS of the
 * largest rank (VmHWM) and its ratio to the plan, and the median step time
 * of --steps timed steps after one untimed one, as tokens/s. --longest
 * (with --budget-gib) first finds the longest sequence, in steps of 64
 * tokens, that a plan at P ranks fits (with the given policy, or any for
 * auto), and runs that.
 * bench/sp_context.sh runs the AutoSP measurement with it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adv_ft/optimizer.h"
#include "adv_ft/sp_plan.h"
#include "bench_util.h"
#include "cli.h"
#include "engine/backward.h"
#include "dist/comm.h"
#include "engine/forward.h"
#include "util/error.h"
#include "util/rng.h"

/* A value in kB of /proc/self/status (e.g. "VmHWM:") as bytes. */
static size_t status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) kb = strtoull(line + strlen(key), NULL, 10);
  if (f) fclose(f);
  return kb * 1024;
}

/* The largest of the ranks' X. */
static double rank_max(rg_comm *c, double x) {
  double *all = calloc((size_t)rg_comm_size(c), sizeof *all);
  double m = x;
  if (all) {
    all[rg_comm_rank(c)] = x;
    if (rg_comm_allreduce_sum_f64(c, all, rg_comm_size(c)) == 0)
      for (int r = 0; r < rg_comm_size(c); r++) m = all[r] > m ? all[r] : m;
  }
  free(all);
  return m;
}

/* The plan of S tokens over P ranks with policy REQ, or (REQ < 0) the one
 * of least recompute that fits BUDGET (recompute full when none does). */
static int plan_at(const rg_model *m, int S, int P, rg_sp_mode mode, int req, double budget, size_t baseline,
                   rg_sp_plan *plan) {
  static const rg_recompute ORDER[] = {RG_RECOMPUTE_NONE, RG_RECOMPUTE_MATMULS, RG_RECOMPUTE_FULL};
  for (int k = 0; k < 3; k++) {
    if (rg_sp_plan_one(m, S, P, mode, req >= 0 ? (rg_recompute)req : ORDER[k], baseline, plan) < 0) return -1;
    if (req >= 0 || (double)plan->total <= budget) break;
  }
  return 0;
}

int main(int argc, char **argv) {
  cli_runtime_env(argv);
  const char *model = NULL, *recompute_arg = "auto", *mode_arg = "auto";
  int S = 1024, threads = 0, steps = 2;
  double budget_gib = 0;
  bool longest = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"length", CLI_INT, &S, "tokens of the sequence (1024)"},
      {"recompute", CLI_STRING, &recompute_arg, "auto (needs --budget-gib), none, matmuls or full"},
      {"sp-mode", CLI_STRING, &mode_arg, "attention over the ranks: auto, ulysses or allgather"},
      {"budget-gib", CLI_FLOAT, &budget_gib, "memory per rank for --recompute auto, GiB"},
      {"longest", CLI_BOOL, &longest, "run the longest sequence a plan fits in --budget-gib"},
      {"steps", CLI_INT, &steps, "timed steps (2)"},
      {"threads", CLI_INT, &threads, "threads per rank (all CPUs / ranks)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH [flags]", pos, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  const bool under_mpi = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
  rg_comm *world = under_mpi ? rg_comm_mpi_world(600) : rg_comm_self();
  if (!world) return cli_fail();
  const int P = rg_comm_size(world), me = rg_comm_rank(world);
  const int recompute_req = strcmp(recompute_arg, "auto") == 0 ? -2 : rg_recompute_parse(recompute_arg);
  const rg_sp_mode mode = strcmp(mode_arg, "ulysses") == 0     ? RG_SP_ULYSSES
                          : strcmp(mode_arg, "allgather") == 0 ? RG_SP_ALLGATHER
                                                               : RG_SP_AUTO;
  if (!model || S < 2 * P || steps < 1 || recompute_req == -1 || ((recompute_req == -2 || longest) && budget_gib <= 0) ||
      (mode == RG_SP_AUTO && strcmp(mode_arg, "auto") != 0)) {
    rg_error_set("bench_sp_context: need --model, --length >= 2 per rank, --steps >= 1, --recompute "
                 "auto|none|matmuls|full (auto with --budget-gib), --sp-mode auto|ulysses|allgather");
    return cli_fail();
  }
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN) / P > 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) / P : 1;
  const size_t baseline = status_kb("VmRSS:");
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  /* the plan, and the policy it picks at P ranks */
  rg_sp_plan plan = {0};
  const double budget = budget_gib * (1 << 30);
  if (longest) { /* the plan's memory grows with S: bisect on multiples of 64 */
    int lo = 0, hi = 1 << 14; /* lo fits (or is 0), hi does not */
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (plan_at(m, 64 * mid, P, mode, recompute_req, budget, baseline, &plan) < 0) return cli_fail();
      if ((double)plan.total <= budget) lo = mid;
      else hi = mid;
    }
    if (lo == 0) {
      rg_error_set("no sequence of 64 tokens or more fits %.2f GiB per rank over %d ranks", budget_gib, P);
      return cli_fail();
    }
    S = 64 * lo;
  }
  if (plan_at(m, S, P, mode, recompute_req, budget, baseline, &plan) < 0) return cli_fail();
  if (recompute_req < 0 && (double)plan.total > budget) {
    rg_error_set("%d tokens over %d ranks do not fit %.2f GiB per rank (recompute full needs %.2f GiB)", S, P,
                 budget_gib, (double)plan.total / (1 << 30));
    return cli_fail();
  }
  if (me == 0) {
    printf("model %s, %d tokens over %d rank%s, %d thread%s each\nplan: ", model, S, P, P > 1 ? "s" : "", threads,
           threads > 1 ? "s" : "");
    rg_sp_plan_print(&plan, stdout);
    fflush(stdout);
  }
  /* the step's objects, memory committed at allocation */
  rg_weights *w = rg_weights_open(m, &(rg_backend_opts){.threads = threads, .commit = true}, RG_WEIGHTS_AUTO);
  const int first = S * me / P, n = S * (me + 1) / P - first;
  const rg_session_opts so = {.max_batch_tokens = (S + P - 1) / P, .max_logit_rows = (S + P - 1) / P, .train = true,
                              .recompute = plan.recompute, .sp = P > 1 ? world : NULL, .sp_mode = mode};
  rg_session *s = w && rg_weights_make_trainable(w) == 0 ? rg_session_new(w, 1, S, &so) : NULL;
  rg_grads *g = s ? rg_grads_new(s) : NULL;
  const rg_adamw_hparams h = rg_adamw_defaults();
  rg_optimizer *o = g ? rg_optimizer_new(w, g, &h) : NULL;
  int32_t *ids = malloc((size_t)S * sizeof *ids), *targets = malloc((size_t)n * sizeof *targets);
  int *seq = calloc((size_t)n, sizeof *seq), *rows = malloc((size_t)n * sizeof *rows);
  float *scale = malloc((size_t)n * sizeof *scale), *losses = malloc((size_t)n * sizeof *losses);
  double *times = malloc((size_t)(steps + 1) * sizeof *times);
  if (!o || !ids || !targets || !seq || !rows || !scale || !losses || !times) {
    if (!o) fprintf(stderr, "rank %d: %s\n", me, rg_error_get());
    return cli_fail();
  }
  uint64_t r = 42;
  for (int i = 0; i < S; i++) ids[i] = (int32_t)(rg_splitmix64(&r) % (uint64_t)m->cfg.vocab_size);
  for (int i = 0; i < n; i++) {
    rows[i] = i;
    targets[i] = first + i + 1 < S ? ids[first + i + 1] : 0;
    scale[i] = first + i + 1 < S ? 1.0f / (float)(S - 1) : 0.0f;
  }
  for (int k = 0; k <= steps; k++) {
    const double t0 = bench_now_s();
    rg_session_reset(s);
    rg_grads_zero(g);
    if (rg_session_eval(s, ids + first, seq, n, rows, n, NULL) < 0 || rg_session_loss_ce(s, targets, scale, losses) < 0 ||
        rg_session_backward(s, g, NULL) < 0 || rg_grads_allreduce(g, world) < 0 ||
        rg_optimizer_step(o, 1e-5, 1.0, NULL) < 0) {
      fprintf(stderr, "rank %d: %s\n", me, rg_error_get());
      return cli_fail();
    }
    times[k] = rank_max(world, bench_now_s() - t0);
  }
  const double peak = rank_max(world, (double)status_kb("VmHWM:"));
  const double median = bench_median(times + 1, steps);
  if (me == 0)
    printf("measured peak RSS (largest rank): %.3f GiB, plan %.3f GiB, measured / plan %.3f\n"
           "step: %.3f s (median of %d after one untimed), %.1f tokens/s\n",
           peak / (1 << 30), (double)plan.total / (1 << 30), peak / (double)plan.total, median, steps, S / median);
  free(ids), free(targets), free(seq), free(rows), free(scale), free(losses), free(times);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  if (world != rg_comm_self()) rg_comm_free(world);
  return 0;
}
