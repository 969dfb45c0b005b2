/* verdict_plan.h: the pre-registered analysis plan of a geometry run:
 * every choice that can change the carrier verdict, fixed before any
 * candidate is scored (docs/geometry-verdict.md).
 *
 * The plan comes from its defaults, then an INI file's [verdict] section
 * (refgeo run's config, or geometry --plan-file), then command-line flags;
 * keys and flags share names ("kl_max" / --kl-max). Its canonical text
 * (every key, in a fixed order, one "key = value" line each, numbers as
 * %.17g) is what is hashed: the same choices give the same sha256 however
 * they were written.
 *
 * rg_verdict_plan_pin writes OUT_DIR/plan.ini (the canonical text under a
 * [verdict] header) and OUT_DIR/plan.sha256 before scoring. A directory
 * that already holds a different plan is refused unless start_over, so a
 * verdict can never come from thresholds changed after the data were seen.
 *
 * Ownership: the plan owns no memory (its texts are fixed buffers).
 */
#ifndef RG_GEOMETRY_VERDICT_PLAN_H
#define RG_GEOMETRY_VERDICT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "geometry/migration.h"
#include "geometry/selection.h"

enum { RG_PLAN_TOKENS_LEN = 160, RG_PLAN_MAX_TOKENS = 16 };

typedef struct {
  /* "tokens" (RD's first-token log-odds over refusal_tokens) or "sequence"
   * (log p(refusal_string) - log p(compliance_string), teacher-forced) */
  char refusal_score[16];
  /* tokens: "auto" (fitted per checkpoint from its greedy replies), "rd"
   * (the token of "I", refusal_direction's choice) or a comma-separated id
   * list */
  char refusal_tokens[RG_PLAN_TOKENS_LEN];
  /* sequence: the refusal text, or "auto": the run's toward target when the
   * series is an R2D2 run that has one, else the checkpoint's most common
   * refusal opening (its first RG_REPLY_OPENING tokens, geometry/replies.h) */
  char refusal_string[RG_PLAN_TOKENS_LEN];
  /* sequence: the compliance text ("Sure, here's": HarmBench's targets open
   * so, 395 of its 400) */
  char compliance_string[RG_PLAN_TOKENS_LEN];
  double auto_coverage; /* auto: the fewest first tokens covering this share of refusals (0.9) */
  int reply_tokens;     /* new tokens of the greedy replies that are judged (32) */
  bool prompt_filter;   /* RD's filter_data: harmful scored > 0, harmless < 0 (on) */
  int n_min;            /* prompts the filter must keep in every split, else the step is not scored (8) */
  rg_selection_rules rules;
  rg_depth_thresholds bands;
  int max_val;              /* val prompts scored per class after the filter; 0 = all */
  int layer_lo, layer_hi;   /* candidate layers [lo, hi); hi 0 = all */
  int null_size;            /* random unit directions of the null (16) */
  int bootstrap;            /* bootstrap resamples of the val prompts (1000) */
  double score_auroc_min;   /* the refusal score is called valid at or above this AUROC (0.9) */
  unsigned long long seed;  /* of the null directions and the bootstrap (42) */
  /* transfer.csv also scores every step's best direction at each layer (the
   * lowest bypass of its positions) in every step's model: n_steps^2 x
   * layers more candidates (off) */
  bool transfer_layers;
} rg_verdict_plan;

rg_verdict_plan rg_verdict_plan_default(void);

/* Sets KEY (e.g. "kl_max") from VALUE; WHERE names the source for errors
 * ("FILE [verdict]" or "--kl-max"). Returns 0, or -1 with the error set
 * (unknown key, a value that does not parse or is out of range). */
int rg_verdict_plan_set(rg_verdict_plan *p, const char *key, const char *value, const char *where);

/* The ids of a refusal_tokens list "A,B,..." into ids[max_ids]: their count,
 * or -1 with the error set naming WHERE (not an id list, too many ids). */
int rg_verdict_plan_token_ids(const char *list, const char *where, int32_t *ids, int max_ids);

/* Reads PATH's [verdict] section into P (other sections are ignored; a file
 * without one is an error). Returns 0 or -1 with the error set. */
int rg_verdict_plan_read(rg_verdict_plan *p, const char *path);

/* Checks the plan as a whole (ranges that involve two keys). */
int rg_verdict_plan_check(const rg_verdict_plan *p);

/* The canonical text, malloc'd (caller frees); NULL when out of memory. */
char *rg_verdict_plan_text(const rg_verdict_plan *p);

/* The sha256 of the canonical text as 64 hex digits into HEX. */
int rg_verdict_plan_sha256(const rg_verdict_plan *p, char hex[65]);

/* Writes or checks OUT_DIR/plan.ini and plan.sha256 (see the top). */
int rg_verdict_plan_pin(const rg_verdict_plan *p, const char *out_dir, bool start_over);

/* The plan's keys in canonical order, NULL-terminated (for --help and docs). */
extern const char *const RG_VERDICT_PLAN_KEYS[];

#endif
