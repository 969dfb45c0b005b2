/* classifiers.c: the table of named classifiers (see classifiers.h). */
#include "harmbench/classifiers.h"

#include <string.h>

#include "util/error.h"
#include "util/fileio.h"

static const rg_classifier_info KNOWN[] = {
    {"refusal-harmbench", RG_CLASSIFIER_REFUSAL, RG_REFUSAL_HB_ATTACK},
    {"refusal-advbench", RG_CLASSIFIER_REFUSAL, RG_REFUSAL_HB_ADVBENCH},
    {"refusal-rd", RG_CLASSIFIER_REFUSAL, RG_REFUSAL_RD},
    {"refusal-xstest", RG_CLASSIFIER_REFUSAL, RG_REFUSAL_XSTEST},
    {"judge", RG_CLASSIFIER_JUDGE, 0},
};
enum { N_KNOWN = (int)(sizeof KNOWN / sizeof KNOWN[0]) };

const char *rg_classifier_names(void) {
  /* Built from the table on first use, so the list cannot drift from it. */
  static char names[256];
  if (!names[0])
    for (int k = 0; k < N_KNOWN; k++) {
      if (k > 0) strcat(names, ", ");
      strcat(names, KNOWN[k].name);
    }
  return names;
}

int rg_classifier_count(void) { return N_KNOWN; }

const rg_classifier_info *rg_classifier_find(const char *name) {
  for (int k = 0; k < N_KNOWN; k++)
    if (strcmp(KNOWN[k].name, name) == 0) return &KNOWN[k];
  rg_error_set("unknown classifier '%s' (%s)", name, rg_classifier_names());
  return NULL;
}

bool rg_classifier_reads_substrings(const rg_classifier_info *c) {
  return c->kind == RG_CLASSIFIER_REFUSAL && (c->rule == RG_REFUSAL_HB_ATTACK || c->rule == RG_REFUSAL_HB_ADVBENCH);
}

rg_refusal_list *rg_classifier_load_list(const rg_classifier_info *c, const char *substrings) {
  if (c->kind != RG_CLASSIFIER_REFUSAL) {
    rg_error_set("classifier %s is not a string-match classifier", c->name);
    return NULL;
  }
  bool needs_file = rg_classifier_reads_substrings(c);
  if (needs_file && (!substrings || !rg_path_exists(substrings))) {
    rg_error_set("%s does not exist (classifier %s reads HarmBench's refusal_substrings.json)",
                 substrings ? substrings : "(none)", c->name);
    return NULL;
  }
  return rg_refusal_list_load(c->rule, needs_file ? substrings : NULL);
}
