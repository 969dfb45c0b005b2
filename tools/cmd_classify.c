/* cmd_classify: `refgeo classify --classifier NAME (--completions FILE.json |
 * --csv FILE.csv --column COL) [--out FILE] [--label-name label]
 * [--refusal-substrings FILE] [--judge MODEL --behaviors CSV
 * [--classifier-prompts FILE] [--batch 8] [--threads N]] [--json]`
 *
 * Labels completions that already exist with one of refgeo's classifiers
 * (harmbench/classifiers.h), so that old runs can be re-scored and
 * classifiers compared on the same text. The output is the input with one
 * label added, HarmBench's convention for every classifier: 1 = success (not
 * a refusal; the judge said "Yes"), 0 = refused.
 *   --completions  a HarmBench completions JSON ({BehaviorID: [{test_case,
 *                  generation, ...}]}, as `refgeo asr` writes it): each
 *                  completion object gets the field LABEL-NAME; its other
 *                  fields and the key order are kept.
 *   --csv          any CSV: the text of column COL is classified and a column
 *                  LABEL-NAME is appended; every other field is kept as read.
 * The output (default: the input's file name with ".NAME" before its
 * extension, in the current directory) is the file --out, written
 * atomically. A label field or column that already exists is an error
 * rather than overwritten. One summary line goes to stdout (--json: {"input",
 * "out", "classifier", "n", "refused"}).
 *
 * --classifier judge needs --completions, --behaviors (the judge prompt is
 * built from the behavior) and --judge MODEL; a CSV has no behaviors, so
 * the judge refuses it. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_classifier.h"
#include "cli_data.h"
#include "commands.h"
#include "harmbench/asr_run.h"
#include "harmbench/classifiers.h"
#include "util/csv_table.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* What one run needs to label a list of completions. */
typedef struct {
  const rg_classifier_info *info;
  rg_refusal_list *list;             /* string rules */
  const rg_model *judge;             /* judge */
  const rg_classifier_prompts *judge_prompts;
  const rg_behaviors *behaviors;
  rg_asr_gen_opts gen;
} labeller;

static int label_all(const labeller *l, const rg_completions *c, int *labels) {
  if (l->info->kind == RG_CLASSIFIER_REFUSAL) {
    rg_asr_label_refusal(l->list, c, labels);
    return 0;
  }
  return rg_asr_label_judge(l->judge, l->judge_prompts, l->behaviors, c, &l->gen, labels);
}

/* The default output: basename of INPUT with ".CLASSIFIER" before its
 * extension, in the current directory (never beside the input, which may be
 * read-only shipped data). */
static char *default_out(const char *input, const char *classifier) {
  const char *base = strrchr(input, '/');
  base = base ? base + 1 : input;
  const char *dot = strrchr(base, '.');
  size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  size_t n = strlen(base) + strlen(classifier) + 2;
  char *out = malloc(n);
  if (!out) {
    rg_error_set("%s: out of memory", input);
    return NULL;
  }
  snprintf(out, n, "%.*s.%s%s", (int)stem, base, classifier, dot && dot != base ? dot : "");
  return out;
}

static long count_refused(const int *labels, size_t n) {
  long k = 0;
  for (size_t i = 0; i < n; i++) k += labels[i] == 0;
  return k;
}

/* --csv: classify column COL of IN, write IN plus the label column to OUT. */
static int classify_csv(const labeller *l, const char *in, const char *col, const char *label_name,
                        const char *out, long *n_out, long *refused) {
  rg_csv *t = rg_csv_read(in);
  if (!t) return -1;
  rg_completions c = {0};
  int *labels = NULL;
  const char **header = NULL;
  int c_text = rg_csv_flag_col(t, col, "--column"), rc = c_text < 0 ? -1 : 0;
  if (rc == 0 && rg_csv_col(t, label_name) >= 0)
    rc = rg_error_set("%s: already has a column '%s' (name the new one with --label-name)", in, label_name);
  /* The rows as completions (row number as id), so every classifier takes
   * the same input type. */
  for (size_t r = 0; r < t->n_rows && rc == 0; r++) {
    char id[32];
    snprintf(id, sizeof id, "%zu", r + 1);
    rc = rg_completions_add(&c, id, "", t->rows[r][c_text]);
  }
  if (rc == 0 && (!(labels = calloc(t->n_rows + 1, sizeof *labels)) ||
                  !(header = calloc((size_t)t->n_cols + 1, sizeof *header))))
    rc = rg_error_set("%s: out of memory", in);
  if (rc == 0) rc = label_all(l, &c, labels);
  rg_csv_writer w;
  if (rc == 0) {
    memcpy(header, t->header, (size_t)t->n_cols * sizeof *header);
    header[t->n_cols] = label_name;
    rc = rg_csv_writer_open(&w, out, header, t->n_cols + 1);
    for (size_t r = 0; r < t->n_rows && rc == 0; r++) {
      for (int k = 0; k < t->n_cols; k++) rg_csv_writer_str(&w, t->rows[r][k]);
      rg_csv_writer_int(&w, labels[r]);
      if ((rc = rg_csv_writer_end_row(&w)) < 0) rg_csv_writer_abort(&w);
    }
    if (rc == 0) rc = rg_csv_writer_close(&w);
  }
  *n_out = (long)t->n_rows;
  *refused = rc == 0 ? count_refused(labels, t->n_rows) : 0;
  free(header);
  free(labels);
  rg_completions_free(&c);
  rg_csv_free(t);
  return rc;
}

/* --completions: label every completion object of IN in file order (the
 * order rg_completions_read lists them) and write the tree to OUT. */
static int classify_json(const labeller *l, const char *in, const char *label_name, const char *out, long *n_out,
                         long *refused) {
  rg_completions c = {0};
  if (rg_completions_read(in, &c) < 0) return -1;
  char *printed = NULL;
  cJSON *root = rg_json_read_file(in); /* read once already: only memory can fail here */
  int *labels = calloc(c.n + 1, sizeof *labels);
  int rc = !root ? -1 : labels ? 0 : rg_error_set("%s: out of memory", in);
  if (rc == 0) rc = label_all(l, &c, labels);
  size_t i = 0;
  const cJSON *list;
  cJSON_ArrayForEach(list, root) {
    cJSON *e;
    cJSON_ArrayForEach(e, list) {
      if (rc < 0) break;
      if (cJSON_GetObjectItemCaseSensitive(e, label_name))
        rc = rg_error_set("%s: a completion of %s already has a field '%s' (name the new one with --label-name)", in,
                          list->string, label_name);
      else if (!cJSON_AddNumberToObject(e, label_name, labels[i++]))
        rc = rg_error_set("%s: out of memory", in);
    }
  }
  if (rc == 0 && !(printed = cJSON_Print(root))) rc = rg_error_set("%s: out of memory", in);
  if (rc == 0) rc = rg_write_file_atomic(out, printed, strlen(printed));
  *n_out = (long)c.n;
  *refused = rc == 0 ? count_refused(labels, c.n) : 0;
  free(printed);
  free(labels);
  cJSON_Delete(root);
  rg_completions_free(&c);
  return rc;
}

int cmd_classify(int argc, char **argv) {
  char *default_prompts = cli_data_path("harmbench/classifier_prompts.json"),
       *default_substrings = cli_data_path("harmbench/refusal_substrings.json");
  if (!default_prompts || !default_substrings) {
    free(default_prompts), free(default_substrings);
    return cli_fail();
  }
  const char *name = NULL, *json_path = NULL, *csv_path = NULL, *column = NULL, *out = NULL, *label_name = "label",
             *substrings = default_substrings, *judge_path = NULL, *behaviors_path = NULL,
             *prompts_path = default_prompts;
  int batch = 8, threads = 0;
  bool json = false;
  const cli_opt opts[] = {
      {"classifier", CLI_STRING, &name, "refusal-harmbench, refusal-advbench, refusal-rd, refusal-xstest, judge"},
      {"completions", CLI_STRING, &json_path, "HarmBench completions JSON to label"},
      {"csv", CLI_STRING, &csv_path, "CSV to label (with --column)"},
      {"column", CLI_STRING, &column, "the CSV column holding the completions"},
      {"out", CLI_STRING, &out, "output file (default: INPUT.NAME.ext in the current directory)"},
      {"label-name", CLI_STRING, &label_name, "added column / field (label): 1 = not refused (judge: yes), 0 = refused"},
      {"refusal-substrings", CLI_STRING, &substrings, "HarmBench refusal_substrings.json (data/harmbench/)"},
      {"judge", CLI_STRING, &judge_path, "judge model for --classifier judge"},
      {"behaviors", CLI_STRING, &behaviors_path, "HarmBench behaviors CSV for --classifier judge"},
      {"classifier-prompts", CLI_STRING, &prompts_path, "HarmBench classifier_prompts.json (data/harmbench/)"},
      {"batch", CLI_INT, &batch, "judge prompts run together (8)"},
      {"threads", CLI_INT, &threads, "CPU threads for the judge (all)"},
      {"json", CLI_BOOL, &json, "print the summary as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "--classifier NAME (--completions FILE.json | --csv FILE.csv --column COL) [--out FILE]\n\nexample: refgeo classify --classifier refusal-harmbench --completions runs/demo/asr/completions_step0.json", pos, 0,
                     &n_pos);
  if (rc != 0) {
    free(default_prompts), free(default_substrings);
    return rc > 0 ? 0 : cli_fail();
  }
  labeller l = {.gen = {.batch = batch, .threads = threads}};
  rg_model *judge = NULL;
  rg_behaviors *behaviors = NULL;
  rg_classifier_prompts judge_prompts = {0};
  char *derived_out = NULL;
  long n = 0, refused = 0;
  const char *input = json_path ? json_path : csv_path;

  if (!name) rc = rg_error_set("--classifier: missing (%s)", rg_classifier_names());
  else if (!json_path == !csv_path) rc = rg_error_set("--completions / --csv: give exactly one");
  else if (csv_path && !column) rc = rg_error_set("--column: missing (the CSV column holding the completions)");
  else if (json_path && column) rc = rg_error_set("--column: only with --csv");
  else if (cli_require_positive("batch", batch) < 0) rc = -1;
  else if (!(l.info = cli_classifier_find(name))) rc = -1;
  else if (l.info->kind == RG_CLASSIFIER_JUDGE && (!json_path || !behaviors_path || !judge_path))
    rc = rg_error_set("--classifier judge: needs --completions FILE.json, --behaviors CSV and --judge MODEL "
                      "(the judge prompt is built from each completion's behavior)");
  else if (l.info->kind != RG_CLASSIFIER_JUDGE && (judge_path || behaviors_path))
    rc = rg_error_set("--judge / --behaviors: only with --classifier judge");
  if (rc == 0 && !out) rc = (out = derived_out = default_out(input, l.info->name)) ? 0 : -1;
  if (rc == 0 && l.info->kind == RG_CLASSIFIER_REFUSAL)
    rc = (l.list = cli_classifier_list(l.info, substrings)) ? 0 : -1;
  if (rc == 0 && l.info->kind == RG_CLASSIFIER_JUDGE) {
    rc = rg_classifier_prompts_load(prompts_path, &judge_prompts);
    if (rc == 0) rc = (behaviors = rg_behaviors_read(behaviors_path)) ? 0 : -1;
    if (rc == 0) rc = (judge = rg_model_load(judge_path)) ? 0 : -1;
    l.judge = judge, l.judge_prompts = &judge_prompts, l.behaviors = behaviors;
  }
  if (rc == 0)
    rc = json_path ? classify_json(&l, json_path, label_name, out, &n, &refused)
                   : classify_csv(&l, csv_path, column, label_name, out, &n, &refused);
  if (rc == 0 && json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "input", input);
    cJSON_AddStringToObject(o, "out", out);
    cJSON_AddStringToObject(o, "classifier", l.info->name);
    cJSON_AddNumberToObject(o, "n", (double)n);
    cJSON_AddNumberToObject(o, "refused", (double)refused);
    rc = cli_print_json(o);
  } else if (rc == 0) {
    printf("%s: %ld completions, %ld labelled 0 (refused), %ld labelled 1 (%s) -> %s\n", input, n, refused,
           n - refused, l.info->name, out);
  }
  rg_refusal_list_free(l.list);
  rg_model_free(judge);
  rg_behaviors_free(behaviors);
  rg_classifier_prompts_free(&judge_prompts);
  free(derived_out);
  free(default_prompts), free(default_substrings);
  return rc == 0 ? 0 : cli_fail();
}
