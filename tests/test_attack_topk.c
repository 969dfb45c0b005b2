/* test_attack_topk.c: the per-position top-k token sets of one GCG step of
 * `refgeo attack`, read back from --dump-steps, against transformers
 * (tests/fixtures/gcg/topk_step.json from
 * tools/reference/make_gcg_topk_fixtures.py: topk(-grad, k) of the float64
 * gradient of the target loss with respect to the one-hot suffix on
 * SmolLM2-135M-Instruct, disallowed tokens excluded, as HarmBench's
 * sample_control ranks them; the behavior and layout of
 * tests/fixtures/gcg/attack_step.json, whose token layout test_attack_cli
 * checks).
 *
 * Ties aside: the fixture holds each position's k + 8 best tokens with
 * their values. Every token refgeo ranks in its top k must be among them
 * with a value no lower than the k-th's minus TOL, and every token whose
 * value beats the k-th's by more than TOL must be in refgeo's top k. TOL is
 * 1e-4 of the position's largest value: refgeo's float32 gradient agrees
 * with transformers' to ~1e-6 relative (float32 rounding over the backward
 * pass; test_gcg checks the gradient elementwise on a tiny model), so
 * only tokens within that of the k-th place may trade places; the test
 * reports how many did. The dump's loss of the initial suffix is the
 * fixture's within 2e-4 nats (as test_attack_cli: the Q4_1 forward agrees
 * with transformers' to a few 1e-5 in a mean cross entropy). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static void test_topk_matches_torch(void **state) {
  cJSON *fx = t_read_json_fixture("gcg/topk_step.json");
  const int k = cJSON_GetObjectItem(fx, "k")->valueint;
  const char *row_csv = cJSON_GetObjectItem(fx, "behaviors_csv")->valuestring;
  char *behaviors = t_write_tmp("attack-topk-behaviors.csv", row_csv, strlen(row_csv));
  char *out = t_tmp_path("attack-topk.json"), *dump = t_tmp_path("attack-topk.jsonl");
  unlink(out), unlink(dump);
  char args[4096], *err = NULL;
  snprintf(args, sizeof args,
           "attack --model '%s' --behaviors '%s' --out '%s' --dump-steps '%s' --steps 1 --search-width 20 "
           "--top-k %d --batch 20 --threads 2",
           t_env("REFGEO_MODEL"), behaviors, out, dump, k);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("refgeo attack: %s", err);
  free(err);
  char *text = rg_read_file(dump, NULL);
  assert_non_null(text);
  cJSON *step = cJSON_Parse(text);
  assert_non_null(step);
  assert_int_equal(cJSON_GetObjectItem(step, "step")->valueint, 1);
  const double loss = cJSON_GetObjectItem(step, "loss")->valuedouble,
               want_loss = cJSON_GetObjectItem(fx, "initial_loss")->valuedouble;
  if (!(fabs(loss - want_loss) < 2e-4)) fail_msg("initial loss %.6f, transformers %.6f", loss, want_loss);

  const cJSON *got = cJSON_GetObjectItem(step, "top_k"), *ids = cJSON_GetObjectItem(fx, "top_ids"),
              *vals = cJSON_GetObjectItem(fx, "top_values");
  const int L = cJSON_GetArraySize(ids);
  assert_int_equal(cJSON_GetArraySize(got), L);
  int traded = 0;
  for (int p = 0; p < L; p++) {
    const cJSON *row = cJSON_GetArrayItem(got, p), *tid = cJSON_GetArrayItem(ids, p), *tv = cJSON_GetArrayItem(vals, p);
    const int n_ref = cJSON_GetArraySize(tid);
    assert_int_equal(cJSON_GetArraySize(row), k);
    double scale = 0;
    for (int i = 0; i < n_ref; i++) scale = fmax(scale, fabs(cJSON_GetArrayItem(tv, i)->valuedouble));
    const double tol = 1e-4 * scale, kth = cJSON_GetArrayItem(tv, k - 1)->valuedouble;
    /* every refgeo token among transformers' best, at most TOL below the k-th */
    for (int r = 0; r < k; r++) {
      const int id = cJSON_GetArrayItem(row, r)->valueint;
      int at = -1;
      for (int i = 0; i < n_ref && at < 0; i++)
        if (cJSON_GetArrayItem(tid, i)->valueint == id) at = i;
      for (int q = 0; q < r; q++)
        if (cJSON_GetArrayItem(row, q)->valueint == id) fail_msg("position %d: token %d twice", p, id);
      if (at < 0) fail_msg("position %d: token %d (rank %d) is not in transformers' top %d", p, id, r, n_ref);
      const double v = cJSON_GetArrayItem(tv, at)->valuedouble;
      if (v < kth - tol) fail_msg("position %d: token %d (-grad %.6g) ranked, the k-th is %.6g", p, id, v, kth);
      traded += at >= k;
    }
    /* every token clearly inside transformers' top k is in refgeo's */
    for (int i = 0; i < k; i++) {
      const int id = cJSON_GetArrayItem(tid, i)->valueint;
      if (cJSON_GetArrayItem(tv, i)->valuedouble <= kth + tol) continue;
      bool found = false;
      for (int r = 0; r < k && !found; r++) found = cJSON_GetArrayItem(row, r)->valueint == id;
      if (!found) fail_msg("position %d: transformers' rank-%d token %d is not in refgeo's top %d", p, i, id, k);
    }
  }
  print_message("top-%d sets of %d positions equal transformers'; %d tokens traded places at the k-th (within "
                "1e-4 of the largest -grad); initial loss %.6f vs %.6f\n",
                k, L, traded, loss, want_loss);
  cJSON_Delete(step);
  cJSON_Delete(fx);
  free(text), free(behaviors), free(out), free(dump);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_topk_matches_torch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
