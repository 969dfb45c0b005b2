/* cmd_attack: `refgeo attack (MODEL | --model PATH) --behaviors CSV
 * --out FILE.json [--targets FILE.json] [--steps 500] [--search-width 512]
 * [--top-k 256] [--eval-steps 50] [--check-refusal-min-loss 0.05]
 * [--refusal-substrings FILE] [--min-loss X] [--no-retokenize-filter]
 * [--init-suffix TEXT] [--functional-category standard|contextual|all]
 * [--limit N] [--batch 32] [--screen K] [--seed S]
 * [--chat-template NAME] [--threads N] [--log FILE.csv]
 * [--behavior-log FILE.csv] [--dump-steps FILE.jsonl] [--json]`
 *
 * HarmBench's GCG attack on every behavior of the CSV (attack_run.h: the
 * token layout, the refusal-checked stop, the per-behavior seeds and the
 * progress file that lets a killed run, rerun with the same flags, skip
 * its finished behaviors; settings of HarmBench 8e1604d
 * configs/method_configs/GCG_config.yaml and baselines/gcg/gcg.py). The
 * targets default to harmbench_targets_text.json. --log: a CSV of
 * behavior_id, step, loss for the behaviors this invocation attacked;
 * --behavior-log: behavior_id, steps, final_loss, stop_reason, seconds for
 * every finished behavior; --dump-steps: every step's top-k tokens per
 * position, candidates, losses, filter removals and choice (attack_dump.h).
 * HarmBench's re-tokenization filter is on (candidates whose suffix does not
 * decode and re-encode to its own ids are dropped before their losses,
 * all kept when all would be; gcg.h); --no-retokenize-filter turns it off.
 * --screen K scores every step's candidates on
 * 8-bit activations first (RG_WEIGHTS_TILED_Q8, the products of
 * --fast-decode) and only the K best of those again in float32, taking the
 * argmin of the K (rg_gcg_screened_losses): faster, and the same step as
 * HarmBench's whenever its argmin screens among the K. Progress goes to stderr; --json prints {"out",
 * "results": [{"behavior_id", "steps", "loss", "stop_reason"}]} on stdout. */
#include <cJSON.h>
#include <stdbool.h>
#include <stdlib.h>

#include "attack_run.h"
#include "cli.h"
#include "cli_data.h"
#include "commands.h"
#include "harmbench/behaviors.h"
#include "util/error.h"

int cmd_attack(int argc, char **argv) {
  const char *model = NULL, *behaviors_path = NULL, *out = NULL, *log_path = NULL, *tmpl_name = NULL,
             *behavior_log = NULL, *substrings = NULL, *init_suffix = ATTACK_INIT_SUFFIX,
             *category = NULL, *dump_steps = NULL;
  bool json = false, no_retokenize = false;
  const char *targets_path = NULL; /* default: harmbench/ in the data folder (cli_data.h) */
  int steps = 500, width = 512, top_k = 256, limit = 0, batch = 32, seed = 0, threads = 0, eval_steps = 50,
      screen = 0;
  double min_loss = 0, check_min_loss = 0.05;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      {"behaviors", CLI_STRING, &behaviors_path, "HarmBench behaviors CSV"},
      {"targets", CLI_STRING, &targets_path, "HarmBench targets JSON (data/harmbench/harmbench_targets_text.json)"},
      {"out", CLI_STRING, &out, "test cases JSON file to write"},
      {"log", CLI_STRING, &log_path, "CSV of behavior_id, step, loss (this invocation's steps)"},
      {"behavior-log", CLI_STRING, &behavior_log, "CSV of behavior_id, steps, final_loss, stop_reason, seconds"},
      {"dump-steps", CLI_STRING, &dump_steps, "JSON lines of every step: top-k per position, candidates, losses"},
      {"steps", CLI_INT, &steps, "GCG steps per behavior (500)"},
      {"search-width", CLI_INT, &width, "candidates per step (512)"},
      {"top-k", CLI_INT, &top_k, "tokens per position to sample from (256)"},
      {"eval-steps", CLI_INT, &eval_steps, "run the refusal check every N steps (50)"},
      {"check-refusal-min-loss", CLI_FLOAT, &check_min_loss,
       "run the refusal check only below this loss (0.05; 0: never)"},
      {"refusal-substrings", CLI_STRING, &substrings, "HarmBench refusal_substrings.json (data/harmbench/)"},
      {"min-loss", CLI_FLOAT, &min_loss, "stop a behavior below this loss without a refusal check (0: never)"},
      {"no-retokenize-filter", CLI_BOOL, &no_retokenize,
       "keep candidates whose suffix does not re-tokenize to itself (HarmBench drops them)"},
      {"init-suffix", CLI_STRING, &init_suffix, "initial suffix text (20 \"!\")"},
      {"functional-category", CLI_STRING, &category, "standard, contextual or all non-copyright (every row)"},
      {"limit", CLI_INT, &limit, "attack only the first N behaviors"},
      {"batch", CLI_INT, &batch, "candidates evaluated together (32)"},
      {"screen", CLI_INT, &screen, "score candidates on 8-bit activations, the K best again in float32 (0: off)"},
      {"seed", CLI_INT, &seed, "sampling seed (0)"},
      {"chat-template", CLI_STRING, &tmpl_name, "chat format name (default: the model's)"},
      {"threads", CLI_INT, &threads, "CPU threads (all)"},
      {"json", CLI_BOOL, &json, "print each behavior's steps and final loss as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(MODEL | --model PATH) --behaviors CSV --out FILE.json [flags]\n\nexample: refgeo attack " CLI_EXAMPLE_MODEL " --behaviors data/harmbench/harmbench_behaviors_text_val.csv --limit 5 --steps 50 --out gcg_val.json", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model || !behaviors_path || !out) {
    rg_error_set("MODEL (or --model), --behaviors and --out are required");
    return cli_fail();
  }
  char *default_targets = targets_path ? NULL : cli_data_path("harmbench/harmbench_targets_text.json");
  char *default_substrings = substrings ? NULL : cli_data_path("harmbench/refusal_substrings.json");
  if ((!targets_path && !(targets_path = default_targets)) || (!substrings && !(substrings = default_substrings))) {
    free(default_targets), free(default_substrings);
    return cli_fail();
  }
  rg_behaviors *bs = rg_behaviors_read(behaviors_path);
  const attack_spec spec = {.model = model,
                            .behaviors = bs,
                            .targets_path = targets_path,
                            .substrings = substrings,
                            .chat_template = tmpl_name,
                            .init_suffix = init_suffix,
                            .category = category,
                            .limit = limit,
                            .go = {.steps = steps, .search_width = width, .top_k = top_k, .min_loss = min_loss,
                                   .seed = (uint64_t)(unsigned)seed, .retokenize_filter = !no_retokenize,
                                   .screen_keep = screen},
                            .eval_steps = eval_steps,
                            .check_min_loss = check_min_loss,
                            .batch = batch,
                            .threads = threads,
                            .log_path = log_path,
                            .behavior_log = behavior_log,
                            .dump_steps = dump_steps};
  cJSON *results = NULL;
  rc = bs && attack_spec_check(&spec) == 0 && attack_run(&spec, out, json ? &results : NULL) == 0 ? 0 : -1;
  if (rc == 0 && json) {
    cJSON *summary = cJSON_CreateObject();
    cJSON_AddStringToObject(summary, "out", out);
    cJSON_AddItemToObject(summary, "results", results);
    rc = cli_print_json(summary);
  }
  rg_behaviors_free(bs);
  free(default_targets), free(default_substrings);
  return rc == 0 ? 0 : cli_fail();
}
