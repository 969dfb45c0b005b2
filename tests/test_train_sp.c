/* test_train_sp: `refgeo train` under mpirun, sequence-parallel (config key
 * sp), data-parallel (the groups mpirun's ranks make beyond sp) or both,
 * gives the single-process run, on the tiny Qwen2 (4 heads, 2 KV heads:
 * Ulysses on 2 ranks, all-gather KV on 4).
 *
 * Three R2D2 updates (2 micro-batches each: 2 GCG-refreshed test cases,
 * each as an away and a toward example, and 2 utility examples; a pool
 * reset) in one process, and with sp 2 and sp 4 on 2 and 4 ranks, 2
 * data-parallel groups of one rank, and 2 groups of sp 2 (mpirun
 * --oversubscribe on 2 cores). Every rank draws the same micro-batches and
 * runs the same GCG, each step's 8 candidates shared out over all the
 * ranks; a sequence-parallel group evaluates its part of the tokens of the
 * micro-batches its data-parallel group takes; the ranks' gradients are
 * summed. Checked:
 *  - each update's losses (total, utility, away, toward), gradient norm
 *    and GCG target loss in train_log.csv within 1e-5 relative;
 *  - the final parameters (state/step-3/params.f32) within 1e-5 in the
 *    relative L2 norm (AdamW's per-element normalization makes the
 *    max-norm an Adam sensitivity measure, test_sp.c says why);
 *  - rank 0 alone wrote the run: its checkpoints and log are there.
 * The differences are float rounding (summation order over ranks); a
 * misrouted row, a micro-batch trained twice or by no group, a rank on a
 * different batch or a misplaced candidate loss gives O(1) differences.
 * Bad input: sp that does not divide the ranks, data-parallel groups that
 * grad_accum does not share out over, sp > 1 without mpirun, Ulysses
 * forced on heads that 4 ranks do not divide: exit 1 on every rank with
 * one line naming the problem.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testlib.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"

static char *g_model;

static const char CONFIG[] = "[model]\n"
                             "model = %s\n"
                             "threads = 1\n"
                             "checkpoint_dtype = f32\n"
                             "[optim]\n"
                             "lr = 1e-3\n"
                             "updates = 3\n"
                             "grad_accum = 2\n"
                             "save_steps = 0 3\n"
                             "state_every = 1\n"
                             T_TINY_R2D2_SECTIONS;

static char *config_path(void) {
  char text[4096];
  snprintf(text, sizeof text, CONFIG, g_model);
  return t_write_tmp("train_sp.ini", text, strlen(text));
}

/* A run into a new REFGEO_TMP/NAME; fails the test if it fails. */
static char *train(const char *name, int np, const char *more) {
  char *cfg = config_path(), *dir = t_fresh_tmp_dir(name), args[2048], *out;
  snprintf(args, sizeof args, "train --config '%s' --out '%s' %s", cfg, dir, more);
  if (t_run_ranks(np, args, &out) != 0) fail_msg("%s: %s", args, out);
  free(out), free(cfg);
  return dir;
}

static rg_csv *log_of(const char *dir) {
  char *p = rg_path_join(dir, "train_log.csv");
  rg_csv *t = rg_csv_read(p);
  if (!t) fail_msg("%s", rg_error_get());
  free(p);
  return t;
}

static float *params_of(const char *dir, size_t *n) {
  char *p = rg_path_join(dir, "state/step-3/params.f32");
  char *data = rg_read_file(p, n);
  if (!data) fail_msg("%s", rg_error_get());
  free(p);
  *n /= sizeof(float);
  return (float *)data;
}

static void compare(const char *ref, const char *sp, const char *what) {
  static const char *const COLS[] = {"loss_total", "loss_utility", "loss_away", "loss_toward", "grad_norm",
                                     "gcg_target_loss_mean"};
  rg_csv *a = log_of(ref), *b = log_of(sp);
  assert_int_equal(a->n_rows, 3);
  assert_int_equal(b->n_rows, 3);
  double worst = 0;
  for (size_t c = 0; c < sizeof COLS / sizeof COLS[0]; c++) {
    const int ca = rg_csv_col(a, COLS[c]), cb = rg_csv_col(b, COLS[c]);
    assert_true(ca >= 0 && cb >= 0);
    for (int r = 0; r < 3; r++) {
      const double x = strtod(a->rows[r][ca], NULL), y = strtod(b->rows[r][cb], NULL);
      const double e = fabs(x - y) / fmax(fabs(x), 1e-30);
      if (!(e <= 1e-5)) fail_msg("%s: %s of update %d: %.9g alone, %.9g split", what, COLS[c], r + 1, x, y);
      worst = fmax(worst, e);
    }
  }
  size_t na, nb;
  float *pa = params_of(ref, &na), *pb = params_of(sp, &nb);
  assert_int_equal(na, nb);
  double d2 = 0, p2 = 0;
  for (size_t i = 0; i < na; i++) d2 += ((double)pa[i] - pb[i]) * ((double)pa[i] - pb[i]), p2 += (double)pa[i] * pa[i];
  const double e_param = sqrt(d2 / p2);
  print_message("%s: losses, gradient norms and GCG losses of 3 updates within %.2e, parameters %.2e (L2)\n", what,
                worst, e_param);
  assert_true(e_param <= 1e-5);
  char *ck = rg_path_join(sp, "checkpoint-3");
  assert_true(rg_is_dir(ck));
  free(ck);
  rg_csv_free(a), rg_csv_free(b);
  free(pa), free(pb);
}

static void test_same_as_one_process(void **state) {
  char *ref = train("train_sp_ref", 0, "");
  char *u = train("train_sp_2", 2, "--sp 2");
  compare(ref, u, "sp 2 (Ulysses)");
  char *g = train("train_sp_2g", 2, "--sp 2 --sp-attention allgather");
  compare(ref, g, "sp 2 (all-gather KV)");
  char *four = train("train_sp_4", 4, "--sp 4");
  compare(ref, four, "sp 4 (all-gather KV)");
  char *dp = train("train_dp_2", 2, "");
  compare(ref, dp, "2 data-parallel groups");
  char *both = train("train_sp_2_dp_2", 4, "--sp 2");
  compare(ref, both, "2 data-parallel groups of sp 2 (Ulysses)");
  free(ref), free(u), free(g), free(four), free(dp), free(both);
}

/* Exit 1, and every rank's error line names the problem. */
static void refused(int np, const char *more, const char *want) {
  char *cfg = config_path(), *dir = t_fresh_tmp_dir("train_sp_bad"), args[2048], *out;
  snprintf(args, sizeof args, "train --config '%s' --out '%s' %s", cfg, dir, more);
  const int rc = t_run_ranks(np, args, &out);
  print_message("np %d %s: exit %d: %s", np, more, rc, strstr(out, "refgeo") ? strstr(out, "refgeo") : out);
  assert_true(rc != 0);
  int lines = 0;
  for (const char *p = out; (p = strstr(p, want)); p++) lines++;
  if (lines < (np > 0 ? np : 1)) fail_msg("%d of %d ranks said \"%s\": %s", lines, np, want, out);
  free(out), free(cfg), free(dir);
}

static void test_bad_input(void **state) {
  refused(2, "--sp 3", "does not divide");
  refused(4, "", "do not share out over 4 data-parallel groups");
  refused(0, "--sp 2", "needs mpirun");
  refused(4, "--sp 4 --sp-attention ulysses", "not multiples of 4");
}

int main(void) {
  g_model = t_hf_tiny("qwen2_bf16");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_as_one_process), cmocka_unit_test(test_bad_input)};
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(g_model);
  return rc;
}
