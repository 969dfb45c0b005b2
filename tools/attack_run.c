/* attack_run.c: HarmBench's GCG over a behaviors CSV on one model
 * (attack_run.h). */
#include "attack_run.h"

#include <cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adv_ft/gcg_stop.h"
#include "adv_ft/test_case.h"
#include "attack_dump.h"
#include "attack_progress.h"
#include "cli.h"
#include "cli_prompt.h"
#include "harmbench/asr_run.h"
#include "harmbench/completions.h"
#include "harmbench/refusal_match.h"
#include "engine/generate.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/json.h"
#include "util/progress.h"
#include "util/rng.h"

enum { MAX_CTX = 512, CHECK_TOKENS = 32 /* check_refusal_utils.py: max_new_tokens=32 */ };

/* The target of behavior ID: a non-empty string of TARGETS. */
static const char *read_target(const cJSON *targets, const char *path, const char *id) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(targets, id);
  if (!cJSON_IsString(t)) {
    rg_error_set("%s: no target string for behavior %s", path, id);
    return NULL;
  }
  if (!t->valuestring[0]) {
    rg_error_set("%s: behavior %s has an empty target", path, id);
    return NULL;
  }
  return t->valuestring;
}

/* A behavior's own seed: --seed and its BehaviorID (FNV-1a) through
 * splitmix64, so that skipping finished behaviors changes no other draw. */
static uint64_t behavior_seed(int seed, const char *id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
  uint64_t state = (uint64_t)(unsigned)seed ^ h;
  return rg_splitmix64(&state);
}

typedef struct {
  rg_model *m;
  rg_weights *w, *w8;        /* w8: the screen's 8-bit weights (go.screen_keep > 0) */
  rg_session *train, *inf, *screen;
  unsigned char *disallowed;
  char *before, *after;
  const char *tmpl_name;    /* --chat-template (NULL: the model's) */
  rg_test_case_frame frame; /* before, after and whether BOS leads */
  const char *init_suffix;
  rg_gcg_opts go;
  rg_gcg_stop_rule stop;
  const rg_behavior *current; /* the behavior under attack, for the refusal check */
  rg_csv_writer *log; /* NULL: no --log */
  attack_dump *dump;  /* NULL: no --dump-steps */
  int max_ctx;        /* MAX_CTX, or the model's context when smaller */
  rg_progress bar;    /* behaviors done; each behavior's result is a note on it */
} attack_job;

/* The test case of J's current behavior with SUFFIX; NULL + error. */
static char *test_case_text(const attack_job *j, const int32_t *suffix, int n_suffix) {
  char *suffix_text = rg_detokenize(j->m->tokenizer, suffix, n_suffix, false);
  char *text = suffix_text ? rg_gcg_test_case_text(j->current->behavior, j->current->context, suffix_text) : NULL;
  free(suffix_text);
  return text;
}

/* rg_gcg_stop_rule.generate: N greedy tokens of the test case prompted as
 * `refgeo asr` prompts it (cli_prompt_tokens, chat). HarmBench's
 * transformers generate stops after an EOS and decodes it
 * (skip_special_tokens=False): the text keeps the tokens up to and including
 * the first end-of-reply id, so Llama-2's "</s>" counts as a refusal prefix
 * as there. */
static char *check_generation(void *user, const int32_t *suffix, int n_suffix, int n) {
  attack_job *j = user;
  char *text = test_case_text(j, suffix, n_suffix), *gen = NULL;
  int32_t *ids = NULL, stop[2];
  int n_ids = 0, n_stop = 0;
  const cli_prompt p = {.prompt = text, .chat = true, .chat_template = j->tmpl_name};
  rg_gen_result r = {0};
  const rg_gen_opts go = {.max_new_tokens = n, .top_p = 1};
  const int32_t *prompts[1];
  if (text && cli_prompt_tokens(j->m, &p, &ids, &n_ids, stop, &n_stop) == 0) {
    prompts[0] = ids;
    if (n_ids + n > j->max_ctx)
      rg_error_set("behavior %s: the refusal check's %d-token prompt and %d tokens exceed the context %d",
                   j->current->id, n_ids, n, j->max_ctx);
    else if (rg_generate(j->inf, prompts, &n_ids, 1, &go, &r) == 0) {
      int keep = r.n;
      for (int i = 0; i < r.n && keep == r.n; i++)
        for (int s = 0; s < n_stop; s++)
          if (r.ids[i] == stop[s]) keep = i + 1;
      gen = rg_detokenize(j->m->tokenizer, r.ids, keep, false);
      rg_gen_results_free(&r, 1);
    }
  }
  free(text), free(ids);
  return gen;
}

/* Attacks one behavior; *r gets its result (r->test_case malloc'd). */
static int attack_one(attack_job *j, const rg_behavior *b, const char *target, attack_result *r) {
  const double t0 = rg_now_seconds();
  j->current = b;
  char *instr = rg_behavior_direct_request(b);
  char *behavior = instr ? malloc(strlen(instr) + 2) : NULL;
  if (!behavior) {
    free(instr);
    return rg_error_set("out of memory");
  }
  sprintf(behavior, "%s ", instr); /* gcg.py: behavior += ' ' */
  free(instr);
  int32_t *suffix = NULL;
  int n_suffix = 0;
  rg_test_case_seq v = {0};
  int rc = rg_test_case_tokens(j->m, j->init_suffix, &suffix, &n_suffix) == 0 &&
                   rg_test_case_build(j->m, &j->frame, behavior, suffix, n_suffix, target, false, &v) == 0
               ? 0
               : -1;
  free(suffix), free(behavior);
  const rg_gcg_case c = {.n = v.n, .suffix_start = v.suffix_start, .n_suffix = v.n_suffix, .n_target = v.n - v.target_start};
  if (rc == 0 && c.n_suffix < 1) rc = rg_error_set("--init-suffix: no tokens");
  if (rc == 0 && (c.n > j->max_ctx || c.n_target < 1))
    rc = rg_error_set("behavior %s: %d tokens with the suffix and target (at most %d, the context)", b->id, c.n,
                      j->max_ctx);
  float *losses = rc == 0 ? malloc(((size_t)j->go.steps + 1) * sizeof *losses) : NULL;
  int n_steps = 0;
  rg_gcg_stop_reason why = RG_GCG_ALL_STEPS;
  if (rc == 0 && !losses) rc = rg_error_set("out of memory for %d steps of losses", j->go.steps);
  rg_gcg_opts go = j->go;
  go.seed = behavior_seed((int)j->go.seed, b->id);
  if (j->dump) {
    j->dump->behavior_id = b->id;
    go.on_step = attack_dump_step, go.step_user = j->dump;
  }
  if (rc == 0) rc = rg_gcg_run(j->train, j->inf, j->disallowed, v.ids, &c, &go, losses, &n_steps, &why);
  for (int k = 0; rc == 0 && k < n_steps && j->log; k++)
    rc = rg_csv_writer_str(j->log, b->id) || rg_csv_writer_int(j->log, k + 1) ||
                 rg_csv_writer_double(j->log, losses[k]) || rg_csv_writer_end_row(j->log)
             ? -1
             : 0;
  char *tc = rc == 0 ? test_case_text(j, v.ids + c.suffix_start, c.n_suffix) : NULL;
  if (rc == 0 && !tc) rc = -1;
  if (rc == 0) {
    *r = (attack_result){.behavior_id = b->id, .test_case = tc, .stop_reason = rg_gcg_stop_reason_name(why),
                         .steps = n_steps, .final_loss = n_steps ? losses[n_steps - 1] : 0.0,
                         .seconds = rg_now_seconds() - t0};
    rg_progress_note(&j->bar, "%s: %d steps, loss %.4f, stopped by %s", b->id, n_steps, r->final_loss,
                     r->stop_reason);
  }
  free(losses);
  rg_test_case_seq_free(&v);
  return rc;
}

/* The behaviors to attack, in file order, into *out[*n] (malloc'd): every
 * row when CATEGORY is NULL (HarmBench's GCG attacks copyright behaviors
 * too), else DirectRequest's selection (rg_asr_select_cases: standard,
 * contextual or all non-copyright); the first LIMIT when LIMIT > 0. */
static int select_behaviors(const rg_behaviors *bs, const char *category, int limit, const rg_behavior ***out,
                            size_t *n) {
  *out = malloc((bs->n ? bs->n : 1) * sizeof **out);
  *n = 0;
  if (!*out) return rg_error_set("out of memory");
  if (!category) {
    for (size_t i = 0; i < bs->n && (limit <= 0 || *n < (size_t)limit); i++) (*out)[(*n)++] = &bs->items[i];
    return 0;
  }
  rg_asr_category cat;
  rg_completions sel = {0};
  int n_copyright = 0;
  if (rg_asr_category_from_name(category, &cat) < 0 ||
      rg_asr_select_cases(bs, NULL, NULL, cat, limit, &sel, &n_copyright) < 0)
    return rg_error_prefix("--functional-category");
  for (size_t i = 0; i < sel.n; i++) (*out)[(*n)++] = rg_behaviors_find(bs, sel.items[i].behavior_id);
  rg_completions_free(&sel);
  return 0;
}

/* The flags that decide a test case, which a resumed run must share. */
static cJSON *settings_json(const char *model, const char *behaviors, const char *targets, const char *tmpl,
                            const rg_gcg_opts *go, const rg_gcg_stop_rule *stop, const char *init, const char *category,
                            int limit) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "model", model);
  cJSON_AddStringToObject(s, "behaviors", behaviors);
  cJSON_AddStringToObject(s, "targets", targets);
  cJSON_AddStringToObject(s, "chat_template", tmpl ? tmpl : "");
  cJSON_AddStringToObject(s, "init_suffix", init);
  cJSON_AddNumberToObject(s, "steps", go->steps);
  cJSON_AddNumberToObject(s, "search_width", go->search_width);
  cJSON_AddNumberToObject(s, "top_k", go->top_k);
  cJSON_AddNumberToObject(s, "min_loss", go->min_loss);
  cJSON_AddNumberToObject(s, "seed", (double)go->seed);
  cJSON_AddBoolToObject(s, "retokenize_filter", go->retokenize_filter);
  cJSON_AddNumberToObject(s, "screen_keep", go->screen_keep);
  cJSON_AddNumberToObject(s, "eval_steps", stop->eval_steps);
  cJSON_AddNumberToObject(s, "check_refusal_min_loss", stop->min_loss);
  cJSON_AddStringToObject(s, "functional_category", category ? category : "");
  cJSON_AddNumberToObject(s, "limit", limit);
  return s;
}

/* {"behavior_id", "steps", "loss", "stop_reason"} of every finished behavior. */
static cJSON *results_json(const attack_progress *p) {
  cJSON *results = cJSON_CreateArray();
  const cJSON *e;
  cJSON_ArrayForEach(e, p->done) {
    cJSON *row = cJSON_CreateObject();
    cJSON_AddItemToObject(row, "behavior_id", cJSON_Duplicate(cJSON_GetObjectItem(e, "behavior_id"), true));
    cJSON_AddItemToObject(row, "steps", cJSON_Duplicate(cJSON_GetObjectItem(e, "steps"), true));
    cJSON_AddItemToObject(row, "loss", cJSON_Duplicate(cJSON_GetObjectItem(e, "final_loss"), true));
    cJSON_AddItemToObject(row, "stop_reason", cJSON_Duplicate(cJSON_GetObjectItem(e, "stop_reason"), true));
    cJSON_AddItemToArray(results, row);
  }
  return results;
}

int attack_spec_check(const attack_spec *s) {
  if (cli_require_positive("steps", s->go.steps) < 0 || cli_require_positive("search-width", s->go.search_width) < 0 ||
      cli_require_positive("top-k", s->go.top_k) < 0 || cli_require_positive("eval-steps", s->eval_steps) < 0)
    return -1;
  if (cli_require_positive("batch", s->batch) < 0) return -1;
  if (s->go.screen_keep < 0) return rg_error_set("--screen: %d is negative", s->go.screen_keep);
  /* the inference session holds batch * 128 tokens and batch * 32 logit rows */
  if (s->batch > INT_MAX / 128) return rg_error_set("--batch: %d is too large (at most %d)", s->batch, INT_MAX / 128);
  if (s->limit < 0) return rg_error_set("--limit: %d is negative", s->limit);
  cJSON *targets = rg_json_read_file(s->targets_path);
  if (!targets) return -1;
  int rc = cJSON_IsObject(targets) ? 0 : rg_error_set("%s: not a JSON object of target strings", s->targets_path);
  const rg_behavior **sel = NULL;
  size_t n = 0;
  if (rc == 0) rc = select_behaviors(s->behaviors, s->category, s->limit, &sel, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (!read_target(targets, s->targets_path, sel[i]->id)) rc = -1;
  free(sel);
  cJSON_Delete(targets);
  return rc;
}

int attack_run(const attack_spec *s, const char *out, cJSON **results) {
  const char *init_suffix = s->init_suffix ? s->init_suffix : ATTACK_INIT_SUFFIX;
  cJSON *targets = rg_json_read_file(s->targets_path);
  if (targets && !cJSON_IsObject(targets)) rg_error_set("%s: not a JSON object of target strings", s->targets_path);
  rg_refusal_list *refusals =
      cJSON_IsObject(targets) ? rg_refusal_list_load(RG_REFUSAL_HB_ATTACK, s->substrings) : NULL;
  const rg_behavior **sel = NULL;
  size_t n = 0;
  int rc = refusals ? select_behaviors(s->behaviors, s->category, s->limit, &sel, &n) : -1;
  attack_job j = {.tmpl_name = s->chat_template,
                  .init_suffix = init_suffix,
                  .go = s->go,
                  .stop = {.eval_steps = s->eval_steps, .min_loss = s->check_min_loss, .n_gen_tokens = CHECK_TOKENS,
                           .refusals = refusals, .generate = check_generation}};
  j.stop.user = &j;
  j.go.stop = &j.stop;
  attack_progress prog = {0};
  if (rc == 0)
    rc = attack_progress_open(&prog, out,
                              settings_json(s->model, s->behaviors->path, s->targets_path, s->chat_template, &j.go,
                                            &j.stop, init_suffix, s->category, s->limit));
  rg_chat_template t = {0};
  rg_csv_writer log;
  attack_dump dump;
  bool log_open = false, dump_open = false;
  if (rc == 0)
    rc = (j.m = rg_model_load(s->model)) && rg_prompt_template(j.m, s->chat_template, &t) == 0 &&
                 rg_prompt_frame(&t, &j.before, &j.after) == 0
             ? 0
             : -1;
  j.frame = (rg_test_case_frame){.before = j.before, .after = j.after, .add_bos = rc == 0 && rg_prompt_wants_bos(&t)};
  if (rc == 0) j.max_ctx = j.m->cfg.max_ctx < MAX_CTX ? j.m->cfg.max_ctx : MAX_CTX;
  if (rc == 0) {
    /* The gradient session and the candidate session share one copy of
     * the weights (weights.h). */
    rg_backend_opts bo = {.threads = s->threads};
    rg_session_opts to = {.max_batch_tokens = MAX_CTX, .max_logit_rows = MAX_CTX, .train = true};
    /* sequence 0 holds the shared prefix, the others take `batch` candidates */
    rg_session_opts io = {.max_batch_tokens = s->batch * 128, .max_logit_rows = s->batch * 32};
    j.disallowed = malloc((size_t)j.m->cfg.vocab_size);
    if (!(j.w = rg_weights_open(j.m, &bo, RG_WEIGHTS_AUTO)) || !(j.train = rg_session_new(j.w, 1, MAX_CTX, &to)) ||
        !(j.inf = rg_session_new(j.w, s->batch + 1, MAX_CTX, &io)) || !j.disallowed)
      rc = j.disallowed ? -1 : rg_error_set("out of memory");
    /* the screen reads the model's blocks (no float32 copy) with its own
     * sessions' worth of activations; a K that keeps every candidate
     * screens nothing (rg_gcg_run), so it needs none */
    if (rc == 0 && s->go.screen_keep > 0 && s->go.screen_keep < s->go.search_width &&
        (!(j.w8 = rg_weights_open(j.m, &bo, RG_WEIGHTS_TILED_Q8)) ||
         !(j.screen = rg_session_new(j.w8, s->batch + 1, MAX_CTX, &io))))
      rc = -1;
    j.go.screen = j.screen;
  }
  if (rc == 0) rg_gcg_disallowed_tokens(j.m, j.disallowed);
  if (rc == 0 && s->log_path) {
    static const char *const HEADER[] = {"behavior_id", "step", "loss"};
    rc = rg_csv_writer_open(&log, s->log_path, HEADER, 3);
    log_open = rc == 0;
    j.log = log_open ? &log : NULL;
  }
  if (rc == 0 && s->dump_steps) {
    rc = attack_dump_open(&dump, s->dump_steps);
    dump_open = rc == 0;
    j.dump = dump_open ? &dump : NULL;
  }
  rg_progress_start(&j.bar, cli_log(), s->progress_label ? s->progress_label : "attack: behaviors", (int)n);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const rg_behavior *b = sel[i];
    if (attack_progress_find(&prog, b->id)) {
      rg_progress_note(&j.bar, "%s: finished in an earlier run", b->id);
      continue;
    }
    attack_result r = {0};
    const char *target = read_target(targets, s->targets_path, b->id);
    rc = target ? attack_one(&j, b, target, &r) : -1;
    if (rc == 0) rc = attack_progress_add(&prog, &r, s->behavior_log);
    free((char *)r.test_case);
    if (rc == 0) rg_progress_tick(&j.bar, (int)i + 1);
    rg_fault_point("attack-behavior"); /* tests: killed between two behaviors */
  }
  if (rc == 0) rg_progress_end(&j.bar);
  rg_completions cases = {0};
  if (rc == 0) rc = attack_progress_test_cases(&prog, &cases);
  if (rc == 0) rc = rg_test_cases_write(out, &cases);
  if (rc == 0) rc = attack_progress_remove(&prog);
  if (rc == 0 && results) rc = (*results = results_json(&prog)) ? 0 : rg_error_set("out of memory");
  if (log_open) {
    if (rc == 0)
      rc = rg_csv_writer_close(&log);
    else
      rg_csv_writer_abort(&log);
  }
  if (dump_open) {
    if (rc == 0)
      rc = attack_dump_close(&dump);
    else
      attack_dump_abort(&dump);
  }
  rg_completions_free(&cases);
  attack_progress_free(&prog);
  rg_session_free(j.screen);
  rg_weights_free(j.w8);
  rg_session_free(j.inf);
  rg_session_free(j.train);
  rg_weights_free(j.w);
  free(j.disallowed), free(j.before), free(j.after);
  rg_chat_template_free(&t);
  rg_model_free(j.m);
  rg_refusal_list_free(refusals);
  free(sel);
  cJSON_Delete(targets);
  return rc;
}
