/* test_gcg_stop.c: HarmBench's refusal-checked GCG stop and test-case text
 * (adv_ft/gcg_stop.h) against a Python reference of HarmBench's rule
 * (tests/fixtures/gcg/stop_rule.json from
 * tools/reference/make_gcg_stop_fixtures.py: 50 cases of behavior, context,
 * suffix text, generation, loss and step, standard and contextual behaviors,
 * losses both sides of 0.05). The refusal list is the one `refgeo attack`
 * loads (check_refusal_utils in data/harmbench/refusal_substrings.json), the
 * reference's its own copy of HarmBench's REFUSAL_PREFIXES, so a string
 * missing from or wrong in the data file fails the test too.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/gcg_stop.h"
#include "harmbench/refusal_match.h"
#include "testlib.h"

static void test_stop_rule_matches_harmbench(void **state) {
  cJSON *fx = t_read_json_fixture("gcg/stop_rule.json");
  char *path = t_data_path("harmbench/refusal_substrings.json");
  rg_refusal_list *l = rg_refusal_list_load(RG_REFUSAL_HB_ATTACK, path);
  assert_non_null(l);
  assert_int_equal(l->n, 32); /* check_refusal_utils.py:5-38 */
  const rg_gcg_stop_rule r = {.eval_steps = cJSON_GetObjectItem(fx, "eval_steps")->valueint,
                              .min_loss = cJSON_GetObjectItem(fx, "check_refusal_min_loss")->valuedouble,
                              .n_gen_tokens = 32,
                              .refusals = l};
  const cJSON *cases = cJSON_GetObjectItem(fx, "cases"), *c;
  int n = 0, n_stop = 0, n_contextual = 0;
  cJSON_ArrayForEach(c, cases) {
    const char *gen = cJSON_GetObjectItem(c, "generation")->valuestring;
    const int step = cJSON_GetObjectItem(c, "step")->valueint, steps = cJSON_GetObjectItem(c, "steps")->valueint;
    const double loss = cJSON_GetObjectItem(c, "loss")->valuedouble;
    const bool want_refusal = cJSON_IsTrue(cJSON_GetObjectItem(c, "is_refusal"));
    const bool want_stop = cJSON_IsTrue(cJSON_GetObjectItem(c, "stop"));
    if (rg_refusal_matches(l, gen) != want_refusal)
      fail_msg("case %d: refusal %d, HarmBench %d for '%s'", n, !want_refusal, want_refusal, gen);
    if (rg_gcg_stop_decision(&r, step, steps, loss, gen) != want_stop)
      fail_msg("case %d (step %d of %d, loss %g, '%s'): stop %d, HarmBench %d", n, step, steps, loss, gen, !want_stop,
               want_stop);
    const char *context = cJSON_GetObjectItem(c, "context")->valuestring;
    char *tc = rg_gcg_test_case_text(cJSON_GetObjectItem(c, "behavior")->valuestring, context,
                                     cJSON_GetObjectItem(c, "suffix_text")->valuestring);
    assert_non_null(tc);
    assert_string_equal(tc, cJSON_GetObjectItem(c, "test_case")->valuestring);
    free(tc);
    n++, n_stop += want_stop, n_contextual += context[0] != '\0';
  }
  print_message("%d cases (%d contextual): %d stop, %d continue, as HarmBench decides\n", n, n_contextual, n_stop,
                n - n_stop);
  assert_true(n >= 30 && n_stop > 0 && n_stop < n && n_contextual > 0);
  rg_refusal_list_free(l);
  free(path);
  cJSON_Delete(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_rule_matches_harmbench),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
