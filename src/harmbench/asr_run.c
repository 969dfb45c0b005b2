/* asr_run.c: the per-checkpoint HarmBench ASR pipeline (see asr_run.h). */
#include "harmbench/asr_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/asr_curve.h"
#include "harmbench/asr_stats.h"
#include "engine/context_len.h"
#include "engine/generate.h"
#include "harmbench/py_whitespace.h"
#include "tokenizer/tokenizer.h"
#include "util/csv_table.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/fileio.h"

/* HarmBench clips every generation to this many judge tokens
 * (evaluate_completions.py:53-62). */
enum { JUDGE_MAX_GENERATION_TOKENS = 512 };

int rg_asr_category_from_name(const char *name, rg_asr_category *out) {
  if (strcmp(name, "all") == 0) *out = RG_ASR_NON_COPYRIGHT;
  else if (strcmp(name, "standard") == 0) *out = RG_ASR_STANDARD;
  else if (strcmp(name, "contextual") == 0) *out = RG_ASR_CONTEXTUAL;
  else return rg_error_set("unknown functional category '%s' (standard, contextual, all)", name);
  return 0;
}

static bool selected(const rg_behavior *b, rg_asr_category cat) {
  if (rg_behavior_is_copyright(b)) return false;
  if (cat == RG_ASR_STANDARD) return strcmp(b->functional_category, "standard") == 0;
  if (cat == RG_ASR_CONTEXTUAL) return rg_behavior_is_contextual(b);
  return true;
}

int rg_asr_select_cases(const rg_behaviors *b, const rg_completions *fixed, const char *fixed_path,
                        rg_asr_category cat, int limit, rg_completions *out, int *n_copyright) {
  memset(out, 0, sizeof *out);
  *n_copyright = 0;
  if (fixed)
    for (size_t i = 0; i < fixed->n; i++)
      if (!rg_behaviors_find(b, fixed->items[i].behavior_id))
        return rg_error_set("%s: BehaviorID '%s' is not in %s", fixed_path, fixed->items[i].behavior_id, b->path);
  int taken = 0;
  for (size_t i = 0; i < b->n; i++) {
    const rg_behavior *bh = &b->items[i];
    if (rg_behavior_is_copyright(bh)) (*n_copyright)++;
    if (!selected(bh, cat) || (limit > 0 && taken >= limit)) continue;
    taken++;
    if (!fixed) {
      char *tc = rg_behavior_direct_request(bh);
      int rc = tc ? rg_completions_add(out, bh->id, tc, NULL) : -1;
      free(tc);
      if (rc < 0) goto oom;
      continue;
    }
    for (size_t j = 0; j < fixed->n; j++)
      if (strcmp(fixed->items[j].behavior_id, bh->id) == 0 &&
          rg_completions_add(out, bh->id, fixed->items[j].test_case, NULL) < 0)
        goto oom;
  }
  return 0;
oom:
  rg_completions_free(out);
  return rg_error_set("%s: out of memory building test cases", b->path);
}

int rg_asr_generate(const rg_model *m, const int32_t *const *prompts, const int *lens, int n,
                    const rg_asr_gen_opts *o, char **generations) {
  if (n == 0) return 0;
  if (o->batch < 1) return rg_error_set("batch size %d is not positive", o->batch);
  int max_len = 0;
  for (int i = 0; i < n; i++)
    if (lens[i] > max_len) max_len = lens[i];
  int batch = o->batch < n ? o->batch : n, ctx;
  if (rg_context_len(&m->cfg, max_len, o->max_new_tokens, &ctx) < 0) return rg_error_prefix("%s", m->path);
  rg_backend_opts bo = {.threads = o->threads};
  /* decode-bound: weights in the file dtype (weights.h, RG_WEIGHTS_TILED[_Q8]) */
  rg_weights *w = rg_weights_open(m, &bo, o->fast_decode ? RG_WEIGHTS_TILED_Q8 : RG_WEIGHTS_TILED);
  rg_session *s = w ? rg_session_new(w, batch, ctx, NULL) : NULL;
  if (!s || (o->intervention && rg_session_set_intervention(s, o->intervention) < 0)) {
    rg_session_free(s);
    rg_weights_free(w);
    return -1;
  }
  rg_gen_opts go = {.max_new_tokens = o->max_new_tokens, .stop_ids = o->stop_ids, .n_stop = o->n_stop};
  /* on the heap: BATCH comes from the user (--batch), and the stack is small */
  rg_gen_result *r = calloc((size_t)batch, sizeof *r);
  memset(generations, 0, (size_t)n * sizeof *generations);
  int rc = r ? 0 : rg_error_set("%s: out of memory for %d results", m->path, batch);
  rg_progress prog;
  rg_progress_start(&prog, o->progress, o->progress_label ? o->progress_label : "generating", n);
  for (int first = 0; first < n && rc == 0; first += batch) {
    int k = n - first < batch ? n - first : batch;
    if ((rc = rg_generate(s, prompts + first, lens + first, k, &go, r)) < 0) break;
    for (int i = 0; i < k && rc == 0; i++) /* generate_completions.py: decode, then .strip() */
      if (!(generations[first + i] = rg_detokenize(m->tokenizer, r[i].ids, r[i].n, true))) rc = -1;
      else rg_py_strip(generations[first + i]);
    rg_gen_results_free(r, k);
    rg_progress_tick(&prog, first + k);
  }
  if (rc == 0) rg_progress_end(&prog);
  free(r);
  rg_session_free(s);
  rg_weights_free(w);
  if (rc < 0)
    for (int i = 0; i < n; i++) {
      free(generations[i]);
      generations[i] = NULL;
    }
  return rc;
}

void rg_asr_label_refusal(const rg_refusal_list *l, const rg_completions *c, int *success) {
  for (size_t i = 0; i < c->n; i++) success[i] = !rg_refusal_matches(l, c->items[i].generation);
}

/* Tokenized judge prompt of completion I. */
static int judge_prompt(const rg_model *judge, const rg_classifier_prompts *p, const rg_behaviors *b,
                        const rg_completion *c, int32_t **ids, int *n_ids) {
  const rg_behavior *bh = rg_behaviors_find(b, c->behavior_id);
  if (!bh) return rg_error_set("%s: BehaviorID '%s' of a completion is not in the file", b->path, c->behavior_id);
  char *clipped = rg_judge_truncate(judge->tokenizer, c->generation, JUDGE_MAX_GENERATION_TOKENS);
  char *prompt = clipped ? rg_classifier_prompt_render(p, bh, clipped) : NULL;
  /* parse_special: the template's literal "[INST]" is plain text for
   * Llama-2's tokenizer either way; a judge whose vocabulary has it as a
   * special token gets it as one, as HF's tokenizer would. */
  int rc = prompt ? rg_tokenize(judge->tokenizer, prompt, strlen(prompt), true, true, ids, n_ids) : -1;
  free(prompt);
  free(clipped);
  return rc;
}

int rg_asr_label_judge(const rg_model *judge, const rg_classifier_prompts *p, const rg_behaviors *b,
                       const rg_completions *c, const rg_asr_gen_opts *o, int *success) {
  int n = (int)c->n, rc = 0;
  int32_t **ids = calloc(c->n ? c->n : 1, sizeof *ids);
  int *lens = calloc(c->n ? c->n : 1, sizeof *lens);
  char **answers = calloc(c->n ? c->n : 1, sizeof *answers);
  if (!ids || !lens || !answers) rc = rg_error_set("%s: out of memory for judge prompts", judge->path);
  for (int i = 0; i < n && rc == 0; i++) rc = judge_prompt(judge, p, b, &c->items[i], &ids[i], &lens[i]);
  /* Greedy, one token, no stop ids: the verdict is the first token whatever it is. */
  rg_asr_gen_opts jo = {.max_new_tokens = 1, .batch = o->batch, .threads = o->threads};
  if (rc == 0) rc = rg_asr_generate(judge, (const int32_t *const *)ids, lens, n, &jo, answers);
  for (int i = 0; i < n; i++) {
    if (rc == 0) success[i] = rg_judge_label(answers[i]) == 1;
    free(answers[i]);
    if (ids) free(ids[i]);
  }
  free(answers);
  free(lens);
  free(ids);
  return rc;
}

/* ---- tables ---- */

static const char *const CATEGORY_HEADER[] = {"step", "attack", "classifier", "category_type", "category",
                                              "n", "successes", "asr", "wilson95_lo", "wilson95_hi"};
enum { CATEGORY_COLS = (int)(sizeof CATEGORY_HEADER / sizeof CATEGORY_HEADER[0]) };

static bool is_scored(const rg_asr_scored *s, int n, long step, const char *attack, const char *classifier) {
  for (int i = 0; i < n; i++)
    if (s[i].step == step && strcmp(s[i].attack, attack) == 0 && strcmp(s[i].classifier, classifier) == 0)
      return true;
  return false;
}

static int write_overall(const char *path, const rg_asr_scored *s, int n) {
  rg_asr_curve old = {0}, out = {0};
  if (rg_path_exists(path) && rg_asr_curve_read(path, &old) < 0) return -1;
  out.items = calloc(old.n + (size_t)n, sizeof *out.items);
  if (!out.items) {
    rg_asr_curve_free(&old);
    return rg_error_set("%s: out of memory", path);
  }
  /* The new curve borrows the strings of OLD and S; only OLD frees. */
  for (size_t i = 0; i < old.n; i++)
    if (!is_scored(s, n, old.items[i].step, old.items[i].attack, old.items[i].classifier))
      out.items[out.n++] = old.items[i];
  for (int i = 0; i < n; i++) {
    long k = 0;
    for (size_t j = 0; j < s[i].c->n; j++) k += s[i].success[j] != 0;
    out.items[out.n++] = (rg_asr_point){.step = s[i].step, .attack = (char *)s[i].attack,
                                        .classifier = (char *)s[i].classifier, .n = (long)s[i].c->n,
                                        .successes = k};
  }
  int rc = rg_asr_curve_write(path, &out);
  free(out.items);
  rg_asr_curve_free(&old);
  return rc;
}

static void write_rate(rg_csv_writer *w, long k, long n) {
  double lo, hi;
  rg_wilson_interval(k, n, RG_Z95, &lo, &hi); /* n > 0: a category exists only with a member */
  rg_csv_writer_int(w, n);
  rg_csv_writer_int(w, k);
  rg_csv_writer_double(w, (double)k / (double)n);
  rg_csv_writer_double(w, lo);
  rg_csv_writer_double(w, hi);
}

/* Rows of one scored entry for one category type: each distinct category in
 * order of first appearance, counted over the completions. */
static int write_categories(rg_csv_writer *w, const rg_behaviors *b, const rg_asr_scored *s, bool functional) {
  size_t n = s->c->n;
  const char **seen = calloc(n ? n : 1, sizeof *seen);
  if (!seen) return rg_error_set("%s: out of memory", b->path);
  size_t n_seen = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const rg_behavior *bi = rg_behaviors_find(b, s->c->items[i].behavior_id);
    if (!bi) {
      rc = rg_error_set("%s: BehaviorID '%s' of a completion is not in the file", b->path,
                        s->c->items[i].behavior_id);
      break;
    }
    const char *cat = functional ? bi->functional_category : bi->semantic_category;
    bool done = false;
    for (size_t j = 0; j < n_seen && !done; j++) done = strcmp(seen[j], cat) == 0;
    if (done) continue;
    seen[n_seen++] = cat;
    long k = 0, m = 0;
    for (size_t j = i; j < n; j++) {
      const rg_behavior *bj = rg_behaviors_find(b, s->c->items[j].behavior_id);
      if (!bj || strcmp(functional ? bj->functional_category : bj->semantic_category, cat) != 0) continue;
      m++;
      k += s->success[j] != 0;
    }
    rg_csv_writer_int(w, s->step);
    rg_csv_writer_str(w, s->attack);
    rg_csv_writer_str(w, s->classifier);
    rg_csv_writer_str(w, functional ? "FunctionalCategory" : "SemanticCategory");
    rg_csv_writer_str(w, cat);
    write_rate(w, k, m);
    rc = rg_csv_writer_end_row(w);
  }
  free(seen);
  return rc;
}

/* Opens W on PATH with HEADER (its first columns step, attack, classifier)
 * and copies the rows already in PATH whose key is not among S, so that runs
 * add to a table and a rerun replaces its own rows. An existing PATH must
 * have exactly HEADER (WHAT names the table in the error). */
static int open_merged(rg_csv_writer *w, const char *path, const char *const *header, int n_cols, const char *what,
                       const rg_asr_scored *s, int n) {
  rg_csv *old = NULL;
  if (rg_path_exists(path)) {
    if (!(old = rg_csv_read(path))) return -1;
    bool same = old->n_cols == n_cols;
    for (int c = 0; same && c < n_cols; c++) same = strcmp(old->header[c], header[c]) == 0;
    if (!same) {
      rg_csv_free(old);
      return rg_error_set("%s: not an %s table (unexpected header)", path, what);
    }
  }
  if (rg_csv_writer_open(w, path, header, n_cols) < 0) {
    rg_csv_free(old);
    return -1;
  }
  int rc = 0;
  for (size_t r = 0; old && r < old->n_rows && rc == 0; r++) {
    char **row = old->rows[r];
    char *end;
    long step = strtol(row[0], &end, 10);
    if (*row[0] && !*end && is_scored(s, n, step, row[1], row[2])) continue;
    for (int c = 0; c < n_cols; c++) rg_csv_writer_str(w, row[c]);
    rc = rg_csv_writer_end_row(w);
  }
  rg_csv_free(old);
  if (rc < 0) rg_csv_writer_abort(w);
  return rc;
}

/* Closes W, or discards it when RC < 0. */
static int close_merged(rg_csv_writer *w, int rc) {
  if (rc < 0) {
    rg_csv_writer_abort(w);
    return -1;
  }
  return rg_csv_writer_close(w);
}

static int write_by_category(const char *path, const rg_behaviors *b, const rg_asr_scored *s, int n) {
  rg_csv_writer w;
  if (open_merged(&w, path, CATEGORY_HEADER, CATEGORY_COLS, "asr_by_category", s, n) < 0) return -1;
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    rc = write_categories(&w, b, &s[i], true);
    if (rc == 0) rc = write_categories(&w, b, &s[i], false);
  }
  return close_merged(&w, rc);
}

int rg_asr_write_tables(const char *dir, const rg_behaviors *b, const rg_asr_scored *s, int n) {
  for (int i = 0; i < n; i++)
    if (s[i].c->n == 0) return rg_error_set("%s: no completions to score for step %ld", dir, s[i].step);
  char *overall = rg_path_join(dir, "asr.csv"), *by_cat = rg_path_join(dir, "asr_by_category.csv");
  int rc = overall && by_cat ? 0 : rg_error_set("%s: out of memory", dir);
  if (rc == 0) rc = write_by_category(by_cat, b, s, n);
  if (rc == 0) rc = write_overall(overall, s, n);
  free(overall);
  free(by_cat);
  return rc;
}

/* ---- refusal rates of a prompt set ---- */

static const char *const REFUSAL_HEADER[] = {"step", "attack", "classifier", "group_column", "group", "n",
                                             "refusals", "refusal_rate", "wilson95_lo", "wilson95_hi"};
enum { REFUSAL_COLS = (int)(sizeof REFUSAL_HEADER / sizeof REFUSAL_HEADER[0]) };

static int write_refusal_row(rg_csv_writer *w, const rg_asr_scored *s, const char *column, const char *group,
                             long refusals, long n) {
  rg_csv_writer_int(w, s->step);
  rg_csv_writer_str(w, s->attack);
  rg_csv_writer_str(w, s->classifier);
  rg_csv_writer_str(w, column);
  rg_csv_writer_str(w, group);
  write_rate(w, refusals, n);
  return rg_csv_writer_end_row(w);
}

/* The rows of one scored entry: "all", then per group column each value in
 * order of first appearance. ROW[i] is the prompt-set row of completion i. */
static int write_refusal_groups(rg_csv_writer *w, const rg_prompt_csv *p, const rg_asr_scored *s, const long *row) {
  size_t n = s->c->n;
  long refusals = 0;
  for (size_t i = 0; i < n; i++) refusals += s->success[i] == 0;
  int rc = write_refusal_row(w, s, "all", "all", refusals, (long)n);
  for (int g = 0; g < p->n_groups && rc == 0; g++) {
    char *const *values = p->group_values[g];
    for (size_t i = 0; i < n && rc == 0; i++) {
      const char *v = values[row[i]];
      bool seen = false;
      for (size_t j = 0; j < i && !seen; j++) seen = strcmp(values[row[j]], v) == 0;
      if (seen) continue;
      long k = 0, m = 0;
      for (size_t j = i; j < n; j++)
        if (strcmp(values[row[j]], v) == 0) m++, k += s->success[j] == 0;
      rc = write_refusal_row(w, s, p->group_cols[g], v, k, m);
    }
  }
  return rc;
}

int rg_asr_write_prompt_tables(const char *dir, const rg_prompt_csv *p, const rg_asr_scored *s, int n) {
  for (int i = 0; i < n; i++)
    if (s[i].c->n == 0) return rg_error_set("%s: no completions to score for step %ld", dir, s[i].step);
  char *overall = rg_path_join(dir, "asr.csv"), *rates = rg_path_join(dir, "refusal_rates.csv");
  rg_csv_writer w;
  int rc = overall && rates ? 0 : rg_error_set("%s: out of memory", dir);
  if (rc == 0 && (rc = open_merged(&w, rates, REFUSAL_HEADER, REFUSAL_COLS, "refusal_rates", s, n)) == 0) {
    for (int i = 0; i < n && rc == 0; i++) {
      long *row = calloc(s[i].c->n, sizeof *row);
      if (!row) rc = rg_error_set("%s: out of memory", rates);
      for (size_t j = 0; row && j < s[i].c->n && rc == 0; j++)
        if ((row[j] = rg_prompt_csv_row(p, s[i].c->items[j].behavior_id)) < 0)
          rc = rg_error_set("%s: id '%s' of a completion is not in the file", p->behaviors->path,
                            s[i].c->items[j].behavior_id);
      if (rc == 0) rc = write_refusal_groups(&w, p, &s[i], row);
      free(row);
    }
    rc = close_merged(&w, rc);
  }
  if (rc == 0) rc = write_overall(overall, s, n);
  free(overall);
  free(rates);
  return rc;
}
