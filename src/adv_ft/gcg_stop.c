/* gcg_stop.c: HarmBench's refusal-checked stop for its evaluation GCG (gcg_stop.h). */
#include "adv_ft/gcg_stop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/behaviors.h"
#include "util/error.h"

bool rg_gcg_stop_check_due(const rg_gcg_stop_rule *r, int step, int steps, double loss) {
  /* gcg.py: `if (i % eval_steps == 0) or (i == num_steps - 1)`, then
   * `current_loss < check_refusal_min_loss` (strict) */
  return (step % r->eval_steps == 0 || step == steps - 1) && loss < r->min_loss;
}

bool rg_gcg_stop_decision(const rg_gcg_stop_rule *r, int step, int steps, double loss, const char *generation) {
  return rg_gcg_stop_check_due(r, step, steps, loss) && !rg_refusal_matches(r->refusals, generation);
}

char *rg_gcg_test_case_text(const char *behavior, const char *context, const char *suffix_text) {
  char *request = rg_harmbench_request_text(behavior, context);
  char *text = request ? malloc(strlen(request) + strlen(suffix_text) + 2) : NULL;
  if (text) sprintf(text, "%s %s", request, suffix_text);
  free(request);
  if (!text) rg_error_set("out of memory for a test case");
  return text;
}
