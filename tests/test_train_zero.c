/* test_train_zero: `refgeo train` with ZeRO-1 and ZeRO-2 (config key zero,
 * adv_ft/zero.h) under mpirun gives the parameters of the same run with
 * zero = 0, on the tiny Qwen2.
 *
 * Five R2D2 updates of 4 micro-batches (2 GCG-refreshed test cases as away
 * and toward examples, 2 utility examples; a pool reset) on 2 ranks (2
 * data-parallel groups, 2 micro-batches each), on 4 ranks (4 groups) and on
 * 4 ranks as 2 groups of sp 2, and LoRA adapters on 2 ranks (the adapters'
 * state sharded), each with zero = 0, 1 and 2. The reference
 * is the zero = 0 run of the same ranks, an independent code path: every
 * rank holds the whole gradient, all-reduced, and updates every parameter
 * with its own moments. Checked on the final parameters
 * (state/step-5/params.f32, which rank 0 gathers):
 *  - zero = 1 bitwise: the same AdamW on the same summed gradient and the
 *    same moments, element by element; only where each float is updated
 *    changes;
 *  - zero = 2 within 1e-6 in the relative L2 norm, and at most 1% of the
 *    parameters off by more than 1e-5 (relative to the parameter, floored
 *    at 1e-3): the gradient is reduce-scattered per micro-batch and added
 *    up over micro-batches, where zero = 0 adds a rank's micro-batches
 *    first (and with sp the ranks are added in another grouping): float32
 *    rounding of those sums, ~1e-7 of a gradient (measured 3e-7 in L2 on 2
 *    ranks). AdamW divides each element's step by its own gradient's
 *    scale, so an element whose summed gradient nearly cancels turns that
 *    rounding into a visible change (the worst element, printed, reaches
 *    ~3e-4): hence a bound on how many elements, not on the worst. With one
 *    micro-batch per rank (4 ranks) the sums are the same and so are the
 *    parameters.
 * A rank that skipped its shard's update, or gathered a shard into the
 * wrong place, leaves a share 1/W of the parameters lr = 1e-3 away from
 * the reference: relative L2 ~1e-3 and a quarter to a half of the
 * elements off, far above both bounds.
 * Resume: one rank killed inside update 3 (SIGKILL, REFGEO_KILL_AT), the
 * run resumed with mpirun: the final parameters and the moments of every
 * shard bitwise those of the run that was not interrupted. A state of 2
 * ranks resumed on 4 is refused with one line on every rank.
 * Bad input: zero 3, zero -1, zero 1 on one rank with and without mpirun,
 * a shard file missing, from another run, or with a byte changed (the
 * state's SHA256SUMS): exit 1, one line on every
 * rank, and the state left as it was.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static char *g_model;

static const char CONFIG[] = "[model]\n"
                             "model = %s\n"
                             "threads = 1\n"
                             "checkpoint_dtype = f32\n"
                             "[optim]\n"
                             "lr = 1e-3\n"
                             "clip = 1\n"
                             "updates = 5\n"
                             "grad_accum = 4\n"
                             "save_steps = 0 5\n"
                             "state_every = 1\n"
                             T_TINY_R2D2_SECTIONS;

static char *config_path(void) {
  char text[4096];
  snprintf(text, sizeof text, CONFIG, g_model);
  return t_write_tmp("train_zero.ini", text, strlen(text));
}

static char *train(const char *name, int np, const char *more) {
  char *cfg = config_path(), *dir = t_fresh_tmp_dir(name), args[2048], *out;
  snprintf(args, sizeof args, "train --config '%s' --out '%s' %s", cfg, dir, more);
  if (t_run_ranks(np, args, &out) != 0) fail_msg("%s: %s", args, out);
  free(out), free(cfg);
  return dir;
}

static char *read_rel(const char *dir, const char *rel, size_t *n) {
  char *p = rg_path_join(dir, rel);
  char *data = rg_read_file(p, n);
  if (!data) fail_msg("%s", rg_error_get());
  free(p);
  return data;
}

/* The final parameters of A and B: bitwise equal (BITWISE), or within
 * 1e-6 as the header says. */
static void compare(const char *a, const char *b, bool bitwise, const char *what) {
  size_t na, nb;
  float *pa = (float *)read_rel(a, "state/step-5/params.f32", &na), *pb = (float *)read_rel(b, "state/step-5/params.f32", &nb);
  assert_int_equal(na, nb);
  na /= sizeof(float);
  double d2 = 0, p2 = 0, worst = 0;
  size_t differ = 0, far = 0;
  for (size_t i = 0; i < na; i++) {
    const double d = (double)pa[i] - pb[i], e = fabs(d) / fmax(fabs(pa[i]), 1e-3);
    d2 += d * d, p2 += (double)pa[i] * pa[i];
    differ += pa[i] != pb[i];
    far += e > 1e-5;
    worst = fmax(worst, e);
  }
  const double rel = sqrt(d2 / p2);
  print_message("%s: %zu of %zu parameters differ (%zu by more than 1e-5), relative L2 %.3g, worst element %.3g\n",
                what, differ, na, far, rel, worst);
  if (bitwise) assert_int_equal(differ, 0);
  assert_true(rel <= 1e-6);
  assert_true(far <= na / 100);
  free(pa), free(pb);
}

static void test_same_as_zero_0(void **state) {
  static const struct {
    int np;
    const char *sp;
    const char *name;
  } SETS[] = {{2, "", "2 ranks"},
              {4, "", "4 ranks"},
              {4, "--sp 2", "2 groups of sp 2"},
              {2, "--mode lora --lora-rank 4 --lora-targets q,k,v,o,gate,up,down", "LoRA on 2 ranks"}};
  for (size_t k = 0; k < sizeof SETS / sizeof SETS[0]; k++) {
    char ref_name[64], more[256], what[128];
    snprintf(ref_name, sizeof ref_name, "train_zero_ref_%zu", k);
    char *ref = train(ref_name, SETS[k].np, SETS[k].sp);
    for (int stage = 1; stage <= 2; stage++) {
      char name[64];
      snprintf(name, sizeof name, "train_zero_%zu_%d", k, stage);
      snprintf(more, sizeof more, "%s --zero %d", SETS[k].sp, stage);
      char *dir = train(name, SETS[k].np, more);
      snprintf(what, sizeof what, "zero %d, %s", stage, SETS[k].name);
      compare(ref, dir, stage == 1, what);
      char *ck = rg_path_join(dir, "checkpoint-5");
      assert_true(rg_is_dir(ck));
      free(ck), free(dir);
    }
    free(ref);
  }
}

/* Whether RC != 0 and at least LINES lines of OUT hold WANT. */
static void said(int rc, const char *out, const char *want, int lines, const char *what) {
  print_message("%s: exit %d: %s", what, rc, strstr(out, "refgeo") ? strstr(out, "refgeo") : out);
  assert_true(rc != 0);
  int n = 0;
  for (const char *p = out; (p = strstr(p, want)); p++) n++;
  if (n < lines) fail_msg("%s: %d of %d ranks said \"%s\": %s", what, n, lines, want, out);
}

/* Runs ARGS on NP ranks, into *out, and checks it as said() does. */
static void refused(int np, const char *args, char **out, const char *want, int lines, const char *what) {
  const int rc = t_run_ranks(np, args, out);
  said(rc, *out, want, lines, what);
}

static void test_resume_after_kill(void **state) {
  char *whole = train("train_zero_whole", 2, "--zero 2");
  char *cfg = config_path(), *dir = t_fresh_tmp_dir("train_zero_killed"), args[2048], launch[8192], *out;
  /* rank 1 killed in the first micro-batch of update 3 (after its GCG) */
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 2", cfg, dir);
  snprintf(launch, sizeof launch, "%s --oversubscribe -np 1 %s %s : -np 1 env REFGEO_KILL_AT=update:9 %s %s",
           t_env("REFGEO_MPIRUN"), t_env("REFGEO_BIN"), args, t_env("REFGEO_BIN"), args);
  const int rc = t_run_shell(launch, &out);
  print_message("killed run: exit %d\n", rc);
  assert_true(rc != 0);
  free(out);
  char *step5 = rg_path_join(dir, "state/step-5");
  assert_false(rg_is_dir(step5));
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 2 --resume", cfg, dir);
  if (t_run_ranks(2, args, &out) != 0) fail_msg("resume: %s", out);
  free(out);
  size_t na, nb;
  char *a = read_rel(whole, "state/step-5/params.f32", &na), *b = read_rel(dir, "state/step-5/params.f32", &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a), free(b);
  for (int r = 0; r < 2; r++) { /* the moments after the 48-byte header, whose run id differs */
    char rel[64];
    snprintf(rel, sizeof rel, "state/step-5/zero-%d-of-2.f32", r);
    a = read_rel(whole, rel, &na), b = read_rel(dir, rel, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a + 48, b + 48, na - 48);
    free(a), free(b);
  }
  print_message("resumed after SIGKILL of rank 1 in update 3: parameters and both shards bitwise equal\n");
  /* the same state on 4 ranks (4 groups): refused */
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 2 --resume", cfg, dir);
  refused(4, args, &out, "refgeo does not re-partition a state", 4, "state of 2 ranks on 4");
  free(out);
  free(cfg), free(dir), free(whole), free(step5);
}

static void test_bad_input(void **state) {
  char *cfg = config_path(), *dir = t_fresh_tmp_dir("train_zero_bad"), args[2048], *out;
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 3", cfg, dir);
  refused(2, args, &out, "zero: 3 is not 0, 1 or 2", 2, "zero 3");
  free(out);
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero -1", cfg, dir);
  refused(2, args, &out, "zero: -1 is below 0", 2, "zero -1");
  free(out);
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 1", cfg, dir);
  refused(1, args, &out, "one: mpirun -np 2 or more", 1, "zero 1 on one rank");
  free(out);
  refused(0, args, &out, "not started by mpirun", 1, "zero 1 without mpirun");
  free(out);
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 2 --sp 2", cfg, dir);
  refused(2, args, &out, "make one: mpirun -np 4", 2, "zero 2 on one group of sp 2");
  free(out);

  /* a finished run's state, its shard of rank 1 missing, then from another run */
  char *run_a = train("train_zero_a", 2, "--zero 1 --updates 2 --save-steps '0 2'");
  char *run_b = train("train_zero_b", 2, "--zero 1 --updates 2 --save-steps '0 2'");
  char *shard = rg_path_join(run_a, "state/step-2/zero-1-of-2.f32"), *moved = rg_path_join(run_a, "zero-1.saved");
  char *other = rg_path_join(run_b, "state/step-2/zero-1-of-2.f32");
  size_t n_before, n_after;
  char *before = read_rel(run_a, "state/step-2/params.f32", &n_before);
  assert_int_equal(rename(shard, moved), 0);
  snprintf(args, sizeof args, "train --config '%s' --out '%s' --zero 1 --updates 2 --save-steps '0 2' --resume", cfg,
           run_a);
  refused(2, args, &out, "zero-1-of-2.f32", 1, "shard missing");
  assert_non_null(strstr(out, "rank 1 failed"));
  free(out);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", other, shard);
  assert_int_equal(system(cmd), 0);
  refused(2, args, &out, "from another run or step", 1, "shard of another run");
  assert_non_null(strstr(out, "rank 1 failed"));
  free(out);
  /* its own shard with one byte of m flipped: the header still matches,
   * the state's SHA256SUMS does not */
  snprintf(cmd, sizeof cmd,
           "cp '%s' '%s' && printf '\\377' | dd of='%s' bs=1 seek=100 count=1 conv=notrunc status=none", moved,
           shard, shard);
  assert_int_equal(system(cmd), 0);
  refused(2, args, &out, "differs from", 1, "shard with a flipped byte");
  assert_non_null(strstr(out, "zero-1-of-2.f32"));
  free(out);
  char *after = read_rel(run_a, "state/step-2/params.f32", &n_after);
  assert_int_equal(n_before, n_after);
  assert_memory_equal(before, after, n_before);
  free(before), free(after), free(shard), free(moved), free(other), free(run_a), free(run_b), free(cfg), free(dir);
}

int main(void) {
  g_model = t_hf_tiny("qwen2_bf16");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_as_zero_0), cmocka_unit_test(test_resume_after_kill),
                                     cmocka_unit_test(test_bad_input)};
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(g_model);
  return rc;
}
