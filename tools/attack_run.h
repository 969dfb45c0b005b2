/* attack_run.h: HarmBench's GCG attack (src/adv_ft/gcg.h) over the behaviors
 * of a CSV on one model: what `refgeo attack` runs, and what `refgeo asr
 * --attack gcg` runs on each checkpoint of a series.
 *
 * Each behavior's instruction is the behavior (with its context string, as
 * DirectRequest) plus " " plus the suffix, which starts as --init-suffix (20
 * "!" tokens); its target is the behavior's string in the targets JSON.
 * Token layout, as HarmBench's baselines/gcg/gcg.py builds it: the chat
 * template text before the instruction (with BOS), the behavior, the suffix,
 * the template text after it, the target, each tokenized on its own. A
 * behavior stops by HarmBench's refusal check (gcg_stop.h: every eval_steps
 * steps once the loss is below check_min_loss, 32 greedy tokens of the test
 * case as `refgeo asr` prompts it, stop when they hold no check_refusal_utils
 * prefix), or below go.min_loss (HarmBench's early_stopping, off in its
 * config). Every behavior's seed is derived from go.seed and its BehaviorID,
 * so its test case does not depend on which behaviors ran before it.
 *
 * Finished behaviors are kept in OUT.partial.json (attack_progress.h): a
 * rerun with the same settings skips them. The test cases JSON
 * ({"BehaviorID": ["test case"]}) is written to OUT atomically at the end,
 * when the progress file is removed. A behavior's tokens with its target
 * must fit min(512, the model's max_ctx).
 *
 * Ownership: the spec's strings and behaviors are borrowed for the call.
 */
#ifndef REFGEO_ATTACK_RUN_H
#define REFGEO_ATTACK_RUN_H

#include <cJSON.h>

#include "adv_ft/gcg.h"
#include "harmbench/behaviors.h"

/* gcg.py's default initial suffix: 20 "!" separated by spaces */
#define ATTACK_INIT_SUFFIX "! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! !"

typedef struct {
  const char *model;          /* GGUF file or Hugging Face directory */
  const rg_behaviors *behaviors;
  const char *targets_path;   /* HarmBench targets JSON */
  const char *substrings;     /* HarmBench refusal_substrings.json */
  const char *chat_template;  /* NULL: the model's */
  const char *init_suffix;    /* NULL: ATTACK_INIT_SUFFIX */
  const char *category;       /* NULL: every row; else DirectRequest's selection (standard, contextual, all) */
  int limit;                  /* > 0: the first LIMIT selected behaviors */
  rg_gcg_opts go;             /* steps, search_width, top_k, min_loss, seed, retokenize_filter (the
                               * commands' default: on, as HarmBench's evaluation GCG), and
                               * screen_keep (> 0: every candidate first on 8-bit activations,
                               * RG_WEIGHTS_TILED_Q8, and that many best again in float32) */
  int eval_steps;             /* refusal check every N steps */
  double check_min_loss;      /* ... once the loss is below this (0: never) */
  int batch;                  /* candidates evaluated together */
  int threads;                /* <= 0: all */
  const char *log_path;       /* NULL, or a CSV of behavior_id, step, loss */
  const char *behavior_log;   /* NULL, or a CSV of behavior_id, steps, final_loss, stop_reason, seconds */
  const char *dump_steps;     /* NULL, or the JSON lines of every step (attack_dump.h) */
  const char *progress_label; /* the progress bar's label ("attack: behaviors") */
} attack_spec;

/* Checks the spec's numbers and every selected behavior's target (a bad one
 * fails before hours of attack). 0, or -1 with one line naming the flag or
 * file. */
int attack_spec_check(const attack_spec *s);

/* Attacks every selected behavior of S not finished in OUT's progress file
 * and writes OUT. *RESULTS (when not NULL) gets a JSON array of
 * {"behavior_id", "steps", "loss", "stop_reason"}, the caller's to free.
 * 0, or -1 with the error set. */
int attack_run(const attack_spec *s, const char *out, cJSON **results);

#endif
