/* prompts.h: prompt sets for activation capture and evaluation.
 *
 * rg_prompts_load picks the format by the file's extension:
 *   .json  refusal_direction splits/processed files: an array of
 *          {"instruction": str, "category": str | null}
 *   .csv   HarmBench behaviour files: the prompt is the row's text by
 *          HarmBench's rule (rg_harmbench_request_text: the Behavior, after
 *          the ContextString and a separator when the column is present and
 *          non-empty), the text asr and attack use; SemanticCategory (if
 *          present) is the category
 *   .txt   one prompt per line; blank lines are skipped; no category
 * Anything else is an error. Prompts are kept verbatim (no trimming besides
 * the line break of .txt lines, including a CRLF's CR).
 *
 * Ownership: the set owns every string; rg_prompts_free releases them.
 */
#ifndef RG_CAPTURE_PROMPTS_H
#define RG_CAPTURE_PROMPTS_H

#include <stdint.h>

typedef struct {
  char *text;
  char *category; /* NULL when the source has none */
} rg_prompt;

typedef struct {
  char *path;
  int n;
  rg_prompt *items;
} rg_prompt_set;

/* NULL with the error set ("PATH: ...") on failure; an empty set is an error. */
rg_prompt_set *rg_prompts_load(const char *path);
void rg_prompts_free(rg_prompt_set *s);

/* Keeps a uniformly random subset of N prompts, chosen with a SplitMix64
 * stream seeded by SEED (so the same seed gives the same subset on every
 * machine; it is not Python's random.sample). The kept prompts stay in file
 * order. N >= s->n keeps everything. Returns 0, or -1 with the error set. */
int rg_prompts_subsample(rg_prompt_set *s, int n, uint64_t seed);

#endif
