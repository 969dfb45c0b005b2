/* bench_generate: batched greedy generation throughput, as `refgeo asr` runs it.
 *
 *   bench_generate --model PATH [--batch 8] [--new-tokens 64] [--threads N] [--repeats 3]
 *
 * Renders the first B of a fixed list of instructions with the model's chat
 * template (one user turn, generation prompt), then times R calls of
 * rg_generate (greedy, KV cache, no stop ids, so every sequence produces
 * exactly N new tokens and the count is B * N) and prints new tokens/s per
 * repeat and the median. bench/generate.sh compares it with transformers. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "cli.h"
#include "cli_prompt.h"
#include "engine/generate.h"
#include "model/model.h"
#include "util/error.h"

/* Shared with bench/generate.sh's transformers side (keep them equal). */
static const char *const INSTRUCTIONS[] = {
    "Write a short poem about the sea.",
    "Explain how a refrigerator works.",
    "Give three tips for learning a new language.",
    "What is the capital of France and why is it famous?",
    "Describe the water cycle in simple terms.",
    "List some healthy breakfast ideas.",
    "How do airplanes stay in the air?",
    "Summarize the plot of a detective story you invent.",
    "Why is the sky blue?",
    "Write a haiku about autumn leaves.",
    "Explain recursion to a ten year old.",
    "What are the benefits of regular exercise?",
    "How does a bill become a law?",
    "Describe your ideal weekend.",
    "Give a recipe for pancakes.",
    "What causes earthquakes?",
};
enum { N_INSTRUCTIONS = (int)(sizeof INSTRUCTIONS / sizeof INSTRUCTIONS[0]) };

int main(int argc, char **argv) {
  cli_runtime_env(argv); /* as refgeo itself runs */
  const char *model = NULL;
  int B = 8, N = 64, threads = 0, repeats = 3;
  bool f32 = false, fast = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"batch", CLI_INT, &B, "prompts generated together (8, at most 16)"},
      {"new-tokens", CLI_INT, &N, "new tokens per prompt (64)"},
      {"threads", CLI_INT, &threads, "threads (all CPUs)"},
      {"repeats", CLI_INT, &repeats, "timed generations (3)"},
      {"f32", CLI_BOOL, &f32, "float32 copies of the weights (default: the file dtype)"},
      {"fast-decode", CLI_BOOL, &fast, "prompt and decode on 8-bit activations (refgeo generate --fast-decode)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH [flags]", pos, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (!model || B < 1 || B > N_INSTRUCTIONS || N < 1 || repeats < 1) {
    rg_error_set("bench_generate: need --model, --batch in 1..%d, positive --new-tokens and --repeats",
                 N_INSTRUCTIONS);
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  int32_t *prompts[N_INSTRUCTIONS] = {0}, stop[2];
  int lens[N_INSTRUCTIONS], n_stop, max_len = 0, status = 1;
  rg_weights *w = NULL;
  rg_session *s = NULL;
  double tps[16];
  if (repeats > 16) repeats = 16;
  for (int b = 0; b < B; b++) {
    cli_prompt p = {.prompt = INSTRUCTIONS[b], .chat = true};
    if (cli_prompt_tokens(m, &p, &prompts[b], &lens[b], stop, &n_stop) < 0) goto end;
    if (lens[b] > max_len) max_len = lens[b];
  }
  printf("prompt tokens (longest of the batch): %d\n", max_len);
  rg_backend_opts bo = {.threads = threads};
  const rg_weight_mode mode = f32 ? RG_WEIGHTS_F32 : fast ? RG_WEIGHTS_TILED_Q8 : RG_WEIGHTS_TILED;
  if (!(w = rg_weights_open(m, &bo, mode)) || !(s = rg_session_new(w, B, max_len + N, NULL))) goto end;
  rg_gen_opts go = {.max_new_tokens = N}; /* no stop ids: exactly N tokens each */
  for (int r = 0; r < repeats; r++) {
    rg_gen_result res[N_INSTRUCTIONS];
    double t0 = bench_now_s();
    if (rg_generate(s, (const int32_t *const *)prompts, lens, B, &go, res) < 0) goto end;
    double dt = bench_now_s() - t0;
    long produced = 0;
    for (int b = 0; b < B; b++) produced += res[b].n;
    rg_gen_results_free(res, B);
    tps[r] = (double)produced / dt;
    printf("repeat %d: %ld new tokens in %.2f s, %.1f tokens/s\n", r + 1, produced, dt, tps[r]);
  }
  printf("median: %.1f tokens/s\n", bench_median(tps, repeats));
  status = 0;
end:
  if (status) cli_fail();
  for (int b = 0; b < B; b++) free(prompts[b]);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  return status;
}
