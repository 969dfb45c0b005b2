/* r2d2_data.h: the behaviors R2D2 trains on and their away ("Sure, here's")
 * targets, as HarmBench loads them (HarmBench 8e1604d,
 * adversarial_training/alignment-handbook/scripts/run_sft_adv_training.py,
 * "RUN" below, and adv_training_utils.py, "ATU"; quirk letters are those of
 * the project's R2D2 notes, section 1.9).
 *
 * R2D2 concatenates behavior CSVs (adv_training_behaviors.csv and
 * harmbench_behaviors_text_val.csv, RUN:54-72) and merges target files
 * (adv_training_targets.json and adv_training_val_targets.json, RUN:59-73),
 * each a JSON object BehaviorID -> array of target strings. A file in the
 * format of harmbench_targets_text.json (BehaviorID -> one string) is read
 * as lists of one. On a key found in several files the last file wins, as
 * in Python's dict merge at RUN:73.
 *
 * Per behavior the set keeps its BehaviorID, its Behavior text, whether it
 * is contextual and its targets. Decisions:
 *  - The ContextString is dropped: a test case is the Behavior text alone,
 *    as in HarmBench's training (the R2D2 notes, 1.3 and quirk f), where
 *    contextual behaviors reach the pool only through resets, context-free.
 *  - Contextual = Tags contain "context", HarmBench's pool filter
 *    (ATU:127-128); eligible_init is its negation.
 *  - Empty target strings are dropped (quirk g: 17 of the 2160 bundled
 *    strings). HarmBench draws them like any other target, and an empty
 *    target gives GCG a cross entropy over no tokens (NaN) and training an
 *    away span of pad tokens; neither is an attack target.
 *  - A behavior whose BehaviorID has no key, or whose targets are all
 *    empty, is excluded from the set and counted (n_excluded, with its id).
 *    HarmBench's own data has one, dimethylmercury_instructions_home, which
 *    HarmBench keeps and on which it raises a KeyError whenever it draws it
 *    (ATU:143 at init, ATU:199 at reset; quirk f). But a behaviors file of
 *    which no behavior has targets is an error naming the file: that is a
 *    wrong file pairing, not a data defect.
 *  - Keys that match no behavior are ignored (HarmBench's
 *    password_pin_coercion_dialogue).
 *  - A BehaviorID found in two behavior files is an error (the same file
 *    loaded twice, or two files that disagree about an id).
 *  - Pools: HarmBench initializes its test-case pool from the behaviors that
 *    are not contextual (ATU:127-133) but resets entries from the unfiltered
 *    list (ATU:196, quirk f). The set gives both: every behavior (items) and
 *    the indices of the eligible_init ones (init); the trainer picks.
 *
 * On the bundled files: 180 behaviors, 179 with targets (dimethylmercury
 * excluded), 160 of them eligible_init, 2131 targets (17 empty dropped).
 *
 * Errors (NULL, one line naming the file): a missing or unreadable file, a
 * bad CSV (behaviors.h), "PATH: not valid JSON at byte N", a target file
 * that is not a JSON object, a target value that is neither a string nor an
 * array of strings (naming the key), a behaviors file without targets.
 *
 * Ownership: the set owns every string and array; rg_r2d2_data_free
 * releases them all.
 */
#ifndef RG_R2D2_DATA_H
#define RG_R2D2_DATA_H

#include <stdbool.h>

typedef struct {
  char *id;           /* BehaviorID */
  char *behavior;     /* the Behavior text (the ContextString is dropped) */
  bool contextual;    /* Tags contain "context" */
  bool eligible_init; /* may seed the initial pool: not contextual */
  int n_targets;      /* >= 1 */
  char **targets;     /* the non-empty away targets, in file order */
} rg_r2d2_behavior;

typedef struct {
  int n;                  /* behaviors with targets, in file order (the reset list) */
  rg_r2d2_behavior *items;
  int n_init;             /* indices into items of the eligible_init behaviors */
  int *init;
  int n_excluded;         /* behaviors left out for want of a non-empty target */
  char **excluded_ids;
  int n_empty_dropped;    /* empty target strings dropped from kept behaviors */
} rg_r2d2_data;

/* Loads behavior_csvs[0..n_csvs) and target_jsons[0..n_jsons) (each n >= 1)
 * into one set. NULL with the error set. */
rg_r2d2_data *rg_r2d2_data_load(const char *const *behavior_csvs, int n_csvs, const char *const *target_jsons,
                                int n_jsons);
void rg_r2d2_data_free(rg_r2d2_data *d);

#endif
