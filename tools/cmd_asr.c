/* cmd_asr: `refgeo asr (MODEL | --model PATH | --run-dir DIR [--base PATH] |
 * --manifest CSV [--base PATH]) (--behaviors CSV | --prompts CSV
 * [--prompt-column prompt] [--group-column COL ...]) --out DIR
 * [--attack DirectRequest | --attack gcg [GCG flags] [--transfer] |
 *  --test-cases FILE.json [--attack-name NAME]]
 * [--functional-category standard|contextual|all] [--max-new-tokens 512]
 * [--batch 8] [--classifier NAME ...] [--judge MODEL]
 * [--classifier-prompts FILE] [--refusal-substrings FILE] [--limit N]
 * [--chat-template NAME] [--ablate FILE[:...]] [--actadd FILE[:...]
 * [--coeff C]] [--threads N] [--fast-decode] [--json]`
 *
 * HarmBench ASR of every checkpoint (harmbench/asr_run.h): greedy chat
 * completions of the test cases, written into the directory --out as
 * DIR/completions_step<N>.json,
 * scored by each classifier into DIR/asr.csv and DIR/asr_by_category.csv.
 * A step whose completions file exists is not generated again: its
 * completions are re-read (and must hold exactly this run's test cases), so
 * a rerun resumes and a run with another --classifier adds rows.
 *
 * --prompts takes any CSV with a prompt column instead of a behaviors file
 * (harmbench/prompt_csv.h): each row is a DirectRequest test case, and
 * DIR/refusal_rates.csv (refusal rate with Wilson 95% interval, overall and
 * per value of each --group-column) replaces asr_by_category.csv. XSTest's
 * over-refusal report:
 *   refgeo asr --model M --prompts data/xstest/xstest_prompts.csv
 *     --group-column label --classifier refusal-xstest --max-new-tokens 32 --out DIR
 * (the rule reads only the start of a completion, so 32 tokens decide it).
 *
 * Classifiers (repeatable; default refusal-harmbench): the table of
 * harmbench/classifiers.h (refusal-harmbench, refusal-advbench, refusal-rd,
 * refusal-xstest, judge with --judge MODEL).
 * Data files default to harmbench/ in refgeo's data folder (cli_data.h:
 * installed share/refgeo, $REFGEO_DATA, data/ near the executable, the
 * source tree of its build folder).
 * --ablate / --actadd (cli_intervention.h) generate under that intervention:
 * the attack is named e.g. "DirectRequest+ablate(step=0;pos=-1;layer=12)"
 * and its completions go to completions_step<N>_ablate_<hash>.json.
 * DIR/asr_run.json records the run (attack, behaviors, how many copyright
 * behaviors were excluded).
 *
 * --attack gcg is the adaptive attack: HarmBench's GCG (attack_run.h) runs
 * on each checkpoint's own weights, for the same selected behaviors (with
 * --limit and --functional-category), and writes
 * DIR/gcg_test_cases_step<N>.json; its completions
 * (completions_step<N>_adaptive_gcg.json) are scored like any attack's, as
 * asr.csv rows with attack adaptive_gcg. The GCG flags are `refgeo
 * attack`'s (--steps, --search-width, --top-k, --eval-steps,
 * --check-refusal-min-loss, --targets, --seed, --init-suffix,
 * --no-retokenize-filter, --screen; its --batch is --gcg-batch here), with HarmBench's
 * defaults (the re-tokenization filter on). A killed run resumes inside the attack of the step it was in.
 * --transfer also scores every checkpoint's test cases on every other
 * checkpoint, fixed-source (completions_step<B>_gcg_from_step<A>.json), and
 * writes DIR/transfer.csv: attack_step, eval_step, classifier, n,
 * successes, asr, wilson95_lo, wilson95_hi, one row per pair (the diagonal
 * is the adaptive ASR). */
#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attack_run.h"
#include "cli.h"
#include "cli_classifier.h"
#include "cli_data.h"
#include "cli_intervention.h"
#include "cli_prompt.h"
#include "cli_series.h"
#include "commands.h"
#include "harmbench/asr_run.h"
#include "harmbench/asr_stats.h"
#include "util/csv_table.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/fileio.h"

/* A --classifier of this run: its entry in harmbench/classifiers.h and, for
 * the string rules, the loaded list. */
typedef struct {
  const rg_classifier_info *info;
  rg_refusal_list *list;
} classifier;

typedef struct {
  const rg_behaviors *behaviors;
  const rg_prompt_csv *prompt_csv; /* --prompts: refusal rates per group instead of per category */
  const rg_completions *cases;
  const char *attack, *out_dir, *chat_template;
  const char *completions_tag; /* "" or "_<kind>_<hash>" when an intervention is set */
  cli_intervention *intervention;
  rg_asr_gen_opts gen;
  classifier *cls;
  int n_cls;
  const rg_model *judge;
  const rg_classifier_prompts *judge_prompts;
  bool json;
  bool no_tables; /* transfer pairs: score, but write no asr.csv rows */
} asr_job;

/* The classifiers named by --classifier, refusal lists loaded. */
static int load_classifiers(const cli_list *names, const char *substrings, classifier *out, int *n_out) {
  static const char *const DEFAULT[] = {"refusal-harmbench"};
  const cli_list def = {(const char **)DEFAULT, 1};
  if (names->n == 0) names = &def;
  if (names->n > rg_classifier_count())
    return rg_error_set("--classifier: given more than %d times", rg_classifier_count());
  *n_out = 0;
  for (int i = 0; i < names->n; i++) {
    const rg_classifier_info *info = cli_classifier_find(names->items[i]);
    if (!info) return -1;
    for (int j = 0; j < *n_out; j++)
      if (out[j].info == info) return rg_error_set("--classifier: '%s' given twice", info->name);
    out[*n_out] = (classifier){info, NULL};
    if (info->kind == RG_CLASSIFIER_REFUSAL && !(out[*n_out].list = cli_classifier_list(info, substrings)))
      return -1;
    (*n_out)++;
  }
  return 0;
}

/* Whether completions read back from a file are exactly the test cases. */
static bool same_cases(const rg_completions *a, const rg_completions *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->items[i].behavior_id, b->items[i].behavior_id) != 0 ||
        strcmp(a->items[i].test_case, b->items[i].test_case) != 0)
      return false;
  return true;
}

/* Generates the completions of one checkpoint into *out. */
static int generate_step(const asr_job *j, const rg_checkpoint *ck, rg_completions *out) {
  const char *model_path = ck->path;
  rg_model *m = rg_model_load(model_path);
  if (!m) return -1;
  size_t n = j->cases->n;
  int32_t **ids = calloc(n, sizeof *ids);
  int *lens = calloc(n, sizeof *lens);
  char **gens = calloc(n, sizeof *gens);
  int32_t stop[2];
  int n_stop = 0, rc = ids && lens && gens ? 0 : rg_error_set("%s: out of memory", model_path);
  for (size_t i = 0; i < n && rc == 0; i++) {
    cli_prompt p = {.prompt = j->cases->items[i].test_case, .chat = true, .chat_template = j->chat_template};
    rc = cli_prompt_tokens(m, &p, &ids[i], &lens[i], stop, &n_stop);
  }
  rg_asr_gen_opts go = j->gen;
  go.stop_ids = stop;
  go.n_stop = n_stop;
  char label[160];
  snprintf(label, sizeof label, "step %ld %s: generating", ck->step, j->attack);
  go.progress = cli_log(), go.progress_label = label;
  if (rc == 0) rc = cli_intervention_load(j->intervention, m, &go.intervention);
  if (rc == 0) rc = rg_asr_generate(m, (const int32_t *const *)ids, lens, (int)n, &go, gens);
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = rg_completions_add(out, j->cases->items[i].behavior_id, j->cases->items[i].test_case, gens[i]);
  if (rc < 0) rg_completions_free(out);
  for (size_t i = 0; i < n; i++) {
    if (ids) free(ids[i]);
    if (gens) free(gens[i]);
  }
  free(gens);
  free(lens);
  free(ids);
  cli_intervention_free(j->intervention);
  rg_model_free(m);
  return rc;
}

/* The refusal_rates.csv rows just written for S, one line each. */
static void print_refusal_rates(const char *dir, const rg_asr_scored *s) {
  char *path = rg_path_join(dir, "refusal_rates.csv");
  rg_csv *t = path ? rg_csv_read(path) : NULL;
  for (size_t r = 0; t && r < t->n_rows; r++) {
    char **row = t->rows[r], step[32];
    snprintf(step, sizeof step, "%ld", s->step);
    if (strcmp(row[0], step) != 0 || strcmp(row[1], s->attack) != 0 || strcmp(row[2], s->classifier) != 0) continue;
    printf("  %s=%s: %s/%s refused (rate %.4f, Wilson 95%% %.4f-%.4f)\n", row[3], row[4], row[6], row[5],
           atof(row[7]), atof(row[8]), atof(row[9]));
  }
  rg_csv_free(t);
  free(path);
}

/* Completions (generated or resumed) and every classifier's rows for one
 * step. SUCC (NULL, or one per classifier) gets the success counts. */
static int run_step(const asr_job *j, const rg_checkpoint *ck, cJSON *summary, long *succ_out) {
  char name[256];
  snprintf(name, sizeof name, "completions_step%ld%s.json", ck->step, j->completions_tag);
  char *path = rg_path_join(j->out_dir, name);
  if (!path) return rg_error_set("%s: out of memory", j->out_dir);
  rg_completions c = {0};
  int rc = 0;
  bool resumed = rg_path_exists(path);
  if (resumed) {
    rc = rg_completions_read(path, &c);
    if (rc == 0 && !same_cases(&c, j->cases))
      rc = rg_error_set("%s: holds other test cases than this run (remove it or use another --out)", path);
  } else {
    rc = generate_step(j, ck, &c);
    if (rc == 0) rc = rg_completions_write(path, &c);
  }
  int *labels = rc == 0 ? calloc((size_t)j->n_cls * c.n + 1, sizeof *labels) : NULL;
  rg_asr_scored scored[j->n_cls];
  if (rc == 0 && !labels) rc = rg_error_set("%s: out of memory", path);
  for (int k = 0; k < j->n_cls && rc == 0; k++) {
    int *lab = labels + (size_t)k * c.n;
    if (j->cls[k].info->kind == RG_CLASSIFIER_REFUSAL) rg_asr_label_refusal(j->cls[k].list, &c, lab);
    else rc = rg_asr_label_judge(j->judge, j->judge_prompts, j->behaviors, &c, &j->gen, lab);
    scored[k] = (rg_asr_scored){ck->step, j->attack, j->cls[k].info->name, &c, lab};
  }
  if (rc == 0 && !j->no_tables)
    rc = j->prompt_csv ? rg_asr_write_prompt_tables(j->out_dir, j->prompt_csv, scored, j->n_cls)
                       : rg_asr_write_tables(j->out_dir, j->behaviors, scored, j->n_cls);
  for (int k = 0; k < j->n_cls && rc == 0; k++) {
    long succ = 0;
    for (size_t i = 0; i < c.n; i++) succ += scored[k].success[i] != 0;
    if (succ_out) succ_out[k] = succ;
    if (!summary) continue;
    if (!j->json)
      printf("step %ld %s %s: %ld/%zu successes (ASR %.4f)%s\n", ck->step, j->attack, j->cls[k].info->name, succ,
             c.n, (double)succ / (double)c.n, resumed ? " [completions resumed]" : "");
    if (!j->json && j->prompt_csv) print_refusal_rates(j->out_dir, &scored[k]);
    cJSON *row = cJSON_CreateObject();
    cJSON_AddNumberToObject(row, "step", (double)ck->step);
    cJSON_AddStringToObject(row, "classifier", j->cls[k].info->name);
    cJSON_AddNumberToObject(row, "n", (double)c.n);
    cJSON_AddNumberToObject(row, "successes", (double)succ);
    cJSON_AddBoolToObject(row, "completions_resumed", resumed);
    cJSON_AddItemToArray(cJSON_GetObjectItem(summary, "results"), row);
  }
  free(labels);
  rg_completions_free(&c);
  free(path);
  return rc;
}

/* ---------------------------------------------------------------- --attack gcg */

/* The adaptive test cases of checkpoint CK into *CASES: made by GCG on its
 * own weights into DIR/gcg_test_cases_step<N>.json (resumed when a killed
 * run left a progress file; read back when an earlier run finished it),
 * then selected like fixed-source cases. */
static int adaptive_cases(const attack_spec *spec, const rg_checkpoint *ck, const char *dir, rg_asr_category cat,
                          int limit, rg_completions *cases) {
  char name[64], label[96];
  snprintf(name, sizeof name, "gcg_test_cases_step%ld.json", ck->step);
  char *path = rg_path_join(dir, name);
  if (!path) return rg_error_set("%s: out of memory", dir);
  int rc = 0;
  if (!rg_path_exists(path)) {
    attack_spec s = *spec;
    s.model = ck->path;
    snprintf(label, sizeof label, "step %ld gcg: behaviors", ck->step);
    s.progress_label = label;
    rc = attack_run(&s, path, NULL);
  }
  rg_completions made = {0};
  int n_copyright = 0;
  if (rc == 0) rc = rg_test_cases_read(path, &made);
  if (rc == 0) rc = rg_asr_select_cases(spec->behaviors, &made, path, cat, limit, cases, &n_copyright);
  rg_completions_free(&made);
  free(path);
  return rc;
}

/* DIR/transfer.csv from SUCC[(a * n + b) * n_cls + k]: the successes of
 * step a's test cases on step b under classifier k. */
static int write_transfer(const asr_job *j, const rg_checkpoint_series *series, const rg_completions *step_cases,
                          const long *succ) {
  static const char *const HEADER[] = {"attack_step", "eval_step", "classifier", "n",          "successes",
                                       "asr",         "wilson95_lo", "wilson95_hi"};
  char *path = rg_path_join(j->out_dir, "transfer.csv");
  rg_csv_writer w;
  int rc = path ? rg_csv_writer_open(&w, path, HEADER, 8) : rg_error_set("%s: out of memory", j->out_dir);
  const int n = series->n;
  for (int a = 0; a < n && rc == 0; a++)
    for (int b = 0; b < n && rc == 0; b++)
      for (int k = 0; k < j->n_cls && rc == 0; k++) {
        const long cases = (long)step_cases[a].n, x = succ[((size_t)a * n + b) * j->n_cls + k];
        double lo, hi;
        rc = rg_wilson_interval(x, cases, 1.959963984540054, &lo, &hi);
        if (rc == 0)
          rc = rg_csv_writer_int(&w, series->items[a].step) || rg_csv_writer_int(&w, series->items[b].step) ||
                       rg_csv_writer_str(&w, j->cls[k].info->name) || rg_csv_writer_int(&w, cases) ||
                       rg_csv_writer_int(&w, x) || rg_csv_writer_double(&w, (double)x / (double)cases) ||
                       rg_csv_writer_double(&w, lo) || rg_csv_writer_double(&w, hi) || rg_csv_writer_end_row(&w)
                   ? -1
                   : 0;
      }
  if (path && rc == 0) rc = rg_csv_writer_close(&w);
  else if (path) rg_csv_writer_abort(&w);
  free(path);
  return rc;
}

/* --attack gcg: per checkpoint, GCG on its weights, then its completions
 * scored as attack adaptive_gcg; with TRANSFER, every checkpoint's test
 * cases on every other checkpoint too, into transfer.csv. */
static int run_adaptive(const asr_job *job, const attack_spec *spec, const rg_checkpoint_series *series,
                        rg_asr_category cat, int limit, bool transfer, cJSON *summary) {
  const int n = series->n;
  rg_completions *step_cases = calloc((size_t)n, sizeof *step_cases);
  long *succ = calloc((size_t)n * n * job->n_cls, sizeof *succ);
  int rc = step_cases && succ ? 0 : rg_error_set("out of memory");
  char attack[512], tag[128];
  for (int i = 0; i < n && rc == 0; i++) {
    asr_job j = *job;
    rc = adaptive_cases(spec, &series->items[i], job->out_dir, cat, limit, &step_cases[i]);
    snprintf(tag, sizeof tag, "_adaptive_gcg%s", job->completions_tag);
    j.cases = &step_cases[i], j.completions_tag = tag;
    if (rc == 0) rc = run_step(&j, &series->items[i], summary, succ + ((size_t)i * n + i) * job->n_cls);
  }
  for (int b = 0; transfer && b < n && rc == 0; b++)
    for (int a = 0; a < n && rc == 0; a++) {
      if (a == b) continue;
      asr_job j = *job;
      snprintf(attack, sizeof attack, "gcg_from_step%ld", series->items[a].step);
      snprintf(tag, sizeof tag, "_gcg_from_step%ld%s", series->items[a].step, job->completions_tag);
      j.cases = &step_cases[a], j.attack = attack, j.completions_tag = tag, j.no_tables = true;
      long *x = succ + ((size_t)a * n + b) * job->n_cls;
      rc = run_step(&j, &series->items[b], NULL, x);
      for (int k = 0; rc == 0 && k < job->n_cls && !job->json; k++)
        printf("step %ld, test cases of step %ld, %s: %ld/%zu successes (ASR %.4f)\n", series->items[b].step,
               series->items[a].step, job->cls[k].info->name, x[k], step_cases[a].n,
               (double)x[k] / (double)step_cases[a].n);
    }
  if (transfer && rc == 0) rc = write_transfer(job, series, step_cases, succ);
  for (int i = 0; step_cases && i < n; i++) rg_completions_free(&step_cases[i]);
  free(step_cases);
  free(succ);
  return rc;
}

static int write_summary(const char *dir, const cJSON *summary) {
  char *path = rg_path_join(dir, "asr_run.json"), *text = cJSON_Print(summary);
  int rc = path && text ? rg_write_file_atomic(path, text, strlen(text)) : rg_error_set("%s: out of memory", dir);
  free(text);
  free(path);
  return rc;
}

/* --attack gcg's flags hold NOT_GIVEN until given (they need --attack gcg). */
enum { NOT_GIVEN = INT_MIN };

/* asr's command line. */
typedef struct {
  cli_series cs;
  const char *behaviors_path, *out_dir, *attack, *test_cases_path, *attack_name, *category_name, *judge_path,
      *chat_template, *prompts_path, *substrings, *prompt_csv_path, *prompt_column;
  int max_new, batch, limit, threads;
  bool json, fast_decode;
  int gcg_steps, gcg_width, gcg_top_k, gcg_eval_steps, gcg_batch, gcg_seed, gcg_screen;
  double gcg_check_min_loss;
  const char *gcg_targets, *gcg_init;
  bool gcg_no_retokenize, transfer;
  cli_intervention ci;
  cli_list cls_names, group_columns;
  char *default_prompts, *default_substrings, *default_targets; /* owned: the data folder's files */
} asr_flags;

static void flags_free(asr_flags *f) {
  cli_list_free(&f->cls_names);
  cli_list_free(&f->group_columns);
  free(f->default_prompts), free(f->default_substrings), free(f->default_targets);
}

static bool is_gcg(const asr_flags *f) { return f->attack && strcmp(f->attack, "gcg") == 0; }

/* Fills F from the command line: 0, 1 for --help, or -1 with the error set. */
static int parse_flags(int argc, char **argv, asr_flags *f) {
  *f = (asr_flags){.attack_name = "FixedSource", .category_name = "all", .prompt_column = "prompt",
                   .max_new = 512, .batch = 8, .gcg_steps = NOT_GIVEN, .gcg_width = NOT_GIVEN,
                   .gcg_top_k = NOT_GIVEN, .gcg_eval_steps = NOT_GIVEN, .gcg_batch = NOT_GIVEN,
                   .gcg_seed = NOT_GIVEN, .gcg_screen = NOT_GIVEN, .gcg_check_min_loss = NAN,
                   .ci = {.coeff = NAN}};
  f->default_prompts = cli_data_path("harmbench/classifier_prompts.json");
  f->default_substrings = cli_data_path("harmbench/refusal_substrings.json");
  if (!f->default_prompts || !f->default_substrings) return -1;
  f->prompts_path = f->default_prompts;
  f->substrings = f->default_substrings;
  const cli_opt opts[] = {
      CLI_SERIES_OPTS(&f->cs),
      {"behaviors", CLI_STRING, &f->behaviors_path, "HarmBench behaviors CSV"},
      {"prompts", CLI_STRING, &f->prompt_csv_path, "instead of --behaviors: any CSV of prompts (e.g. XSTest's)"},
      {"prompt-column", CLI_STRING, &f->prompt_column, "the prompt column of --prompts (prompt)"},
      {"group-column", CLI_MULTI, &f->group_columns,
       "a column of --prompts to report refusal rates by (repeatable; XSTest over-refusal: data/xstest/"
       "xstest_prompts.csv --group-column label --classifier refusal-xstest)"},
      {"out", CLI_STRING, &f->out_dir, "output directory (created; completions and tables are resumed)"},
      {"attack", CLI_STRING, &f->attack, "DirectRequest (default without --test-cases), or gcg: adaptive GCG per checkpoint"},
      {"test-cases", CLI_STRING, &f->test_cases_path, "fixed-source test cases {BehaviorID: [case, ...]}"},
      {"attack-name", CLI_STRING, &f->attack_name, "attack name of --test-cases (FixedSource)"},
      {"functional-category", CLI_STRING, &f->category_name, "standard, contextual or all non-copyright (all)"},
      {"max-new-tokens", CLI_INT, &f->max_new, "most tokens per completion (512)"},
      {"batch", CLI_INT, &f->batch, "prompts generated together (8)"},
      {"classifier", CLI_MULTI, &f->cls_names,
       "refusal-harmbench (default), refusal-advbench, refusal-rd, refusal-xstest, judge"},
      {"judge", CLI_STRING, &f->judge_path, "judge model for --classifier judge"},
      {"classifier-prompts", CLI_STRING, &f->prompts_path, "HarmBench classifier_prompts.json (data/harmbench/)"},
      {"refusal-substrings", CLI_STRING, &f->substrings, "HarmBench refusal_substrings.json (data/harmbench/)"},
      {"limit", CLI_INT, &f->limit, "score only the first N selected behaviors"},
      {"chat-template", CLI_STRING, &f->chat_template, "chat format name (default: detect)"},
      {"steps", CLI_INT, &f->gcg_steps, "--attack gcg: GCG steps per behavior (500)"},
      {"search-width", CLI_INT, &f->gcg_width, "--attack gcg: candidates per step (512)"},
      {"top-k", CLI_INT, &f->gcg_top_k, "--attack gcg: tokens per position to sample from (256)"},
      {"eval-steps", CLI_INT, &f->gcg_eval_steps, "--attack gcg: run the refusal check every N steps (50)"},
      {"check-refusal-min-loss", CLI_FLOAT, &f->gcg_check_min_loss,
       "--attack gcg: run the refusal check only below this loss (0.05; 0: never)"},
      {"gcg-batch", CLI_INT, &f->gcg_batch, "--attack gcg: candidates evaluated together (32)"},
      {"screen", CLI_INT, &f->gcg_screen, "--attack gcg: screen candidates on 8-bit activations, keep K (0: off)"},
      {"targets", CLI_STRING, &f->gcg_targets, "--attack gcg: HarmBench targets JSON (data/harmbench/)"},
      {"seed", CLI_INT, &f->gcg_seed, "--attack gcg: sampling seed (0)"},
      {"init-suffix", CLI_STRING, &f->gcg_init, "--attack gcg: initial suffix text (20 \"!\")"},
      {"no-retokenize-filter", CLI_BOOL, &f->gcg_no_retokenize,
       "--attack gcg: keep candidates whose suffix does not re-tokenize to itself (HarmBench drops them)"},
      {"transfer", CLI_BOOL, &f->transfer,
       "--attack gcg: score every step's test cases on every other step too (transfer.csv)"},
      CLI_INTERVENTION_OPTS(&f->ci),
      {"threads", CLI_INT, &f->threads, "CPU threads (all)"},
      {"fast-decode", CLI_BOOL, &f->fast_decode,
       "generate completions on 8-bit activations, as llama.cpp (default: float32)"},
      {"json", CLI_BOOL, &f->json, "print the run summary as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     CLI_SERIES_USAGE " (--behaviors CSV | --prompts CSV) --out DIR [flags]\n\nexample: refgeo asr --run-dir runs/demo --behaviors data/harmbench/harmbench_behaviors_text_val.csv --functional-category standard --max-new-tokens 64 --out runs/demo/asr", pos, 1, &n_pos);
  if (rc == 0) rc = cli_take_model(&f->cs.model, pos, &n_pos);
  return rc;
}

/* The flags that only make sense together: 0, or -1 with the first
 * conflict's error set. */
static int check_flags(const asr_flags *f) {
  const bool gcg = is_gcg(f);
  if (!f->behaviors_path == !f->prompt_csv_path)
    return rg_error_set("--behaviors / --prompts: give exactly one (a HarmBench behaviors CSV or a prompt CSV)");
  if (f->group_columns.n > 0 && !f->prompt_csv_path) return rg_error_set("--group-column: only with --prompts");
  if (!f->out_dir) return rg_error_set("--out: missing (give an output directory)");
  if (f->attack && f->test_cases_path) return rg_error_set("--attack: not with --test-cases (use --attack-name)");
  if (f->attack && strcmp(f->attack, "DirectRequest") != 0 && !gcg)
    return rg_error_set("--attack: unknown attack '%s' (DirectRequest, gcg, or --test-cases FILE)", f->attack);
  const bool gcg_flags = f->gcg_steps != NOT_GIVEN || f->gcg_width != NOT_GIVEN || f->gcg_top_k != NOT_GIVEN ||
                         f->gcg_eval_steps != NOT_GIVEN || f->gcg_batch != NOT_GIVEN || f->gcg_seed != NOT_GIVEN ||
                         f->gcg_screen != NOT_GIVEN || !isnan(f->gcg_check_min_loss) || f->gcg_targets ||
                         f->gcg_init || f->gcg_no_retokenize || f->transfer;
  if (!gcg && gcg_flags)
    return rg_error_set("--steps, --search-width, --top-k, --eval-steps, --check-refusal-min-loss, --gcg-batch, "
                        "--screen, --targets, --seed, --init-suffix, --no-retokenize-filter, --transfer: only with "
                        "--attack gcg");
  if (gcg && f->prompt_csv_path) return rg_error_set("--attack gcg: needs --behaviors (GCG attacks behaviors with targets)");
  if (f->max_new < 1) return rg_error_set("--max-new-tokens: %d is not positive", f->max_new);
  if (cli_require_positive("batch", f->batch) < 0) return -1;
  if (f->limit < 0) return rg_error_set("--limit: %d is negative", f->limit);
  return 0;
}

/* The GCG attack --attack gcg runs, its defaults HarmBench's. */
static attack_spec gcg_spec_of(const asr_flags *f, const rg_behaviors *behaviors) {
  return (attack_spec){
      .behaviors = behaviors,
      .targets_path = f->gcg_targets,
      .substrings = f->substrings,
      .chat_template = f->chat_template,
      .init_suffix = f->gcg_init,
      .category = f->category_name,
      .limit = f->limit,
      .go = {.steps = f->gcg_steps == NOT_GIVEN ? 500 : f->gcg_steps,
             .search_width = f->gcg_width == NOT_GIVEN ? 512 : f->gcg_width,
             .top_k = f->gcg_top_k == NOT_GIVEN ? 256 : f->gcg_top_k,
             .seed = (uint64_t)(unsigned)(f->gcg_seed == NOT_GIVEN ? 0 : f->gcg_seed),
             .retokenize_filter = !f->gcg_no_retokenize,
             .screen_keep = f->gcg_screen == NOT_GIVEN ? 0 : f->gcg_screen},
      .eval_steps = f->gcg_eval_steps == NOT_GIVEN ? 50 : f->gcg_eval_steps,
      .check_min_loss = isnan(f->gcg_check_min_loss) ? 0.05 : f->gcg_check_min_loss,
      .batch = f->gcg_batch == NOT_GIVEN ? 32 : f->gcg_batch,
      .threads = f->threads};
}

/* The summary's fields that describe the run (asr_run.json, --json). */
static cJSON *summary_new(const asr_flags *f, const char *attack_label, const rg_behaviors *behaviors,
                          size_t n_cases, int n_copyright) {
  cJSON *summary = cJSON_CreateObject();
  if (!summary) return NULL;
  cJSON_AddStringToObject(summary, "attack", attack_label);
  cJSON_AddStringToObject(summary, f->behaviors_path ? "behaviors" : "prompts", behaviors->path);
  if (f->prompt_csv_path) cJSON_AddStringToObject(summary, "prompt_column", f->prompt_column);
  if (f->test_cases_path) cJSON_AddStringToObject(summary, "test_cases", f->test_cases_path);
  cJSON_AddStringToObject(summary, "functional_category", f->category_name);
  cJSON_AddNumberToObject(summary, "n_test_cases", (double)n_cases);
  cJSON_AddNumberToObject(summary, "copyright_excluded", n_copyright);
  cJSON_AddStringToObject(summary, "note", "copyright behaviors are judged by hashing in HarmBench; "
                                           "refgeo leaves them out of the ASR");
  cJSON_AddNumberToObject(summary, "max_new_tokens", f->max_new);
  if (f->judge_path) cJSON_AddStringToObject(summary, "judge", f->judge_path);
  cJSON_AddArrayToObject(summary, "results");
  return summary;
}

/* The summary's record of the GCG settings. */
static void summary_add_gcg(cJSON *summary, const attack_spec *spec) {
  cJSON *g = cJSON_AddObjectToObject(summary, "gcg");
  cJSON_AddNumberToObject(g, "steps", spec->go.steps);
  cJSON_AddNumberToObject(g, "search_width", spec->go.search_width);
  cJSON_AddNumberToObject(g, "top_k", spec->go.top_k);
  cJSON_AddNumberToObject(g, "eval_steps", spec->eval_steps);
  cJSON_AddNumberToObject(g, "check_refusal_min_loss", spec->check_min_loss);
  cJSON_AddNumberToObject(g, "seed", (double)spec->go.seed);
  cJSON_AddNumberToObject(g, "screen_keep", spec->go.screen_keep);
  cJSON_AddBoolToObject(g, "retokenize_filter", spec->go.retokenize_filter);
  cJSON_AddStringToObject(g, "targets", spec->targets_path);
}

/* An intervention is part of the attack's name, and its completions get a
 * file of their own (TAG), so that a rerun never resumes unablated
 * completions. 0, or -1 with the error set. */
static int attack_label_of(const asr_flags *f, char *label, size_t label_cap, char *tag, size_t tag_cap) {
  char iv_label[256];
  if (cli_intervention_label(&f->ci, iv_label, sizeof iv_label) < 0) return -1;
  snprintf(label, label_cap, "%s%s", is_gcg(f) ? "adaptive_gcg" : f->test_cases_path ? f->attack_name : "DirectRequest",
           iv_label);
  tag[0] = '\0';
  if (iv_label[0]) {
    uint32_t h = 2166136261u; /* FNV-1a of the label */
    for (const char *c = iv_label; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    snprintf(tag, tag_cap, "%s%s_%08x", f->ci.ablate ? "_ablate" : "", f->ci.actadd ? "_actadd" : "", (unsigned)h);
  }
  return 0;
}

/* Reads the inputs, scores every checkpoint, writes the tables: 0, or -1
 * with the error set. */
static int run_asr(asr_flags *f) {
  rg_checkpoint_series *series = NULL;
  rg_behaviors *behaviors_csv = NULL;
  rg_prompt_csv *prompt_csv = NULL;
  const rg_behaviors *behaviors = NULL; /* of --behaviors or --prompts */
  rg_completions fixed = {0}, cases = {0};
  classifier cls[rg_classifier_count()];
  int n_cls = 0, n_copyright = 0, status = -1;
  rg_model *judge = NULL;
  rg_classifier_prompts judge_prompts = {0};
  cJSON *summary = NULL;
  rg_asr_category cat;
  bool has_judge = false;

  if (rg_asr_category_from_name(f->category_name, &cat) < 0) {
    rg_error_prefix("--functional-category");
    goto end;
  }
  if (!(series = cli_series_open(&f->cs))) goto end;
  if (f->behaviors_path ? !(behaviors = behaviors_csv = rg_behaviors_read(f->behaviors_path))
                        : !(prompt_csv = rg_prompt_csv_read(f->prompt_csv_path, f->prompt_column,
                                                            f->group_columns.items, f->group_columns.n)))
    goto end;
  if (prompt_csv) behaviors = prompt_csv->behaviors;
  if (f->test_cases_path && rg_test_cases_read(f->test_cases_path, &fixed) < 0) goto end;
  if (rg_asr_select_cases(behaviors, f->test_cases_path ? &fixed : NULL, f->test_cases_path, cat, f->limit, &cases,
                          &n_copyright) < 0)
    goto end;
  if (cases.n == 0) {
    rg_error_set("%s: no test cases for the selected behaviors",
                 f->test_cases_path ? f->test_cases_path : behaviors->path);
    goto end;
  }
  if (load_classifiers(&f->cls_names, f->substrings, cls, &n_cls) < 0) goto end;
  for (int k = 0; k < n_cls; k++) has_judge |= cls[k].info->kind == RG_CLASSIFIER_JUDGE;
  if (has_judge != !!f->judge_path) {
    rg_error_set(has_judge ? "--judge: missing (--classifier judge needs a judge model)"
                           : "--judge: only with --classifier judge");
    goto end;
  }
  if (has_judge && (rg_classifier_prompts_load(f->prompts_path, &judge_prompts) < 0 ||
                    !(judge = rg_model_load(f->judge_path))))
    goto end;
  if (rg_mkdir_p(f->out_dir) < 0) goto end;

  char attack_label[512], tag[64];
  if (attack_label_of(f, attack_label, sizeof attack_label, tag, sizeof tag) < 0) goto end;
  if (!(summary = summary_new(f, attack_label, behaviors, cases.n, n_copyright))) {
    rg_error_set("out of memory");
    goto end;
  }
  if (!f->json)
    printf("%zu test cases (%s); %d copyright behaviors excluded from ASR\n", cases.n, attack_label, n_copyright);

  asr_job job = {.behaviors = behaviors, .prompt_csv = prompt_csv, .cases = &cases, .attack = attack_label,
                 .completions_tag = tag, .intervention = &f->ci, .out_dir = f->out_dir,
                 .chat_template = f->chat_template,
                 .gen = {.max_new_tokens = f->max_new, .batch = f->batch, .threads = f->threads,
                         .fast_decode = f->fast_decode},
                 .cls = cls, .n_cls = n_cls, .judge = judge, .judge_prompts = &judge_prompts, .json = f->json};
  if (is_gcg(f)) {
    if (!f->gcg_targets &&
        !(f->gcg_targets = f->default_targets = cli_data_path("harmbench/harmbench_targets_text.json")))
      goto end;
    const attack_spec spec = gcg_spec_of(f, behaviors);
    summary_add_gcg(summary, &spec);
    if (attack_spec_check(&spec) < 0 || run_adaptive(&job, &spec, series, cat, f->limit, f->transfer, summary) < 0)
      goto end;
  } else {
    for (int i = 0; i < series->n; i++)
      if (run_step(&job, &series->items[i], summary, NULL) < 0) goto end;
  }
  if (write_summary(f->out_dir, summary) < 0) goto end;
  if (f->json && cli_print_json(cJSON_Duplicate(summary, true)) < 0) goto end;
  status = 0;
end:
  cJSON_Delete(summary);
  rg_model_free(judge);
  rg_classifier_prompts_free(&judge_prompts);
  for (int k = 0; k < n_cls; k++) rg_refusal_list_free(cls[k].list);
  rg_completions_free(&cases);
  rg_completions_free(&fixed);
  rg_behaviors_free(behaviors_csv);
  rg_prompt_csv_free(prompt_csv);
  rg_checkpoints_free(series);
  return status;
}

int cmd_asr(int argc, char **argv) {
  asr_flags f;
  int rc = parse_flags(argc, argv, &f);
  if (rc == 0) rc = check_flags(&f);
  if (rc == 0) rc = run_asr(&f);
  flags_free(&f);
  return rc > 0 ? 0 : rc < 0 ? cli_fail() : 0;
}
