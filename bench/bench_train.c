/* bench_train: time of one training step (forward, cross entropy at every
 * position, backward, AdamW with clipping) on the model's f32 copy, or with
 * --lora-rank on rank-R LoRA adapters over the frozen f32 base.
 *
 *   bench_train --model PATH --batch B --tokens T [--threads N] [--repeats R]
 *               [--lora-rank R --lora-targets q,k,v,o]
 *
 * B sequences of T random tokens (seeded), next-token loss at the T-1
 * positions that have a next token, mean over rows, AdamW lr 1e-5. Prints
 * each repeat's step time and the median (after one untimed warm-up step),
 * the step's phases, and the median ratio of the backward's time to the
 * forward's (forward+loss). bench/train_step.sh compares it with torch.
 */
#include <stdio.h>
#include <stdlib.h>

#include "adv_ft/optimizer.h"
#include "bench_util.h"
#include "cli.h"
#include "engine/backward.h"
#include "engine/forward.h"
#include "model/model.h"
#include "util/error.h"
#include "util/rng.h"

int main(int argc, char **argv) {
  cli_runtime_env(argv);
  const char *model = NULL;
  const char *lora_targets = "q,k,v,o";
  int B = 4, T = 128, threads = 0, repeats = 5, lora_rank = 0;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"batch", CLI_INT, &B, "sequences per step (4)"},
      {"tokens", CLI_INT, &T, "tokens per sequence (128)"},
      {"threads", CLI_INT, &threads, "threads (all CPUs)"},
      {"repeats", CLI_INT, &repeats, "timed steps (5)"},
      {"lora-rank", CLI_INT, &lora_rank, "train rank-R LoRA adapters instead of every weight (0: full)"},
      {"lora-targets", CLI_STRING, &lora_targets, "modules with adapters (q,k,v,o)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH [flags]", pos, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (!model || B < 1 || T < 2 || repeats < 1) {
    rg_error_set("bench_train: need --model, --batch >= 1, --tokens >= 2, --repeats >= 1");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  const int n = B * T, R = B * (T - 1), V = m->cfg.vocab_size;
  rg_backend_opts bo = {.threads = threads};
  rg_session_opts so = {.max_batch_tokens = n, .max_logit_rows = R, .train = true};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_F32);
  rg_lora_opts lo = {.rank = lora_rank, .alpha = 16.0f};
  if (w && lora_rank > 0 && (rg_lora_targets_parse(lora_targets, &lo.targets) < 0 || rg_weights_add_lora(w, &lo, 7) < 0)) {
    rg_weights_free(w);
    w = NULL;
  }
  if (w && lora_rank == 0 && rg_weights_make_trainable(w) < 0) {
    rg_weights_free(w);
    w = NULL;
  }
  rg_session *s = w ? rg_session_new(w, B, T, &so) : NULL;
  rg_grads *g = s ? rg_grads_new(s) : NULL;
  rg_adamw_hparams h = rg_adamw_defaults();
  rg_optimizer *o = g ? rg_optimizer_new(w, g, &h) : NULL;
  int32_t *ids = malloc((size_t)n * sizeof *ids), *targets = malloc((size_t)R * sizeof *targets);
  int *seq = malloc((size_t)n * sizeof *seq), *rows = malloc((size_t)R * sizeof *rows);
  float *scale = malloc((size_t)R * sizeof *scale), *losses = malloc((size_t)R * sizeof *losses);
  double *times = malloc((size_t)repeats * sizeof *times), *bwd_over_fwd = malloc((size_t)repeats * sizeof *bwd_over_fwd);
  int status = 1;
  if (!o || !ids || !targets || !seq || !rows || !scale || !losses || !times || !bwd_over_fwd) {
    if (o) rg_error_set("bench_train: out of memory");
    cli_fail();
    goto end;
  }
  uint64_t state = 12345;
  for (int i = 0; i < n; i++) {
    ids[i] = (int32_t)(rg_splitmix64(&state) % (uint64_t)V);
    seq[i] = i / T;
  }
  for (int b = 0, r = 0; b < B; b++)
    for (int p = 0; p + 1 < T; p++, r++) {
      rows[r] = b * T + p;
      targets[r] = ids[b * T + p + 1];
      scale[r] = 1.0f / (float)R;
    }
  printf("%s: %d x %d tokens, threads %d (0 = all), %s\n", model, B, T, threads, lora_rank ? "LoRA" : "full");
  for (int r = -1; r < repeats; r++) {
    double t0 = bench_now_s();
    rg_session_reset(s);
    /* the logits stay on the backend, as in the trainer: only the losses come back */
    if (rg_session_eval(s, ids, seq, n, rows, R, NULL) < 0 || rg_session_loss_ce(s, targets, scale, losses) < 0) {
      cli_fail();
      goto end;
    }
    double t1 = bench_now_s();
    rg_grads_zero(g);
    if (rg_session_backward(s, g, NULL) < 0) {
      cli_fail();
      goto end;
    }
    double t2 = bench_now_s(), norm;
    if (rg_optimizer_step(o, 1e-5, 1.0, &norm) < 0) {
      cli_fail();
      goto end;
    }
    double t3 = bench_now_s();
    double loss = 0;
    for (int k = 0; k < R; k++) loss += losses[k] / R;
    if (r >= 0) {
      times[r] = t3 - t0;
      bwd_over_fwd[r] = (t2 - t1) / (t1 - t0);
      printf("repeat %d: step %.3f s (forward+loss %.3f, backward %.3f, optimizer %.3f), loss %.4f, grad norm %.3f\n",
             r + 1, t3 - t0, t1 - t0, t2 - t1, t3 - t2, loss, norm);
    }
  }
  const double med = bench_median(times, repeats);
  printf("median: %.3f s per step, %.1f tokens/s, backward/forward %.2f\n", med, n / med,
         bench_median(bwd_over_fwd, repeats));
  status = 0;
end:
  free(ids), free(targets), free(seq), free(rows), free(scale), free(losses), free(times), free(bwd_over_fwd);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  return status;
}
