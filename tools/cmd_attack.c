/* cmd_attack: `refgeo attack (MODEL | --model PATH) --behaviors CSV
 * --out FILE.json [--targets FILE.json] [--steps 500] [--search-width 512]
 * [--top-k 256] [--min-loss X] [--limit N] [--batch 32] [--seed S]
 * [--chat-template NAME] [--threads N] [--log FILE.csv] [--json]`
 *
 * HarmBench's GCG attack (src/adv_ft/gcg.h; settings of
 * HarmBench 8e1604d configs/method_configs/GCG_config.yaml and
 * baselines/gcg/gcg.py) on every behavior of the CSV: the suffix starts as 20 "!"
 * tokens (tokenized without special tokens), the instruction is the
 * behavior (with its context string, as DirectRequest) plus " " plus the
 * suffix, and the target is the behavior's string in harmbench_targets_text.json.
 * Token layout, as baselines/gcg/gcg.py builds it: the chat template text
 * before the instruction (with BOS), the behavior, the suffix, the template
 * text after it, the target, each tokenized on its own. Writes the test
 * cases as HarmBench test_cases JSON ({"BehaviorID": ["instruction"]}), and
 * with --log a CSV of behavior_id, step, loss. --min-loss stops a behavior
 * early (HarmBench stops at 0.05 only after a refusal check, which this
 * command does not run). Progress goes to stderr; --json prints {"out",
 * "results": [{"behavior_id", "steps", "loss"}]} on stdout. A behavior's
 * tokens with its target must fit min(512, the model's max_ctx). */
#include <cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/gcg.h"
#include "adv_ft/test_case.h"
#include "cli.h"
#include "cli_data.h"
#include "cli_prompt.h"
#include "commands.h"
#include "harmbench/behaviors.h"
#include "harmbench/completions.h"
#include "model/prompt_encode.h"
#include "model/tokenizer.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/json.h"

enum { INIT_SUFFIX_TOKENS = 20, MAX_CTX = 512 };

static char *read_target(const cJSON *targets, const char *path, const char *id) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(targets, id);
  if (!cJSON_IsString(t)) {
    rg_error_set("%s: no target string for behavior %s", path, id);
    return NULL;
  }
  return t->valuestring;
}

typedef struct {
  rg_model *m;
  rg_weights *w;
  rg_session *train, *inf;
  unsigned char *disallowed;
  char *before, *after;
  rg_test_case_frame frame; /* before, after and whether BOS leads */
  rg_gcg_opts go;
  rg_csv_writer *log; /* NULL: no --log */
  cJSON *results;     /* NULL: no --json */
  int max_ctx;        /* MAX_CTX, or the model's context when smaller */
} attack_job;

/* Attacks one behavior; *test_case gets the instruction with the final suffix. */
static int attack_one(attack_job *j, const rg_behavior *b, const char *target, char **test_case) {
  char *instr = rg_behavior_direct_request(b);
  char *behavior = instr ? malloc(strlen(instr) + 2) : NULL;
  if (!behavior) {
    free(instr);
    return rg_error_set("out of memory");
  }
  sprintf(behavior, "%s ", instr); /* gcg.py: behavior += ' ' */
  free(instr);
  char init[2 * INIT_SUFFIX_TOKENS];
  for (int i = 0; i < INIT_SUFFIX_TOKENS; i++) memcpy(init + 2 * i, "! ", 2);
  init[2 * INIT_SUFFIX_TOKENS - 1] = '\0';
  int32_t *suffix = NULL;
  int n_suffix = 0;
  rg_test_case_seq v = {0};
  int rc = rg_test_case_tokens(j->m, init, &suffix, &n_suffix) == 0 &&
                   rg_test_case_build(j->m, &j->frame, behavior, suffix, n_suffix, target, false, &v) == 0
               ? 0
               : -1;
  free(suffix);
  const rg_gcg_case c = {.n = v.n, .suffix_start = v.suffix_start, .n_suffix = v.n_suffix, .n_target = v.n - v.target_start};
  if (rc == 0 && (c.n > j->max_ctx || c.n_target < 1))
    rc = rg_error_set("behavior %s: %d tokens with the target (at most %d, target >= 1)", b->id, c.n, j->max_ctx);
  float *losses = rc == 0 ? malloc(((size_t)j->go.steps + 1) * sizeof *losses) : NULL;
  int n_steps = 0;
  if (rc == 0 && !losses) rc = rg_error_set("out of memory for %d steps of losses", j->go.steps);
  if (rc == 0) rc = rg_gcg_run(j->train, j->inf, j->disallowed, v.ids, &c, &j->go, losses, &n_steps);
  for (int k = 0; rc == 0 && k < n_steps && j->log; k++)
    rc = rg_csv_writer_str(j->log, b->id) || rg_csv_writer_int(j->log, k + 1) ||
                 rg_csv_writer_double(j->log, losses[k]) || rg_csv_writer_end_row(j->log)
             ? -1
             : 0;
  char *suffix_text = rc == 0 ? rg_detokenize(j->m->tokenizer, v.ids + c.suffix_start, c.n_suffix, false) : NULL;
  if (rc == 0 && !suffix_text) rc = -1;
  if (rc == 0) {
    *test_case = malloc(strlen(behavior) + strlen(suffix_text) + 1);
    if (*test_case)
      sprintf(*test_case, "%s%s", behavior, suffix_text);
    else
      rc = rg_error_set("out of memory");
    const double loss = n_steps ? losses[n_steps - 1] : 0.0;
    fprintf(stderr, "%s: %d steps, loss %.4f\n", b->id, n_steps, loss);
    cJSON *row = j->results ? cJSON_CreateObject() : NULL;
    if (row) {
      cJSON_AddStringToObject(row, "behavior_id", b->id);
      cJSON_AddNumberToObject(row, "steps", n_steps);
      cJSON_AddNumberToObject(row, "loss", loss);
      cJSON_AddItemToArray(j->results, row);
    }
  }
  free(suffix_text), free(losses), free(behavior);
  rg_test_case_seq_free(&v);
  return rc;
}

int cmd_attack(int argc, char **argv) {
  const char *model = NULL, *behaviors_path = NULL, *out = NULL, *log_path = NULL, *tmpl_name = NULL;
  bool json = false;
  const char *targets_path = NULL; /* default: harmbench/ in the data folder (cli_data.h) */
  int steps = 500, width = 512, top_k = 256, limit = 0, batch = 32, seed = 0, threads = 0;
  double min_loss = 0;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      {"behaviors", CLI_STRING, &behaviors_path, "HarmBench behaviors CSV"},
      {"targets", CLI_STRING, &targets_path, "HarmBench targets JSON (data/harmbench/harmbench_targets_text.json)"},
      {"out", CLI_STRING, &out, "test cases JSON file to write"},
      {"log", CLI_STRING, &log_path, "CSV of behavior_id, step, loss"},
      {"steps", CLI_INT, &steps, "GCG steps per behavior (500)"},
      {"search-width", CLI_INT, &width, "candidates per step (512)"},
      {"top-k", CLI_INT, &top_k, "tokens per position to sample from (256)"},
      {"min-loss", CLI_FLOAT, &min_loss, "stop a behavior below this loss (0: never)"},
      {"limit", CLI_INT, &limit, "attack only the first N behaviors"},
      {"batch", CLI_INT, &batch, "candidates evaluated together (32)"},
      {"seed", CLI_INT, &seed, "sampling seed (0)"},
      {"chat-template", CLI_STRING, &tmpl_name, "chat format name (default: the model's)"},
      {"threads", CLI_INT, &threads, "CPU threads (all)"},
      {"json", CLI_BOOL, &json, "print each behavior's steps and final loss as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(MODEL | --model PATH) --behaviors CSV --out FILE.json [flags]", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model || !behaviors_path || !out) {
    rg_error_set("MODEL (or --model), --behaviors and --out are required");
    return cli_fail();
  }
  if (cli_require_positive("steps", steps) < 0 || cli_require_positive("search-width", width) < 0 ||
      cli_require_positive("top-k", top_k) < 0 || cli_require_positive("batch", batch) < 0)
    return cli_fail();
  if (limit < 0) {
    rg_error_set("--limit: %d is negative", limit);
    return cli_fail();
  }
  /* the inference session holds batch * 128 tokens and batch * 32 logit rows */
  if (batch > INT_MAX / 128) {
    rg_error_set("--batch: %d is too large (at most %d)", batch, INT_MAX / 128);
    return cli_fail();
  }
  char *default_targets = targets_path ? NULL : cli_data_path("harmbench/harmbench_targets_text.json");
  if (!targets_path && !(targets_path = default_targets)) return cli_fail();
  rg_behaviors *bs = rg_behaviors_read(behaviors_path);
  cJSON *targets = bs ? rg_json_read_file(targets_path) : NULL;
  if (targets && !cJSON_IsObject(targets)) rg_error_set("%s: not a JSON object of target strings", targets_path);
  if (!bs || !cJSON_IsObject(targets)) {
    rg_behaviors_free(bs);
    cJSON_Delete(targets);
    free(default_targets);
    return cli_fail();
  }
  attack_job j = {.results = json ? cJSON_CreateArray() : NULL,
                  .go = {.steps = steps, .search_width = width, .top_k = top_k, .min_loss = min_loss, .seed = (uint64_t)seed}};
  rg_chat_template t = {0};
  rg_completions cases = {0};
  rg_csv_writer log;
  bool log_open = false;
  rc = (j.m = rg_model_load(model)) && rg_prompt_template(j.m, tmpl_name, &t) == 0 &&
               rg_prompt_frame(&t, &j.before, &j.after) == 0
           ? 0
           : -1;
  j.frame = (rg_test_case_frame){.before = j.before, .after = j.after, .add_bos = rc == 0 && rg_prompt_wants_bos(&t)};
  if (rc == 0) j.max_ctx = j.m->cfg.max_ctx < MAX_CTX ? j.m->cfg.max_ctx : MAX_CTX;
  if (rc == 0) {
    /* The gradient session and the candidate session share one copy of
     * the weights (weights.h). */
    rg_backend_opts bo = {.threads = threads};
    rg_session_opts to = {.max_batch_tokens = MAX_CTX, .max_logit_rows = MAX_CTX, .train = true};
    /* sequence 0 holds the shared prefix, the others take `batch` candidates */
    rg_session_opts io = {.max_batch_tokens = batch * 128, .max_logit_rows = batch * 32};
    j.disallowed = malloc((size_t)j.m->cfg.vocab_size);
    if (!(j.w = rg_weights_open(j.m, &bo, RG_WEIGHTS_AUTO)) || !(j.train = rg_session_new(j.w, 1, MAX_CTX, &to)) ||
        !(j.inf = rg_session_new(j.w, batch + 1, MAX_CTX, &io)) || !j.disallowed)
      rc = j.disallowed ? -1 : rg_error_set("out of memory");
  }
  if (rc == 0) rg_gcg_disallowed_tokens(j.m, j.disallowed);
  if (rc == 0 && log_path) {
    static const char *const HEADER[] = {"behavior_id", "step", "loss"};
    rc = rg_csv_writer_open(&log, log_path, HEADER, 3);
    log_open = rc == 0;
    j.log = log_open ? &log : NULL;
  }
  const size_t n = limit > 0 && (size_t)limit < bs->n ? (size_t)limit : bs->n;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const rg_behavior *b = &bs->items[i];
    const char *target = read_target(targets, targets_path, b->id);
    char *tc = NULL;
    rc = target ? attack_one(&j, b, target, &tc) : -1;
    if (rc == 0 && rg_completions_add(&cases, b->id, tc, NULL) != 0) rc = rg_error_set("out of memory");
    free(tc);
  }
  if (rc == 0) rc = rg_test_cases_write(out, &cases);
  if (rc == 0 && json) {
    cJSON *summary = cJSON_CreateObject();
    cJSON_AddStringToObject(summary, "out", out);
    cJSON_AddItemToObject(summary, "results", j.results);
    j.results = NULL; /* owned by the summary now */
    rc = cli_print_json(summary);
  }
  if (log_open) {
    if (rc == 0)
      rc = rg_csv_writer_close(&log);
    else
      rg_csv_writer_abort(&log);
  }
  rg_completions_free(&cases);
  rg_session_free(j.inf);
  rg_session_free(j.train);
  rg_weights_free(j.w);
  free(j.disallowed), free(j.before), free(j.after);
  rg_chat_template_free(&t);
  rg_model_free(j.m);
  cJSON_Delete(targets);
  rg_behaviors_free(bs);
  free(default_targets);
  cJSON_Delete(j.results);
  return rc == 0 ? 0 : cli_fail();
}
