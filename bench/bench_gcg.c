/* bench_gcg: the time of HarmBench's GCG step on one behavior, split into its
 * parts, as `refgeo attack` runs it (src/adv_ft/gcg.h): the token gradient,
 * the sampling of --width candidates, and the candidates' losses (their
 * common prefix run once per step, the candidates in batches of --batch).
 *
 *   bench_gcg --model PATH --behavior TEXT --target TEXT [--width 512]
 *             [--steps 3] [--batch 32] [--threads N] [--screen K [--audit]]
 *             [--no-retokenize-filter]
 *
 * HarmBench's re-tokenization filter runs after the sampling, as in
 * `refgeo attack` (rg_gcg_retokenizes, timed on its own line): only the
 * candidates it keeps are evaluated, and the candidate losses per second
 * count those. --no-retokenize-filter evaluates all, as R2D2's inner GCG.
 *
 * --screen K screens the candidates (rg_gcg_screened_losses): all on 8-bit
 * activations (RG_WEIGHTS_TILED_Q8), the K best again in float32. --audit
 * then also evaluates every candidate in float32, untimed, and prints per
 * step where the exhaustive argmin ranked in the screen, the float32 loss of
 * the screen's choice and of the exhaustive argmin. Screened, the GFLOP/s
 * printed are the exhaustive step's flops over the screened step's time
 * (float32-equivalent, not a share of any peak).
 *
 * The test case is laid out as `refgeo attack` lays it out: the chat
 * template's text before the instruction, BEHAVIOR + " ", a suffix of 20
 * "!" tokens, the template's text after it, TARGET. Each step takes the
 * argmin candidate, as HarmBench does. Prints each step's parts and the
 * medians over --steps steps after one untimed warm-up step: candidate
 * losses per second, full steps per second, and the candidate evaluation's
 * GFLOP/s (multiply-adds x 2 of the layer matmuls for the tokens each
 * candidate computes, from its first changed suffix token on
 * (rg_gcg_shared_tokens) to the last but one, their attention, and the
 * lm_head on the target rows; a step's repeated candidates once), which
 * bench/gcg.sh compares with the sgemm peak. torch's step
 * (bench/gcg_peer.py, as HarmBench) computes every token after the prefix.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/gcg.h"
#include "adv_ft/test_case.h"
#include "bench_util.h"
#include "cli.h"
#include "engine/forward.h"
#include "model/model.h"
#include "model/prompt_encode.h"
#include "engine/weights.h"
#include "util/error.h"

#define INIT_SUFFIX "! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! !"
enum { MAX_CTX = 512 };

/* Multiply-adds x 2 of evaluating one candidate: every token from FROM on
 * but the last (whose position no loss row reads) through the layer
 * matmuls, attending to all tokens before it, and the target rows through
 * the lm_head. */
static double candidate_flops(const rg_config *c, const rg_gcg_case *k, int from) {
  const double d = c->d_model, qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
  const double per_token = 2 * (d * qd + 2 * d * kvd + qd * d + 3 * d * c->d_ff) * c->n_layers;
  double attn = 0;
  for (int p = from; p < k->n - 1; p++) attn += 2.0 * 2.0 * qd * (p + 1) * c->n_layers;
  return (k->n - 1 - from) * per_token + attn + 2.0 * d * c->vocab_size * k->n_target;
}

int main(int argc, char **argv) {
  cli_runtime_env(argv);
  const char *model = NULL, *behavior = NULL, *target = NULL;
  int width = 512, steps = 3, batch = 32, threads = 0, screen = 0;
  bool audit = false, no_filter = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"behavior", CLI_STRING, &behavior, "the behavior text"},
      {"target", CLI_STRING, &target, "the target text"},
      {"width", CLI_INT, &width, "candidates per step (512)"},
      {"steps", CLI_INT, &steps, "timed steps (3)"},
      {"batch", CLI_INT, &batch, "candidates evaluated together (32)"},
      {"threads", CLI_INT, &threads, "threads (all CPUs)"},
      {"screen", CLI_INT, &screen, "screen on 8-bit activations, keep the K best in float32 (0: off)"},
      {"audit", CLI_BOOL, &audit, "with --screen: also every candidate in float32, untimed"},
      {"no-retokenize-filter", CLI_BOOL, &no_filter, "evaluate every candidate (default: HarmBench's filter)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH --behavior TEXT --target TEXT",
                     pos, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (!model || !behavior || !target || width < 1 || steps < 1 || batch < 1 || screen < 0 || (audit && !screen)) {
    rg_error_set("bench_gcg: need --model, --behavior, --target, positive --width, --steps, --batch, --screen >= 0, "
                 "and --screen with --audit");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  rg_chat_template t = {0};
  char *before = NULL, *after = NULL, *instr = malloc(strlen(behavior) + 2);
  int32_t *suffix = NULL;
  int n_suffix = 0;
  rg_test_case_seq v = {0};
  if (!instr || rg_prompt_template(m, NULL, &t) < 0 || rg_prompt_frame(&t, &before, &after) < 0 ||
      rg_test_case_tokens(m, INIT_SUFFIX, &suffix, &n_suffix) < 0)
    return cli_fail();
  sprintf(instr, "%s ", behavior); /* gcg.py: behavior += ' ' */
  const rg_test_case_frame frame = {.before = before, .after = after, .add_bos = rg_prompt_wants_bos(&t)};
  if (rg_test_case_build(m, &frame, instr, suffix, n_suffix, target, false, &v) < 0) return cli_fail();
  const rg_gcg_case c = {.ids = v.ids, .n = v.n, .suffix_start = v.suffix_start, .n_suffix = v.n_suffix,
                         .n_target = v.n - v.target_start};
  const int V = m->cfg.vocab_size;
  rg_backend_opts bo = {.threads = threads};
  rg_session_opts to = {.max_batch_tokens = MAX_CTX, .max_logit_rows = MAX_CTX, .train = true};
  rg_session_opts io = {.max_batch_tokens = batch * 128, .max_logit_rows = batch * 32};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  rg_session *train = w ? rg_session_new(w, 1, MAX_CTX, &to) : NULL, *inf = w ? rg_session_new(w, batch + 1, MAX_CTX, &io) : NULL;
  rg_weights *w8 = screen ? rg_weights_open(m, &bo, RG_WEIGHTS_TILED_Q8) : NULL;
  rg_session *s8 = w8 ? rg_session_new(w8, batch + 1, MAX_CTX, &io) : NULL;
  unsigned char *disallowed = malloc((size_t)V), *verified = malloc((size_t)width);
  float *grad = malloc((size_t)c.n_suffix * V * sizeof *grad), *losses = malloc((size_t)width * sizeof *losses);
  float *exact = malloc((size_t)width * sizeof *exact), *screened = malloc((size_t)width * sizeof *screened);
  int32_t *cands = malloc((size_t)width * c.n_suffix * sizeof *cands);
  int32_t *live = malloc((size_t)width * c.n_suffix * sizeof *live);
  int *idx = malloc((size_t)width * sizeof *idx);
  unsigned char *keep = malloc((size_t)width);
  double *t_grad = malloc((size_t)steps * sizeof(double)), *t_cand = malloc((size_t)steps * sizeof(double)),
         *t_step = malloc((size_t)steps * sizeof(double)), *gflops = malloc((size_t)steps * sizeof(double)),
         *t_filter = malloc((size_t)steps * sizeof(double)), *rate = malloc((size_t)steps * sizeof(double));
  if (!train || !inf || (screen && !s8) || !disallowed || !verified || !grad || !losses || !exact || !screened ||
      !cands || !live || !idx || !keep || !t_grad || !t_cand || !t_step || !gflops || !t_filter || !rate) {
    if (!rg_error_get()[0]) rg_error_set("bench_gcg: out of memory");
    return cli_fail();
  }
  rg_gcg_disallowed_tokens(m, disallowed);
  printf("%s: %d tokens (prefix %d, suffix %d, target %d), width %d, batch %d, threads %d (0 = all), "
         "re-tokenization filter %s\n",
         model, c.n, c.suffix_start, c.n_suffix, c.n_target, width, batch, threads, no_filter ? "off" : "on");
  uint64_t rng = 12345;
  for (int s = -1; s < steps && rc == 0; s++) {
    float loss = 0;
    const double t0 = bench_now_s();
    rc = rg_gcg_token_grad(train, &c, s < 0 ? RG_GCG_PREFIX_RUN : RG_GCG_PREFIX_KEPT, grad, &loss);
    const double t1 = bench_now_s();
    if (rc == 0)
      rc = rg_gcg_sample(grad, c.n_suffix, V, disallowed, v.ids + c.suffix_start, 256 < V ? 256 : V, width, &rng,
                         cands);
    const double t1f = bench_now_s();
    if (rc == 0 && !no_filter) rc = rg_gcg_retokenizes(m->tokenizer, cands, width, c.n_suffix, keep);
    /* the candidates evaluated: the kept ones (all when none is) */
    const int n_live = rc == 0 && !no_filter ? rg_gcg_kept_candidates(cands, width, c.n_suffix, keep, live, idx) : width;
    const int32_t *ev = no_filter ? cands : live;
    const double t2 = bench_now_s();
    double flops = 0;
    for (int j = 0; j < n_live; j++) /* repeats are not evaluated */
      if (rg_gcg_repeat_of(ev, j, c.n_suffix) < 0)
        flops += candidate_flops(&m->cfg, &c, rg_gcg_shared_tokens(&c, ev + (size_t)j * c.n_suffix));
    if (rc == 0)
      rc = screen ? rg_gcg_screened_losses(s8, inf, &c, ev, n_live, screen, NULL, losses, verified)
                  : rg_gcg_candidate_losses(inf, &c, ev, n_live, losses);
    const double t3 = bench_now_s();
    if (rc < 0) break;
    int best = -1;
    for (int j = 0; j < n_live; j++)
      if ((!screen || verified[j]) && (best < 0 || losses[j] < losses[best])) best = j;
    if (audit && s >= 0) {
      if ((rc = rg_gcg_candidate_losses(inf, &c, ev, n_live, exact)) < 0 ||
          (rc = rg_gcg_candidate_losses(s8, &c, ev, n_live, screened)) < 0)
        break;
      int exhaustive = 0, rank = 0; /* the exhaustive argmin, and how many distinct ones screened lower */
      double worst = 0;             /* the screen's largest relative error */
      for (int j = 1; j < n_live; j++)
        if (exact[j] < exact[exhaustive]) exhaustive = j;
      for (int j = 0; j < n_live; j++) {
        rank += screened[j] < screened[exhaustive] && rg_gcg_repeat_of(ev, j, c.n_suffix) < 0;
        const double e = fabs((double)screened[j] - exact[j]) / fabs((double)exact[j]);
        worst = e > worst ? e : worst;
      }
      printf("audit step %d: exhaustive argmin screened %d of %d (kept: %s); loss %.6f chosen, %.6f exhaustive; "
             "screen's worst relative error %.2e\n",
             s + 1, rank + 1, n_live, verified[exhaustive] ? "yes" : "NO", exact[best], exact[exhaustive], worst);
    }
    memcpy(v.ids + c.suffix_start, ev + (size_t)best * c.n_suffix, (size_t)c.n_suffix * sizeof(int32_t));
    if (s < 0) continue; /* warm-up */
    t_grad[s] = t1 - t0, t_cand[s] = t3 - t2, t_step[s] = t3 - t0, gflops[s] = flops / (t3 - t2) / 1e9;
    t_filter[s] = t2 - t1f, rate[s] = n_live / (t3 - t2);
    printf("step %d: token gradient %.3f s, sampling %.3f s, filter %.3f s (%d of %d kept), %d candidate losses "
           "%.3f s, step %.3f s, loss %.4f -> %.4f\n",
           s + 1, t1 - t0, t1f - t1, t2 - t1f, n_live, width, n_live, t3 - t2, t3 - t0, loss, losses[best]);
  }
  if (rc == 0) {
    const double step = bench_median(t_step, steps);
    printf("median: %.1f candidate losses/s, %.3f steps/s (%.3f s per step, token gradient %.3f s), %.1f GFLOP/s in "
           "the candidate losses\n",
           bench_median(rate, steps), 1.0 / step, step, bench_median(t_grad, steps), bench_median(gflops, steps));
    printf("filter: median %.4f s a step (%.1f%% of the step)\n", bench_median(t_filter, steps),
           100 * bench_median(t_filter, steps) / step);
  }
  free(t_grad), free(t_cand), free(t_step), free(gflops), free(cands), free(losses), free(exact), free(grad);
  free(screened), free(disallowed), free(verified), free(live), free(idx), free(keep), free(t_filter), free(rate);
  rg_session_free(s8);
  rg_weights_free(w8);
  rg_session_free(inf);
  rg_session_free(train);
  rg_weights_free(w);
  rg_test_case_seq_free(&v);
  free(suffix), free(instr), free(before), free(after);
  rg_chat_template_free(&t);
  rg_model_free(m);
  return rc == 0 ? 0 : cli_fail();
}
