/* behaviors.h: HarmBench behavior CSVs and the DirectRequest test case.
 *
 * A behaviors CSV (data/behavior_datasets/harmbench_behaviors_text_*.csv) has
 * the columns Behavior, FunctionalCategory, SemanticCategory, Tags,
 * ContextString, BehaviorID. Behavior, Tags, ContextString and BehaviorID are
 * required. FunctionalCategory and SemanticCategory may be absent, as in
 * R2D2's adv_training_behaviors.csv, whose single "Category" column is then
 * taken as the semantic category; absent fields are "".
 *
 * Ownership: the set owns every string; rg_behaviors_free releases them.
 */
#ifndef RG_BEHAVIORS_H
#define RG_BEHAVIORS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  char *behavior;
  char *functional_category; /* "standard", "contextual", "copyright", or "" */
  char *semantic_category;
  char *tags;                /* comma+space separated, e.g. "context, hash_check" */
  char *context;             /* ContextString; "" for non-contextual behaviors */
  char *id;                  /* BehaviorID */
} rg_behavior;

typedef struct {
  char *path;
  size_t n;
  rg_behavior *items;
} rg_behaviors;

/* Reads a behaviors CSV. An empty or duplicate BehaviorID is an error.
 * NULL + error naming the file (and row) on failure. */
rg_behaviors *rg_behaviors_read(const char *path);
void rg_behaviors_free(rg_behaviors *b);

/* The behavior with this BehaviorID, or NULL. */
const rg_behavior *rg_behaviors_find(const rg_behaviors *b, const char *id);

bool rg_behavior_is_contextual(const rg_behavior *b); /* FunctionalCategory == "contextual" */
bool rg_behavior_is_copyright(const rg_behavior *b);  /* FunctionalCategory == "copyright" */

/* Whether TAG is one of the behavior's tags. HarmBench splits Tags on ", "
 * (evaluate_completions.py: behavior_dict['Tags'].split(', ')) and picks the
 * contextual classifier prompt for tag "context", the hashing classifier for
 * "hash_check". */
bool rg_behavior_has_tag(const rg_behavior *b, const char *tag);

/* The text HarmBench gives the model for a behavior row, malloc'd: BEHAVIOR
 * as written, or "{CONTEXT}\n\n---\n\n{BEHAVIOR}" when CONTEXT is non-empty
 * (HarmBench baselines/direct_request/direct_request.py:23-24 at commit
 * 8e1604d, `if context_str: behavior = f"{context_str}\n\n---\n\n{behavior}"`;
 * GCG builds the same prefix, baselines/gcg/gcg.py:90-92). The one rule for
 * every reader of a behaviors CSV: asr and attack through
 * rg_behavior_direct_request, capture's prompt sets (capture/prompts.h).
 * NULL on OOM. */
char *rg_harmbench_request_text(const char *behavior, const char *context);

/* The DirectRequest test case of B: rg_harmbench_request_text of its
 * Behavior and ContextString. NULL on OOM. */
char *rg_behavior_direct_request(const rg_behavior *b);

#endif
