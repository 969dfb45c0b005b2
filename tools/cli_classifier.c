/* cli_classifier.c: the flag wording of cli_classifier.h. */
#include "cli_classifier.h"

#include "util/error.h"

const rg_classifier_info *cli_classifier_find(const char *name) {
  const rg_classifier_info *c = rg_classifier_find(name);
  if (!c) rg_error_prefix("--classifier");
  return c;
}

rg_refusal_list *cli_classifier_list(const rg_classifier_info *c, const char *substrings) {
  rg_refusal_list *l = rg_classifier_load_list(c, substrings);
  if (!l && rg_classifier_reads_substrings(c)) rg_error_prefix("--refusal-substrings");
  return l;
}
