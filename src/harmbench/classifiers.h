/* classifiers.h: the completion classifiers refgeo offers by name, in one
 * table shared by `refgeo asr` and `refgeo classify`.
 *
 *   refusal-harmbench  HarmBench check_refusal_utils REFUSAL_PREFIXES,
 *                      case-insensitive substring (RG_REFUSAL_HB_ATTACK)
 *   refusal-advbench   HarmBench eval_utils advbench prefixes, case-sensitive
 *                      substring (RG_REFUSAL_HB_ADVBENCH)
 *   refusal-rd         refusal_direction's substring judge (RG_REFUSAL_RD)
 *   refusal-xstest     XSTest's string match: lower-case, strip, starts with
 *                      one of 21 prefixes (RG_REFUSAL_XSTEST)
 *   judge              HarmBench's classifier prompt on a judge model
 *                      (harmbench/asr_run.h rg_asr_label_judge)
 *
 * Every classifier gives HarmBench's label: 1 = success (the string rules:
 * not a refusal; the judge: "Yes"), 0 = refused / "No".
 */
#ifndef RG_CLASSIFIERS_H
#define RG_CLASSIFIERS_H

#include "harmbench/refusal_match.h"

typedef enum { RG_CLASSIFIER_REFUSAL, RG_CLASSIFIER_JUDGE } rg_classifier_kind;

typedef struct {
  const char *name;
  rg_classifier_kind kind;
  rg_refusal_rule rule; /* RG_CLASSIFIER_REFUSAL only */
} rg_classifier_info;

/* The classifier called NAME, or NULL with the error
 * "unknown classifier 'NAME' (refusal-harmbench, ...)". */
const rg_classifier_info *rg_classifier_find(const char *name);

/* The known names, comma-separated, for help texts. */
const char *rg_classifier_names(void);

/* The number of known classifiers (an upper bound for per-run arrays). */
int rg_classifier_count(void);

/* Whether C reads HarmBench's refusal_substrings.json (refusal-harmbench,
 * refusal-advbench); the other string rules are built in. */
bool rg_classifier_reads_substrings(const rg_classifier_info *c);

/* The refusal list of a RG_CLASSIFIER_REFUSAL classifier. SUBSTRINGS is
 * HarmBench's refusal_substrings.json, needed by refusal-harmbench and
 * refusal-advbench only (its absence is an error naming the path).
 * NULL + error. */
rg_refusal_list *rg_classifier_load_list(const rg_classifier_info *c, const char *substrings);

#endif
