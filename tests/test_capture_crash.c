/* test_capture_crash.c: `refgeo capture` killed with SIGKILL partway, then
 * resumed, gives the same file contents as an uninterrupted run.
 *
 * Series: base + a perturbed copy (steps 0, 100), one prompt per split (the
 * test also runs under ASan, where the model does ~20 tokens/s). The capture
 * is killed twice: early (while step 0 runs, before anything is complete),
 * and halfway through step 100 (half of step 0's time after step 0 was
 * reported complete); after every kill the file must open with h5dump
 * (hdf5-tools, independent of the writer) and keep the steps that had been
 * reported complete. A last run finishes the series, reporting the complete
 * steps as skipped. Its activations must equal the uninterrupted run's byte
 * for byte (h5dump binary output), as must the prompt texts and token ids
 * (h5dump text), and no per-step temp file may be left behind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "util/fileio.h"

static const char *const SPLITS[] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};
static const long STEPS[] = {0, 100};
enum { N_SPLITS = 4, N_STEPS = 2 };
/* Longest wait for a step (ASan builds run the model ~5x slower). */
static const double WAIT_S = 300;

static char *dir_path(const char *name) {
  char *d = t_tmp_path("capture-crash");
  assert_int_equal(rg_mkdir_p(d), 0);
  char *p = rg_path_join(d, name);
  assert_non_null(p);
  free(d);
  return p;
}

/* Runs "h5dump ARGS FILE"; returns its exit status and, if OUT, its stdout
 * without the first line (which names the file). */
static int h5dump(const char *args, const char *file, char **out) {
  char *out_path = dir_path("h5dump.out");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "h5dump -w 0 %s '%s' > '%s' 2>&1", args, file, out_path);
  int rc = system(cmd);
  if (out) {
    char *text = rg_read_file(out_path, NULL);
    assert_non_null(text);
    char *nl = strchr(text, '\n');
    *out = strdup(nl ? nl + 1 : "");
    free(text);
  }
  free(out_path);
  return rc;
}

static char *capture_args(const char *manifest, const char *h5) {
  char *args = malloc(8192);
  assert_non_null(args);
  char *p[N_SPLITS];
  for (int i = 0; i < N_SPLITS; i++) {
    char name[256];
    snprintf(name, sizeof name, "../../data/prompts/%s.json", SPLITS[i]);
    p[i] = t_fixture_path(name);
  }
  snprintf(args, 8192,
           "capture --manifest '%s' --out '%s' --harmful-train '%s' --harmless-train '%s' --harmful-val '%s' "
           "--harmless-val '%s' --n-train 1 --n-val 1 --seed 5 --threads 2",
           manifest, h5, p[0], p[1], p[2], p[3]);
  for (int i = 0; i < N_SPLITS; i++) free(p[i]);
  return args;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts "$REFGEO_BIN ARGS 2>ERR_PATH" in the background. */
static pid_t spawn(const char *args, const char *err_path) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "exec %s %s 2>'%s' >/dev/null", t_env("REFGEO_BIN"), args, err_path);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Waits until ERR_PATH contains NEEDLE (fails the test after WAIT_S or if
 * the process ends first). */
static void wait_for(pid_t pid, const char *err_path, const char *needle) {
  double t0 = now_s();
  while (now_s() - t0 < WAIT_S) {
    char *err = rg_read_file(err_path, NULL);
    int found = err && strstr(err, needle);
    free(err);
    if (found) return;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("capture ended before printing '%s'", needle);
    sleep_ms(10);
  }
  fail_msg("no '%s' after %.0f s", needle, WAIT_S);
}

static void kill_and_reap(pid_t pid) {
  assert_int_equal(kill(pid, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  /* The process must really have been killed, not have finished: otherwise
   * this run tested nothing. */
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* After a kill the file opens and the steps reported complete are there. */
static void check_valid(const char *h5, int n_complete) {
  if (!rg_path_exists(h5)) {
    assert_int_equal(n_complete, 0);
    return;
  }
  char *out = NULL;
  if (h5dump("-H", h5, &out) != 0) fail_msg("h5dump -H fails on the killed run's file:\n%.2000s", out);
  free(out);
  for (int s = 0; s < n_complete; s++) {
    char args[128];
    snprintf(args, sizeof args, "-a /step_%ld/complete", STEPS[s]);
    assert_int_equal(h5dump(args, h5, &out), 0);
    if (!strstr(out, "(0): 1\n")) fail_msg("step %ld not complete after the kill:\n%s", STEPS[s], out);
    free(out);
  }
}

static void assert_same_dump(const char *args, const char *a, const char *b) {
  char *da = NULL, *db = NULL;
  assert_int_equal(h5dump(args, a, &da), 0);
  assert_int_equal(h5dump(args, b, &db), 0);
  if (strcmp(da, db) != 0) fail_msg("h5dump %s differs between the runs", args);
  free(da);
  free(db);
}

static void assert_same_floats(const char *dset, const char *a, const char *b) {
  char *ba = dir_path("a.bin"), *bb = dir_path("b.bin");
  char args[1024];
  snprintf(args, sizeof args, "-d %s -b LE -o '%s'", dset, ba);
  assert_int_equal(h5dump(args, a, NULL), 0);
  snprintf(args, sizeof args, "-d %s -b LE -o '%s'", dset, bb);
  assert_int_equal(h5dump(args, b, NULL), 0);
  size_t na, nb;
  char *va = rg_read_file(ba, &na), *vb = rg_read_file(bb, &nb);
  assert_true(va && vb && na > 0);
  assert_int_equal(na, nb);
  assert_memory_equal(va, vb, na);
  free(va), free(vb), free(ba), free(bb);
}

static void perturb(const char *out, int seed) {
  char args[2048];
  snprintf(args, sizeof args, "perturb --model '%s' --out '%s' --scale 0.05 --seed %d", t_env("REFGEO_MODEL"), out,
           seed);
  char *err = NULL;
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("perturb: %s", err);
  free(err);
}

static void test_kill_and_resume(void **state) {
  char *p1 = dir_path("p1.gguf"), *manifest = dir_path("series.csv");
  char *ref = dir_path("ref.h5"), *h5 = dir_path("killed.h5"), *err_path = dir_path("stderr.txt");
  perturb(p1, 11);
  char csv[4096];
  snprintf(csv, sizeof csv, "step,path\n0,%s\n100,p1.gguf\n", t_env("REFGEO_MODEL"));
  assert_int_equal(rg_write_file_atomic(manifest, csv, strlen(csv)), 0);
  unlink(ref);
  unlink(h5);

  char *ref_args = capture_args(manifest, ref), *args = capture_args(manifest, h5);
  char *err = NULL;
  if (t_run_cli(ref_args, NULL, &err) != 0) fail_msg("uninterrupted capture: %s", err);
  free(err);

  /* Kill 1: early, while step 0 is being captured (its line not yet out). */
  pid_t pid = spawn(args, err_path);
  sleep_ms(100);
  char *e = rg_read_file(err_path, NULL);
  assert_true(e && !strstr(e, "step 0: "));
  free(e);
  kill_and_reap(pid);
  check_valid(h5, 0);

  /* Kill 2: halfway through step 100. */
  pid = spawn(args, err_path);
  wait_for(pid, err_path, "step 0: ");
  e = rg_read_file(err_path, NULL);
  const char *line = strstr(e, "step 0: ");
  double step0_s = 0;
  assert_non_null(line);
  assert_int_equal(sscanf(line, "step 0: %*d prompt tokens, forward %*f s (%*f tokens/s), step %lf s", &step0_s), 1);
  free(e);
  sleep_ms((int)(500 * step0_s));
  kill_and_reap(pid);
  check_valid(h5, 1);

  if (t_run_cli(args, NULL, &err) != 0) fail_msg("resumed capture: %s", err);
  assert_non_null(strstr(err, "step 0: already captured"));
  assert_non_null(strstr(err, "step 100: ") && strstr(err, "tokens/s"));
  free(err);

  for (int s = 0; s < N_STEPS; s++) {
    char dset[256];
    snprintf(dset, sizeof dset, "-a /step_%ld/complete", STEPS[s]);
    assert_same_dump(dset, ref, h5);
    for (int i = 0; i < N_SPLITS; i++) {
      snprintf(dset, sizeof dset, "/step_%ld/acts/%s/resid_pre", STEPS[s], SPLITS[i]);
      assert_same_floats(dset, ref, h5);
      char a[512];
      snprintf(a, sizeof a, "-d /step_%ld/prompts/%s/token_ids", STEPS[s], SPLITS[i]);
      assert_same_dump(a, ref, h5);
      snprintf(a, sizeof a, "-d /step_%ld/prompts/%s/text", STEPS[s], SPLITS[i]);
      assert_same_dump(a, ref, h5);
    }
  }
  for (int s = 0; s < N_STEPS; s++) {
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s.step_%ld.tmp", h5, STEPS[s]);
    if (rg_path_exists(tmp)) fail_msg("%s left behind", tmp);
  }
  free(ref_args), free(args);
  free(p1), free(manifest), free(ref), free(h5), free(err_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill_and_resume),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
