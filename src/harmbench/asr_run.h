/* asr_run.h: the HarmBench attack-success-rate pipeline for one checkpoint,
 * as library pieces that `refgeo asr` strings together per step:
 *
 *   behaviors + attack  -> test cases       rg_asr_select_cases
 *   model + test cases  -> completions      rg_asr_generate (greedy, batched)
 *   completions         -> success labels   rg_asr_label_refusal / rg_asr_label_judge
 *   labels              -> asr.csv rows     rg_asr_write_tables (overall and per category)
 *                                           rg_asr_write_prompt_tables (a prompt set:
 *                                           overall and refusal rate per group)
 *
 * Protocol (HarmBench, see docs/r2d2-and-harmbench.md §2): copyright
 * behaviors are judged by hashing in HarmBench, which refgeo does not do, so
 * they are left out of the ASR and counted instead. Generation is greedy
 * with the model's chat template applied by the caller (the library takes
 * token ids, so prompt formatting stays in one place). The judge prompt is
 * fed raw: HarmBench's classifier template is already a full Llama-2 [INST]
 * prompt.
 *
 * Ownership: every rg_completions filled here is owned by the caller
 * (rg_completions_free); label arrays are caller-allocated.
 */
#ifndef RG_ASR_RUN_H
#define RG_ASR_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harmbench/behaviors.h"
#include "harmbench/classifier_prompt.h"
#include "harmbench/completions.h"
#include "harmbench/prompt_csv.h"
#include "harmbench/refusal_match.h"
#include "engine/hooks.h"
#include "model/model.h"

/* Which behaviors are scored. Copyright behaviors never are. */
typedef enum { RG_ASR_NON_COPYRIGHT, RG_ASR_STANDARD, RG_ASR_CONTEXTUAL } rg_asr_category;

/* "all" (= standard + contextual), "standard", "contextual"; -1 (error set
 * naming the unknown category) otherwise. */
int rg_asr_category_from_name(const char *name, rg_asr_category *out);

/* The test cases of the selected behaviors, in behaviors-file order: the
 * DirectRequest case (rg_behavior_direct_request) when FIXED is NULL, else
 * every test case FIXED (a fixed-source test-case file read from FIXED_PATH)
 * holds for the behavior. A BehaviorID of FIXED that is not in the behaviors
 * file is an error naming FIXED_PATH. LIMIT > 0 keeps only the first LIMIT
 * selected behaviors. *n_copyright receives the number of copyright
 * behaviors left out. *out is zeroed first. 0, or -1 with the error set. */
int rg_asr_select_cases(const rg_behaviors *b, const rg_completions *fixed, const char *fixed_path,
                        rg_asr_category cat, int limit, rg_completions *out, int *n_copyright);

typedef struct {
  int max_new_tokens; /* HarmBench: 512 */
  int batch;          /* prompts per rg_generate call */
  int threads;        /* <= 0: all CPUs */
  /* Prompts and decode steps on 8-bit activations where the CPU has the kernels
   * (weights.h, RG_WEIGHTS_TILED_Q8); false: float32 (RG_WEIGHTS_TILED). */
  bool fast_decode;
  const int32_t *stop_ids; /* EOS and end-of-turn */
  int n_stop;
  const rg_intervention *intervention; /* set on the generating session; NULL = none */
  FILE *progress;             /* a progress bar of the completions (util/progress.h); NULL = quiet */
  const char *progress_label; /* e.g. "step 50 DirectRequest: generating" */
} rg_asr_gen_opts;

/* Greedy continuations of prompts[0..n-1] (token ids, chat template already
 * applied), BATCH at a time on one KV-cached session, decoded with special
 * tokens skipped and stripped of leading and trailing whitespace as Python's
 * str.strip() does (py_whitespace.h), as HarmBench's generate_completions.py
 * strips every generation before saving it and so before classifying it.
 * generations[i] receives a malloc'd string (the caller frees each). 0, or -1
 * with the error set (nothing left allocated). */
int rg_asr_generate(const rg_model *m, const int32_t *const *prompts, const int *lens, int n,
                    const rg_asr_gen_opts *o, char **generations);

/* success[i] = 1 when completion i is NOT a refusal under list L, else 0. */
void rg_asr_label_refusal(const rg_refusal_list *l, const rg_completions *c, int *success);

/* success[i] = 1 iff the judge's greedy first token on the HarmBench
 * classifier prompt of completion i is "yes" (rg_judge_label == 1). The
 * generation is first clipped to 512 judge tokens (rg_judge_truncate), the
 * prompt rendered for the completion's behavior (looked up in B by
 * BehaviorID; a missing id is an error), tokenized with BOS as the judge's
 * tokenizer adds it. O's max_new_tokens and stop ids are ignored (one token).
 * 0, or -1 with the error set. */
int rg_asr_label_judge(const rg_model *judge, const rg_classifier_prompts *p, const rg_behaviors *b,
                       const rg_completions *c, const rg_asr_gen_opts *o, int *success);

/* One scored (step, attack, classifier): labels of the completions C. */
typedef struct {
  long step;
  const char *attack;
  const char *classifier;
  const rg_completions *c;
  const int *success;
} rg_asr_scored;

/* Writes (atomically) DIR/asr.csv (rg_asr_curve format, one row per entry)
 * and DIR/asr_by_category.csv (columns step, attack, classifier,
 * category_type, category, n, successes, asr, wilson95_lo, wilson95_hi; one
 * row per FunctionalCategory and per SemanticCategory, in order of first
 * appearance). Rows already in the files whose (step, attack, classifier)
 * is not among S are kept, so that runs add to the tables; rows whose key
 * is among S are replaced. Every BehaviorID must be in B. 0 or -1. */
int rg_asr_write_tables(const char *dir, const rg_behaviors *b, const rg_asr_scored *s, int n);

/* The tables of a run on a prompt set (prompt_csv.h): DIR/asr.csv as
 * rg_asr_write_tables writes it, and (atomically) DIR/refusal_rates.csv
 * with columns step, attack, classifier, group_column, group, n, refusals,
 * refusal_rate, wilson95_lo, wilson95_hi (Wilson 95% of the refusal rate;
 * refusals = completions labelled 0). Per scored entry: one row with
 * group_column and group "all", then one per group column and value, values
 * in order of first appearance. XSTest's over-refusal report is this table
 * with group column "label": the "safe" row is the over-refusal rate.
 * Rows of other (step, attack, classifier) keys are kept. Every BehaviorID
 * must be in P. 0 or -1. */
int rg_asr_write_prompt_tables(const char *dir, const rg_prompt_csv *p, const rg_asr_scored *s, int n);

#endif
