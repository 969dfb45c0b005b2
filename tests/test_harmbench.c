/* test_harmbench: behaviors, DirectRequest test cases, judge prompts, judge
 * labels, refusal substring rules and the completions JSON, each against
 * fixtures computed by Python (tools/reference/make_harmbench_fixtures.py). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/behaviors.h"
#include "harmbench/classifier_prompt.h"
#include "harmbench/completions.h"
#include "harmbench/refusal_match.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static rg_behaviors *load_all_behaviors(void) {
  char *path = t_data_path("harmbench/harmbench_behaviors_text_all.csv");
  rg_behaviors *b = rg_behaviors_read(path);
  if (!b) fail_msg("%s", rg_error_get());
  free(path);
  return b;
}

static bool json_bool(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItem(o, key)); }
static const char *json_str(const cJSON *o, const char *key) { return cJSON_GetObjectItem(o, key)->valuestring; }

static void test_behaviors_and_direct_request(void **state) {
  rg_behaviors *b = load_all_behaviors();
  cJSON *fx = t_read_json_fixture("harmbench/behaviors.json");
  const cJSON *list = cJSON_GetObjectItem(fx, "behaviors");
  assert_int_equal(b->n, cJSON_GetArraySize(list));
  int n_contextual = 0, n_copyright = 0, i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    const rg_behavior *x = &b->items[i++];
    assert_string_equal(x->id, json_str(e, "id"));
    assert_true(rg_behaviors_find(b, x->id) == x);
    assert_int_equal(rg_behavior_is_contextual(x), json_bool(e, "contextual"));
    assert_int_equal(rg_behavior_is_copyright(x), json_bool(e, "copyright"));
    assert_int_equal(rg_behavior_has_tag(x, "context"), json_bool(e, "tag_context"));
    assert_int_equal(rg_behavior_has_tag(x, "hash_check"), json_bool(e, "tag_hash_check"));
    n_contextual += rg_behavior_is_contextual(x);
    n_copyright += rg_behavior_is_copyright(x);
    char *dr = rg_behavior_direct_request(x);
    assert_non_null(dr);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", t_fnv1a64(dr));
    assert_int_equal(strlen(dr), cJSON_GetObjectItem(e, "direct_request_len")->valueint);
    assert_string_equal(hex, json_str(e, "direct_request_fnv1a64"));
    free(dr);
  }
  /* The split published in HarmBench's SOURCE.md: 200 / 100 / 100. */
  assert_int_equal(n_contextual, 100);
  assert_int_equal(n_copyright, 100);
  assert_null(rg_behaviors_find(b, "no_such_behavior"));
  cJSON_Delete(fx);
  rg_behaviors_free(b);

  /* R2D2's training file lacks FunctionalCategory/SemanticCategory. */
  char *path = t_data_path("harmbench/adv_training_behaviors.csv");
  b = rg_behaviors_read(path);
  if (!b) fail_msg("%s", rg_error_get());
  assert_int_equal(b->n, 100);
  assert_string_equal(b->items[0].functional_category, "");
  assert_string_equal(b->items[0].id, "adv_training_1");
  assert_string_equal(b->items[0].semantic_category, ""); /* its Category column is empty in the file */
  rg_behaviors_free(b);
  free(path);
}

static void test_behaviors_errors(void **state) {
  const char *missing = "Behavior,Tags,BehaviorID\nx,,id1\n";
  char *p = t_write_tmp("beh_missing.csv", missing, strlen(missing));
  assert_null(rg_behaviors_read(p));
  assert_non_null(strstr(rg_error_get(), "missing column ContextString"));
  assert_non_null(strstr(rg_error_get(), p));
  free(p);
  const char *dup = "Behavior,Tags,ContextString,BehaviorID\nx,,,id1\ny,,,id1\n";
  p = t_write_tmp("beh_dup.csv", dup, strlen(dup));
  assert_null(rg_behaviors_read(p));
  assert_non_null(strstr(rg_error_get(), "duplicate BehaviorID id1"));
  free(p);
}

static void test_classifier_prompts_match_str_format(void **state) {
  char *path = t_data_path("harmbench/classifier_prompts.json");
  rg_classifier_prompts prompts;
  if (rg_classifier_prompts_load(path, &prompts) != 0) fail_msg("%s", rg_error_get());
  free(path);
  rg_behaviors *b = load_all_behaviors();
  cJSON *fx = t_read_json_fixture("harmbench/classifier_render.json");
  const cJSON *e;
  int n = 0, n_ctx = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "cases")) {
    const rg_behavior *x = rg_behaviors_find(b, json_str(e, "id"));
    assert_non_null(x);
    char *got = rg_classifier_prompt_render(&prompts, x, json_str(e, "generation"));
    if (!got) fail_msg("%s", rg_error_get());
    assert_string_equal(got, json_str(e, "prompt")); /* byte for byte */
    free(got);
    n++;
    n_ctx += rg_behavior_has_tag(x, "context");
  }
  assert_true(n >= 20);
  assert_true(n_ctx >= 5);
  cJSON_Delete(fx);
  rg_behaviors_free(b);
  rg_classifier_prompts_free(&prompts);
}

/* Python's errors for str.format, and brace escapes in both directions. */
static void test_format_template_rules(void **state) {
  const char *names[] = {"a", "b"}, *values[] = {"{x}", "}}"};
  char *s = rg_format_template("{{a}} {a}{b} }}{{", names, values, 2);
  assert_non_null(s);
  assert_string_equal(s, "{a} {x}}} }{"); /* values are inserted verbatim */
  free(s);
  assert_null(rg_format_template("x } y", names, values, 2));
  assert_non_null(strstr(rg_error_get(), "single '}'"));
  assert_null(rg_format_template("x {a", names, values, 2));
  assert_non_null(strstr(rg_error_get(), "unclosed"));
  assert_null(rg_format_template("{c}", names, values, 2));
  assert_non_null(strstr(rg_error_get(), "no value for field 'c'"));
  assert_null(rg_format_template("{a!r}", names, values, 2));
  assert_null(rg_format_template("{}", names, values, 2));
}

static void test_judge_labels(void **state) {
  cJSON *fx = t_read_json_fixture("harmbench/judge_labels.json");
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "cases")) {
    int want = cJSON_GetObjectItem(e, "label")->valueint;
    if (rg_judge_label(json_str(e, "text")) != want) fail_msg("label of '%s' is not %d", json_str(e, "text"), want);
  }
  cJSON_Delete(fx);
}

static void test_refusal_rules_match_python(void **state) {
  char *path = t_data_path("harmbench/refusal_substrings.json");
  const char *names[] = {"harmbench_advbench", "harmbench_attack", "refusal_direction"};
  const int sizes[] = {29, 32, 12}; /* list sizes stated in HarmBench's SOURCE.md and refusal-geometry.md 7.3 */
  rg_refusal_list *lists[3];
  for (int r = 0; r < 3; r++) {
    rg_refusal_rule rule;
    assert_int_equal(rg_refusal_rule_from_name(names[r], &rule), 0);
    lists[r] = rg_refusal_list_load(rule, path);
    if (!lists[r]) fail_msg("%s", rg_error_get());
    assert_int_equal(lists[r]->n, sizes[r]);
  }
  cJSON *fx = t_read_json_fixture("harmbench/refusal_judgments.json");
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(fx, "cases")) {
    for (int r = 0; r < 3; r++)
      if (rg_refusal_matches(lists[r], json_str(e, "text")) != json_bool(e, names[r]))
        fail_msg("rule %s disagrees with Python on '%s'", names[r], json_str(e, "text"));
    n++;
  }
  assert_true(n >= 200);
  rg_refusal_rule rule;
  assert_int_equal(rg_refusal_rule_from_name("nonsense", &rule), -1);
  assert_null(rg_refusal_list_load(RG_REFUSAL_HB_ATTACK, NULL));
  cJSON_Delete(fx);
  for (int r = 0; r < 3; r++) rg_refusal_list_free(lists[r]);
  free(path);
}

static void expect_same_entries(const rg_completions *c, const cJSON *flat, int with_generation) {
  assert_int_equal(c->n, cJSON_GetArraySize(flat));
  for (size_t i = 0; i < c->n; i++) {
    const cJSON *e = cJSON_GetArrayItem(flat, (int)i);
    assert_string_equal(c->items[i].behavior_id, json_str(e, "behavior_id"));
    assert_string_equal(c->items[i].test_case, json_str(e, "test_case"));
    if (with_generation) assert_string_equal(c->items[i].generation, json_str(e, "generation"));
  }
}

static void test_completions_round_trip(void **state) {
  char *in = t_fixture_path("harmbench/completions_in.json");
  cJSON *fx = t_read_json_fixture("harmbench/completions_flat.json");
  const cJSON *flat = cJSON_GetObjectItem(fx, "entries");
  rg_completions c;
  if (rg_completions_read(in, &c) != 0) fail_msg("%s", rg_error_get());
  expect_same_entries(&c, flat, 1);

  char *out = t_tmp_path("completions_rt.json");
  assert_int_equal(rg_completions_write(out, &c), 0);
  rg_completions back;
  assert_int_equal(rg_completions_read(out, &back), 0);
  expect_same_entries(&back, flat, 1);
  rg_completions_free(&back);

  /* The same entries as test cases: {id: [test_case, ...]}. */
  char *tc = t_tmp_path("test_cases_rt.json");
  assert_int_equal(rg_test_cases_write(tc, &c), 0);
  assert_int_equal(rg_test_cases_read(tc, &back), 0);
  expect_same_entries(&back, flat, 0);
  assert_null(back.items[0].generation);
  /* A test-case list cannot be written as completions (no generations). */
  assert_int_equal(rg_completions_write(out, &back), -1);
  rg_completions_free(&back);

  /* Reading one format as the other is a one-line error naming the file. */
  assert_int_equal(rg_completions_read(tc, &back), -1);
  assert_non_null(strstr(rg_error_get(), tc));
  assert_int_equal(rg_test_cases_read(in, &back), -1);
  const char *bad = "{\"x\": \"not a list\"}";
  char *badp = t_write_tmp("completions_bad.json", bad, strlen(bad));
  assert_int_equal(rg_completions_read(badp, &back), -1);
  assert_non_null(strstr(rg_error_get(), "value of x is not a list"));
  char *trunc = t_write_tmp("completions_trunc.json", "{\"x\": [", 7);
  assert_int_equal(rg_completions_read(trunc, &back), -1);
  assert_non_null(strstr(rg_error_get(), "not valid JSON"));

  rg_completions_free(&c);
  cJSON_Delete(fx);
  free(in);
  free(out);
  free(tc);
  free(badp);
  free(trunc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_behaviors_and_direct_request),
      cmocka_unit_test(test_behaviors_errors),
      cmocka_unit_test(test_classifier_prompts_match_str_format),
      cmocka_unit_test(test_format_template_rules),
      cmocka_unit_test(test_judge_labels),
      cmocka_unit_test(test_refusal_rules_match_python),
      cmocka_unit_test(test_completions_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
