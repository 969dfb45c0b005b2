/* test_sp_plan: the sequence-parallel memory plan and planner
 * (adv_ft/sp_plan.h) on the tiny Llama 3's shapes (d 64, 4 heads and 2 KV
 * heads of 16, d_ff 96, 2 layers: no weights needed).
 *
 * The plan counts the buffers a real step allocates (on a plan backend);
 * these checks derive the differences between plans from the layout that
 * forward.h documents for rg_recompute, independently of that count:
 * per local token and block, NONE keeps 4 d + 2 q + 2 f floats, MATMULS
 * d + 2 q, FULL d, and the recomputing policies add one block's worth of
 * what they drop, shared. Exact in bytes: both sides count float32
 * buffers. Also: Ulysses keeps 1/P of the KV cache (so it plans less than
 * all-gather at a long context), the recompute cost formula, the planner's
 * choice (least recompute that fits, then fewest ranks) and its refusal.
 * measured peak RSS against the plan is bench/sp_context.sh's.
 */
#include <stdlib.h>
#include <string.h>

#include "adv_ft/sp_plan.h"
#include "model/model_shapes.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static rg_model *tiny(void) {
  char *dir = t_fixture_path("hf_tiny/llama3_bf16"), *cfg = rg_path_join(dir, "config.json");
  rg_model *m = rg_model_load_shapes(cfg);
  if (!m) fail_msg("%s", rg_error_get());
  free(dir), free(cfg);
  return m;
}

static rg_sp_plan plan(const rg_model *m, int S, int P, rg_sp_mode mode, rg_recompute r) {
  rg_sp_plan p;
  if (rg_sp_plan_one(m, S, P, mode, r, 1000, &p) != 0) fail_msg("%s", rg_error_get());
  assert_int_equal(p.total, p.backend + p.host + p.file_map + 1000);
  return p;
}

static void test_policies(void **state) {
  rg_model *m = tiny();
  const size_t d = 64, q = 64, nh = 4, f = 96, L = 2, F = sizeof(float);
  for (int P = 1; P <= 2; P++) {
    const int S = 41;
    const size_t T = (size_t)(S + P - 1) / P; /* local tokens */
    const rg_sp_plan none = plan(m, S, P, RG_SP_ALLGATHER, RG_RECOMPUTE_NONE);
    const rg_sp_plan mat = plan(m, S, P, RG_SP_ALLGATHER, RG_RECOMPUTE_MATMULS);
    const rg_sp_plan full = plan(m, S, P, RG_SP_ALLGATHER, RG_RECOMPUTE_FULL);
    /* NONE -> MATMULS drops xn1, x_mid, xn2, gate and up from L - 1 blocks */
    assert_int_equal(none.total - mat.total, (L - 1) * T * (3 * d + 2 * f) * F);
    /* MATMULS -> FULL drops q, att and the log-sum-exps from L - 1 blocks */
    assert_int_equal(mat.total - full.total, (L - 1) * T * (2 * q + nh) * F);
    assert_true(none.recompute_macs == 0);
    /* per local token and layer: o_proj q d, gate and up 2 d f; FULL adds q,
     * k, v d (q + 2 kv) and attention's S q */
    assert_true(mat.recompute_macs == (double)(q * d + 2 * d * f) * T * L);
    assert_true(full.recompute_macs == (double)(q * d + 2 * d * f + d * (q + 2 * 32) + (size_t)S * q) * T * L);
    print_message("%d rank%s, 41 tokens: none %zu, matmuls %zu, full %zu bytes\n", P, P > 1 ? "s" : "", none.total,
                  mat.total, full.total);
  }
  /* a long context over 2 ranks: Ulysses keeps half of each layer's KV
   * cache and of the cache-shaped gradients, and its gathered rows are one
   * rank's share. Both modes hold the output and its gradient in the
   * layout attention runs in ([T, q] each) and packed send and receive
   * buffers: Ulysses [T, max(q + 2 kv, 2 q)], all-gather [T, q] (it trades
   * at most half its queries), which also keeps the traded queries' batch
   * (ids, sequence ids and positions on the backend, sequence ids and
   * positions on the host: 20 bytes a token; sp_attention.c). With 2
   * layers the exchange buffers outweigh the savings; a deep model's cache
   * wins. */
  const long long S = 4096, T = S / 2, kvd = 32, Pn = 2;
  const rg_sp_plan u = plan(m, (int)S, 2, RG_SP_ULYSSES, RG_RECOMPUTE_FULL);
  const rg_sp_plan g = plan(m, (int)S, 2, RG_SP_ALLGATHER, RG_RECOMPUTE_FULL);
  assert_int_equal(u.mode, RG_SP_ULYSSES);
  assert_int_equal(g.mode, RG_SP_ALLGATHER);
  const long long saved = (long long)L * 2 * S * kvd / Pn /* KV cache */ + 2 * S * kvd / Pn /* its gradients */ +
                          2 * (Pn * T - T) * kvd /* gathered rows */;
  const long long row = (long long)q + 2 * kvd > 2 * (long long)q ? (long long)q + 2 * kvd : 2 * (long long)q;
  const long long added = 2 * T * (row - (long long)q);
  assert_int_equal((long long)g.total - (long long)u.total, (saved - added) * (long long)F + 20 * T);
  print_message("4096 tokens over 2 ranks, recompute full: Ulysses %zu, all-gather %zu bytes\n", u.total, g.total);
  /* Ulysses refuses heads that do not divide (3 ranks) */
  rg_sp_plan p;
  assert_int_equal(rg_sp_plan_one(m, 90, 3, RG_SP_ULYSSES, RG_RECOMPUTE_NONE, 0, &p), -1);
  assert_non_null(strstr(rg_error_get(), "not multiples of 3"));
  rg_model_free(m);
}

static void test_choose(void **state) {
  rg_model *m = tiny();
  const int S = 2048, world = 2;
  rg_sp_plan all[6], best;
  int n = 0;
  /* a budget that every plan fits: no recompute on one rank */
  assert_int_equal(rg_sp_plan_choose(m, S, 1e12, world, 0, &best, all, &n), 0);
  assert_int_equal(n, 6);
  assert_int_equal(best.sp, 1);
  assert_int_equal(best.recompute, RG_RECOMPUTE_NONE);
  /* each candidate's total as the budget: the choice fits it, and no
   * candidate that fits has less recompute, or as little on fewer ranks */
  for (int i = 0; i < n; i++) {
    assert_int_equal(rg_sp_plan_choose(m, S, (double)all[i].total, world, 0, &best, NULL, NULL), 0);
    assert_true(best.total <= all[i].total);
    for (int j = 0; j < n; j++)
      if (all[j].total <= all[i].total)
        assert_true(best.recompute_macs < all[j].recompute_macs ||
                    (best.recompute_macs == all[j].recompute_macs && best.sp <= all[j].sp));
    rg_sp_plan_print(&best, stdout);
  }
  /* below the smallest plan: refused, naming it */
  size_t smallest = all[0].total;
  for (int i = 1; i < n; i++) smallest = all[i].total < smallest ? all[i].total : smallest;
  assert_int_equal(rg_sp_plan_choose(m, S, (double)smallest - 1, world, 0, &best, NULL, NULL), -1);
  print_message("refused: %s\n", rg_error_get());
  assert_non_null(strstr(rg_error_get(), "do not fit"));
  rg_model_free(m);
}

static void test_names(void **state) {
  for (int r = RG_RECOMPUTE_NONE; r <= RG_RECOMPUTE_MATMULS; r++)
    assert_int_equal(rg_recompute_parse(rg_recompute_name((rg_recompute)r)), r);
  assert_int_equal(rg_recompute_parse("selective"), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_policies), cmocka_unit_test(test_choose),
                                     cmocka_unit_test(test_names)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
