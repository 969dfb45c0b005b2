/* step_prompts.h: one checkpoint's refusal score and the prompts it keeps,
 * the first part of a geometry step (pipeline.h), following
 * refusal_direction's run_pipeline (refusal-geometry.md section 3.3):
 *  1. the refusal measure (scores.h): for the tokens score, the plan's ids,
 *     RD's "I", or (auto) the first tokens fitted to the checkpoint's greedy
 *     replies to the harmful train prompts (refusal_tokens.h); for the
 *     sequence score, the refusal string (the plan's text, else the run's
 *     toward target, else the most common opening of those refused replies)
 *     and the compliance string, tokenized;
 *  2. the score's validity: its AUROC for the harmful val prompts the
 *     checkpoint refuses against those it complies with, in greedy replies
 *     judged by HarmBench's refusal substrings (NaN when either is empty);
 *  3. every prompt's unintervened refusal score, and RD's filter_data on
 *     train and val: harmful prompts kept when they score > 0, harmless ones
 *     when they score < 0 (all kept with the filter off).
 *
 * Ownership: the struct owns every array (rg_step_prompts_free).
 */
#ifndef RG_GEOMETRY_STEP_PROMPTS_H
#define RG_GEOMETRY_STEP_PROMPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "capture/acts_h5_read.h"
#include "geometry/scores.h"
#include "geometry/verdict_plan.h"
#include "harmbench/refusal_match.h"
#include "engine/weights.h"

enum { RG_SPLIT_HARMFUL_TRAIN, RG_SPLIT_HARMLESS_TRAIN, RG_SPLIT_HARMFUL_VAL, RG_SPLIT_HARMLESS_VAL, RG_N_SPLITS };
extern const char *const RG_SPLIT_NAMES[RG_N_SPLITS];

enum { RG_MAX_REFUSAL_TOKENS = RG_PLAN_MAX_TOKENS };

typedef struct {
  rg_score_mode mode;
  int32_t refusal[RG_MAX_REFUSAL_TOKENS]; /* tokens: the first tokens; sequence: the refusal string */
  int n_refusal;           /* 0: auto found no refused reply */
  int32_t compliance[RG_MAX_REFUSAL_TOKENS]; /* sequence: the compliance string */
  int n_compliance;
  double coverage;         /* auto: share of refused train replies the tokens open; NaN otherwise */
  double score_auroc;      /* refused vs complied harmful val prompts */
  int val_refused, val_complied;
  bool *refused_val;       /* [total harmful val]: the judge's verdict on each greedy reply */
  int32_t **ids[RG_N_SPLITS]; /* every prompt's token ids, as the activation file stores them */
  int *lens[RG_N_SPLITS];
  int total[RG_N_SPLITS], kept[RG_N_SPLITS];
  bool *keep[RG_N_SPLITS];    /* [total] */
  double *score[RG_N_SPLITS]; /* [total] unintervened refusal scores */
} rg_step_prompts;

/* Fills OUT for STEP of RD on weights W. JUDGE is HarmBench's refusal list;
 * CHAT_TEMPLATE (NULL: the model's own) gives the reply's stop tokens;
 * TOWARD (NULL: none) is the series' toward target, the sequence score's
 * refusal string under refusal_string = auto. Returns 0, or -1 with the
 * error set. */
int rg_step_prompts_fit(const rg_weights *w, rg_acts_reader *rd, long step, const rg_verdict_plan *plan,
                        const rg_refusal_list *judge, const char *chat_template, const char *toward,
                        rg_step_prompts *out);

/* The measure the step scores with (its ids borrowed from P). */
rg_refusal_measure rg_step_prompts_measure(const rg_step_prompts *p);
void rg_step_prompts_free(rg_step_prompts *p);

/* The measure as text into buf: the tokens score's ids "A,B", the sequence
 * score's "seq:R1 R2|C1 C2" (refusal ids, then compliance ids). */
void rg_step_prompts_token_list(const rg_step_prompts *p, char *buf, size_t len);

#endif
