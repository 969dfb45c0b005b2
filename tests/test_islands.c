/* test_islands: `refgeo islands` and `refgeo train` islands ([islands],
 * docs/training.md "Islands") as separate processes on the tiny Qwen2,
 * through a sync directory.
 *
 * Exact in the limit (issue 46, acceptance 1): K = 2 and 4 islands, H = 1
 * inner update per outer step, outer SGD lr 1 and momentum 0, f32 messages,
 * island_data = shard (island i trains micro-batches k = i mod K of the
 * stream every island draws, as data-parallel group i of `mpirun -np K`
 * does), weighted by micro-batches, quorum K. The inner optimizer is sgd:
 * averaging the islands' updates equals the update of the averaged
 * gradient only when the update is linear in the gradient, and AdamW's is
 * not. After 5 updates theta_global (sync/global/v5/theta.f32) equals the
 * parameters of refgeo's synchronous data parallelism (mpirun -np K, the
 * same config without islands; state/step-5/params.f32) within 1e-6 in the
 * relative L2 norm: the islands compute theta_g - (theta_g - theta_i)
 * averaged, where data parallelism sums scaled gradients, float32 rounding
 * of a few ulps (1.2e-7) per step. The parameters must also have moved
 * (relative L2 from theta_0 above 1e-3, lr 0.5), so islands that did not
 * train would fail.
 *
 * A decoupled run (K = 2, H = 2, quorum 1, AdamW inside, outer Nesterov
 * 0.7/0.9, int4 messages, each island its own data): completes; every
 * island adopts each version from the update messages, its theta_global
 * checked bit for bit against the version's SHA256SUMS (no island reads a
 * version whole); islands_log.csv has a row per version with the bytes;
 * `refgeo islands --replay` recomputes every version bit for bit. The run
 * ends with SYNC/final.json, and each island's last checkpoint (f32) holds
 * that final version's theta exactly: with quorum 1 the island that
 * finishes first would otherwise keep a version without the other's last
 * contribution.
 *
 * The run's end on merged updates (run_updates = 8, K = 2, H = 2, quorum
 * 1, each island's cap 20): only island 0 is started (island 1 is a
 * machine that never came up). The run must end without it: final.json
 * with 8 merged updates, island 0 stopped after update 8 or a little
 * later (not its cap), its last checkpoint the final theta. Island 1, started after the end,
 * joins the final version (its checkpoint-0), trains nothing, exits 0.
 * The same end with island 0 on 2 MPI ranks and both islands training.
 *
 * Bad input (acceptance 5): a quorum larger than K, inner_steps = 0 (H = 0),
 * an island id >= K and run_updates above islands x updates are refused
 * by both commands with one line, exit 1;
 * an island of another model (LoRA against a full run) and an island
 * resumed against a sync directory that now holds another run are refused
 * with one line. Bad messages are test_islands_sync's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/islands_sync.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static char *g_model;

static const char CONFIG[] = "[model]\n"
                             "model = %s\n"
                             "threads = 1\n"
                             "checkpoint_dtype = f32\n"
                             "[optim]\n"
                             "optimizer = %s\n"
                             "lr = %s\n"
                             "schedule = constant\n"
                             "updates = %d\n"
                             "grad_accum = 4\n"
                             "save_steps = 0\n"
                             T_TINY_R2D2_SECTIONS
                             "[islands]\n"
                             "sync_dir = %s\n"
                             "%s";

static char *write_config(const char *name, const char *sync, const char *opt, const char *lr, int updates,
                          const char *islands) {
  char text[4096], file[128];
  snprintf(text, sizeof text, CONFIG, g_model, opt, lr, updates, sync, islands);
  snprintf(file, sizeof file, "%s.ini", name);
  return t_write_tmp(file, text, strlen(text));
}

/* The coordinator and K islands of CFG, started together; each island's
 * run dir is BASE-<i>; island 0 runs on RANKS0 MPI ranks (0: one plain
 * process). Returns their output; fails unless all exit 0. */
static char *run_islands_ranks(const char *cfg, const char *base, int k, const char *more, int ranks0) {
  char cmd[8192], mpi[1024] = "";
  const char *bin = t_env("REFGEO_BIN");
  if (ranks0 > 0) snprintf(mpi, sizeof mpi, "'%s' --oversubscribe -np %d ", t_env("REFGEO_MPIRUN"), ranks0);
  int at = snprintf(cmd, sizeof cmd, "( '%s' islands --config '%s' & c=$!; ", bin, cfg);
  for (int i = 0; i < k; i++) {
    char *dir = NULL, name[128];
    snprintf(name, sizeof name, "%s-%d", base, i);
    dir = t_fresh_tmp_dir(name);
    at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s'%s' train --config '%s' --island %d --out '%s' %s & p%d=$!; ",
                   i == 0 ? mpi : "", bin, cfg, i, dir, more, i);
    free(dir);
  }
  at += snprintf(cmd + at, sizeof cmd - (size_t)at, "rc=0; ");
  for (int i = 0; i < k; i++) at += snprintf(cmd + at, sizeof cmd - (size_t)at, "wait $p%d || rc=1; ", i);
  snprintf(cmd + at, sizeof cmd - (size_t)at, "wait $c || rc=1; exit $rc )"); /* ( ): t_run_shell's 2>&1 takes every process's stderr */
  char *out;
  if (t_run_shell(cmd, &out) != 0) fail_msg("%s\n%s", cmd, out);
  return out;
}

static char *run_islands(const char *cfg, const char *base, int k, const char *more) {
  return run_islands_ranks(cfg, base, k, more, 0);
}

static float *read_floats(const char *path, size_t *n) {
  float *x = (float *)rg_read_file(path, n);
  if (!x) fail_msg("%s", rg_error_get());
  *n /= sizeof *x;
  return x;
}

static double rel_l2(const float *a, const float *b, size_t n) {
  double d2 = 0, b2 = 0;
  for (size_t i = 0; i < n; i++) d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), b2 += (double)b[i] * b[i];
  return sqrt(d2 / b2);
}

/* The run in SYNC has ended (final.json) at a version whose theta equals,
 * exactly, the parameters of ISLAND_DIR/checkpoint-STEP. Returns the
 * merged updates final.json gives. */
static long long assert_final_checkpoint(const char *sync, const char *island_dir, long step) {
  long v;
  long long merged;
  assert_int_equal(rg_isl_final_read(sync, &v, &merged), 1);
  char name[64];
  snprintf(name, sizeof name, "global/v%ld/theta.f32", v);
  char *theta_path = rg_path_join(sync, name);
  snprintf(name, sizeof name, "checkpoint-%ld", step);
  char *ck = rg_path_join(island_dir, name);
  size_t nt, nc;
  float *theta = read_floats(theta_path, &nt), *params = t_model_params(ck, &nc);
  assert_int_equal(nt, nc);
  /* f32 checkpoints of the adopted theta: the same floats, bit for bit */
  if (memcmp(theta, params, nt * sizeof *theta) != 0)
    fail_msg("%s differs from the run's final version %ld (relative L2 %.3g)", ck, v, rel_l2(params, theta, nt));
  print_message("%s: the final version %ld (%lld inner updates merged), exactly\n", ck, v, merged);
  free(theta), free(params), free(theta_path), free(ck);
  return merged;
}

static void test_same_as_data_parallel(void **state) {
  (void)state;
  for (int k = 2; k <= 4; k += 2) {
    char name[64], islands[512];
    snprintf(name, sizeof name, "isl_dp_%d", k);
    char *sync = t_fresh_tmp_dir(name), *dp_name = NULL;
    snprintf(islands, sizeof islands,
             "islands = %d\ninner_steps = 1\nquorum = %d\nouter_lr = 1\nouter_momentum = 0\ncompression = f32\n"
             "island_data = shard\nweighting = micro_batches\n",
             k, k);
    char *cfg = write_config(name, sync, "sgd", "0.5", 5, islands);
    char base[80];
    snprintf(base, sizeof base, "%s-island", name);
    free(run_islands(cfg, base, k, ""));
    /* the reference: synchronous data parallelism, the same config without islands */
    snprintf(base, sizeof base, "%s-sync", name);
    dp_name = t_fresh_tmp_dir(base);
    char args[2048], *out;
    snprintf(args, sizeof args, "train --config '%s' --sync-dir '' --out '%s'", cfg, dp_name);
    if (t_run_ranks(k, args, &out) != 0) fail_msg("%s: %s", args, out);
    free(out);
    char *g5 = rg_path_join(sync, "global/v5/theta.f32"), *g0 = rg_path_join(sync, "global/v0/theta.f32");
    char *ref = rg_path_join(dp_name, "state/step-5/params.f32");
    size_t n5, n0, nr;
    float *a = read_floats(g5, &n5), *a0 = read_floats(g0, &n0), *b = read_floats(ref, &nr);
    assert_int_equal(n5, nr), assert_int_equal(n0, nr);
    const double err = rel_l2(a, b, nr), moved = rel_l2(b, a0, nr);
    print_message("K = %d: theta_global after 5 outer steps vs data parallelism: relative L2 %.3g (moved %.3g from theta_0)\n",
                  k, err, moved);
    assert_true(err <= 1e-6);
    assert_true(moved >= 1e-3);
    free(a), free(a0), free(b), free(g5), free(g0), free(ref), free(cfg), free(sync), free(dp_name);
  }
}

static void test_decoupled_int4(void **state) {
  (void)state;
  char *sync = t_fresh_tmp_dir("isl_int4");
  char *cfg = write_config("isl_int4", sync, "adamw", "1e-3", 6,
                           "islands = 2\ninner_steps = 2\nquorum = 1\ncompression = int4\nblock_size = 32\n"
                           "deadline_s = 30\n");
  char *out = run_islands(cfg, "isl_int4-island", 2, "");
  assert_null(strstr(out, "reads version")); /* every adoption from updates, checked bit for bit */
  free(out);
  char *log = rg_path_join(sync, "islands_log.csv");
  size_t len;
  char *text = rg_read_file(log, &len);
  assert_non_null(text);
  int rows = 0;
  for (size_t i = 0; i < len; i++) rows += text[i] == '\n';
  print_message("islands_log.csv:\n%s", text);
  assert_true(rows >= 1 + 3); /* the header, then at least 6 / 2 versions */
  assert_non_null(strstr(text, "outer_step,islands_reporting,contributors,quorum_wait_s,bytes_received,bytes_sent"));
  char args[2048];
  snprintf(args, sizeof args, "islands --config '%s' --replay", cfg);
  assert_int_equal(t_run_ranks(0, args, &out), 0);
  assert_non_null(strstr(out, "the same"));
  for (int i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "isl_int4-island-%d", i);
    char *island = t_tmp_path(name);
    const long long merged = assert_final_checkpoint(sync, island, 6);
    assert_true(merged >= 2 && merged <= 12); /* of both islands' 6 updates, less those dropped as stale */
    free(island);
  }
  free(out), free(text), free(log), free(cfg), free(sync);
}

static long stop_step(const char *out, int i);

static void test_run_updates(void **state) {
  (void)state;
  char *sync = t_fresh_tmp_dir("isl_end");
  char *cfg = write_config("isl_end", sync, "adamw", "1e-3", 20,
                           "islands = 2\ninner_steps = 2\nquorum = 1\nrun_updates = 8\ncompression = int8\n");
  char *out = run_islands(cfg, "isl_end-island", 1, ""); /* island 1 never comes up */
  print_message("%s", out);
  /* island 0 adopts the final version at its boundary 8 and may start
   * more updates before the coordinator has written final.json (just
   * after that version; later on a loaded machine): it stops after 8 or a
   * little later, before its cap of 20 */
  const long at = stop_step(out, 0);
  assert_true(at >= 8 && at < 20);
  free(out);
  char *island0 = t_tmp_path("isl_end-island-0"), *ck_cap = rg_path_join(island0, "checkpoint-20");
  assert_int_equal(assert_final_checkpoint(sync, island0, at), 8); /* its contributions of steps 2, 4, 6, 8 */
  assert_false(rg_path_exists(ck_cap));
  /* island 1 after the end: it joins the final version (its checkpoint-0)
   * and trains nothing */
  char *island1 = t_fresh_tmp_dir("isl_end-island-1"), args[2048];
  snprintf(args, sizeof args, "train --config '%s' --island 1 --out '%s'", cfg, island1);
  assert_int_equal(t_run_ranks(0, args, &out), 0);
  assert_non_null(strstr(out, "stops after update 0"));
  assert_final_checkpoint(sync, island1, 0);
  char *ck1 = rg_path_join(island1, "checkpoint-1");
  assert_false(rg_path_exists(ck1));
  free(ck1), free(out), free(island1), free(ck_cap), free(island0), free(cfg), free(sync);
}

/* The step after which island I stopped, from its line in OUT. */
static long stop_step(const char *out, int i) {
  char want[64];
  snprintf(want, sizeof want, "islands: island %d stops after update ", i);
  const char *p = strstr(out, want);
  if (!p) fail_msg("no \"%s\" in:\n%s", want, out);
  return strtol(p + strlen(want), NULL, 10);
}

/* Island 0 on 2 MPI ranks (its ranks take rank 0's decisions: the run's
 * end checked before every update, the wait for it, the final version),
 * island 1 one process; the run ends on merged updates (run_updates 8,
 * caps 10, quorum 1) while both train. Both islands' last checkpoints
 * must hold the final version exactly. */
static void test_multi_rank_island(void **state) {
  (void)state;
  char *sync = t_fresh_tmp_dir("isl_mpi");
  char *cfg = write_config("isl_mpi", sync, "adamw", "1e-3", 10,
                           "islands = 2\ninner_steps = 2\nquorum = 1\nrun_updates = 8\ncompression = bf16\n");
  char *out = run_islands_ranks(cfg, "isl_mpi-island", 2, "", 2);
  for (int i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "isl_mpi-island-%d", i);
    char *island = t_tmp_path(name);
    const long at = stop_step(out, i);
    assert_true(at >= 1 && at <= 10);
    assert_true(assert_final_checkpoint(sync, island, at) >= 8);
    free(island);
  }
  free(out), free(cfg), free(sync);
}

/* A command that must fail with one line containing WANT. */
static void refused(const char *args, const char *want) {
  char *out;
  const int rc = t_run_ranks(0, args, &out);
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  if (rc != 1 || lines != 1 || !strstr(out, want)) fail_msg("%s: exit %d, expected one line with \"%s\":\n%s", args, rc, want, out);
  free(out);
}

static void test_bad_config(void **state) {
  (void)state;
  char *sync = t_fresh_tmp_dir("isl_bad");
  char *cfg = write_config("isl_bad", sync, "adamw", "1e-3", 2, "islands = 2\n");
  char *dir = t_fresh_tmp_dir("isl_bad-island"), args[2048];
  static const struct {
    const char *flags, *want;
  } CASES[] = {{"--quorum 3", "quorum: 3 is more than islands 2"},
               {"--inner-steps 0", "inner_steps: 0 is below 1"},
               {"--island 2", "island: 2 is not below islands 2"},
               {"--compression int3", "compression: \"int3\" is not one of"},
               {"--run-updates 5", "run_updates: 5 is more than islands x updates (2 x 2)"}};
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    snprintf(args, sizeof args, "train --config '%s' --out '%s' %s", cfg, dir, CASES[i].flags);
    refused(args, CASES[i].want);
    snprintf(args, sizeof args, "islands --config '%s' %s", cfg, CASES[i].flags);
    refused(args, CASES[i].want);
  }
  assert_false(rg_path_exists(sync)); /* nothing started */
  free(cfg), free(dir), free(sync);
}

static void test_foreign_island(void **state) {
  (void)state;
  /* a finished run (test_decoupled_int4's): its run.json is there */
  char *cfg = t_tmp_path("isl_int4.ini"), *dir = t_fresh_tmp_dir("isl_foreign"), args[2048];
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --mode lora --lora-rank 2", cfg, dir);
  refused(args, "trains other parameters");
  /* island 0's run dir resumed against the same sync dir, now holding a new run */
  char *sync = t_tmp_path("isl_int4"), *island = t_tmp_path("isl_int4-island-0");
  snprintf(args, sizeof args,
           "( rm -rf '%s' && { '%s' islands --config '%s' --max-versions 1 & c=$!; }; sleep 3; '%s' train --config '%s' "
           "--out '%s' --resume; rc=$?; kill $c; wait $c; exit $rc )",
           sync, t_env("REFGEO_BIN"), cfg, t_env("REFGEO_BIN"), cfg, island);
  char *out;
  const int rc = t_run_shell(args, &out);
  print_message("%s", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "its state belongs to islands run"));
  free(out), free(sync), free(island), free(cfg), free(dir);
}

int main(void) {
  g_model = t_hf_tiny("qwen2_bf16");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_as_data_parallel), cmocka_unit_test(test_decoupled_int4),
                                     cmocka_unit_test(test_run_updates), cmocka_unit_test(test_multi_rank_island),
                                     cmocka_unit_test(test_bad_config), cmocka_unit_test(test_foreign_island)};
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(g_model);
  return rc;
}
