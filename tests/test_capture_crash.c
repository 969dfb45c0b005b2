/* test_capture_crash.c: `refgeo capture` killed with SIGKILL partway, then
 * resumed, gives the same file contents as an uninterrupted run.
 *
 * Series: base + a perturbed copy (steps 0, 100), one prompt per split (the
 * test also runs under ASan). The kills are deterministic: strace injects
 * SIGKILL on entry to the K-th pwrite64 (HDF5's sec2 driver writes with it)
 * or the K-th rename of the capture process, so the process dies inside the
 * creation of the file, inside a step and just before each publish, wherever
 * the machine's speed puts those moments in time. (A timing-based kill let
 * the old in-place writer pass here and fail on a faster CI machine.) Each
 * run resumes the file the previous one left. After every kill the file must
 * be absent or open with h5dump (hdf5-tools, independent of the writer) and
 * keep the steps reported complete so far. A last run finishes the series,
 * reporting the complete steps as skipped. Its activations must equal the
 * uninterrupted run's byte for byte (h5dump binary output), as must the
 * prompt texts and token ids (h5dump text), and no temp file may be left.
 *
 * A full disk: the capture runs under a file-size limit (ulimit -f, with
 * SIGXFSZ ignored, so a write past it fails with EFBIG as one past a full
 * disk fails with ENOSPC) that the new file fits in and step 0 does not.
 * It must exit 1 with one line naming the file, leave no temp file and a
 * valid file with no complete step, and a rerun without the limit must
 * complete the step. (HDF5 1.10 segfaulted at exit after such a failed
 * write: see rg_h5_init.)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"
#include "util/fileio.h"

static const char *const SPLITS[] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};
static const long STEPS[] = {0, 100};
enum { N_SPLITS = 4, N_STEPS = 2 };

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

/* Runs "strace ... $REFGEO_BIN ARGS" with SIGKILL injected at the WHEN-th
 * call of SYSCALL; requires that the capture died of it, and returns its
 * stderr. strace ends itself with its tracee's signal. */
/* Runs CMD with /bin/sh; returns its wait status. */
static int run_sh(const char *cmd) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static char *run_killed_at(const char *args, const char *syscall, int when, const char *err_path) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "exec strace -f -qq -o /dev/null -e trace=%s -e inject=%s:signal=KILL:when=%d %s %s 2>'%s' >/dev/null",
           syscall, syscall, when, t_env("REFGEO_BIN"), args, err_path);
  int status = run_sh(cmd);
  char *err = rg_read_file(err_path, NULL);
  assert_non_null(err);
  /* The process must really have been killed, not have finished: otherwise
   * this run tested nothing. */
  if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
    fail_msg("capture was not killed at %s #%d (status %d):\n%s", syscall, when, status, err);
  return err;
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

static void assert_no_temp_files(const char *h5) {
  for (int s = -1; s < N_STEPS; s++) {
    char tmp[8192];
    if (s < 0)
      snprintf(tmp, sizeof tmp, "%s.tmp", h5);
    else
      snprintf(tmp, sizeof tmp, "%s.step_%ld.h5.tmp", h5, STEPS[s]);
    if (rg_path_exists(tmp)) fail_msg("%s left behind", tmp);
  }
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

  /* The kill points, in order, on one file. The creation writes 4 pwrites
   * and a step ~150 (Release build, measured with strace), so pwrite64 #40
   * falls inside a step whether or not the file had to be created first.
   * Once the file exists, each step renames twice: its step file into
   * place, then the main file that links it. */
  static const struct {
    const char *syscall;
    int when;
    const char *where;
  } KILLS[] = {
      {"rename", 1, "before the new file is renamed into place"},
      {"pwrite64", 1, "at the new file's first write"},
      {"pwrite64", 3, "while the new file is written"},
      {"pwrite64", 40, "inside step 0"},
      {"rename", 1, "before step 0's file is renamed into place"},
      {"rename", 2, "before the main file links step 0"},
      {"rename", 4, "before the main file links step 100"},
      {"pwrite64", 40, "inside step 100"},
  };
  int n_complete = 0;
  for (size_t k = 0; k < sizeof KILLS / sizeof KILLS[0]; k++) {
    char *e = run_killed_at(args, KILLS[k].syscall, KILLS[k].when, err_path);
    if (strstr(e, "step 0: ")) n_complete = 1;
    free(e);
    print_message("killed at %s #%d (%s): %d step(s) complete\n", KILLS[k].syscall, KILLS[k].when, KILLS[k].where,
                  n_complete);
    check_valid(h5, n_complete);
  }
  assert_int_equal(n_complete, 1); /* the sequence got past step 0 */

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
  assert_no_temp_files(h5);
  free(ref_args), free(args);
  free(p1), free(manifest), free(ref), free(h5), free(err_path);
}

static void test_disk_full(void **state) {
  (void)state;
  char *manifest = dir_path("base.csv"), *h5 = dir_path("full.h5"), *err_path = dir_path("full-stderr.txt");
  char csv[4096];
  snprintf(csv, sizeof csv, "step,path\n0,%s\n", t_env("REFGEO_MODEL"));
  assert_int_equal(rg_write_file_atomic(manifest, csv, strlen(csv)), 0);
  unlink(h5);
  char *args = capture_args(manifest, h5);
  /* 64 blocks (32 KiB in dash's 512-byte units, 64 KiB in bash's) hold the
   * new file (6 KiB) but not step 0 (the activations of 4 prompts alone are
   * 4 x 30 layers x 5 positions x 576 floats, 1.4 MB before compression) */
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 64; exec %s %s 2>'%s' >/dev/null", t_env("REFGEO_BIN"), args,
           err_path);
  int status = run_sh(cmd);
  char *err = rg_read_file(err_path, NULL);
  assert_non_null(err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
    fail_msg("capture past the file-size limit: wait status %d, want exit 1:\n%s", status, err);
  char *nl = strchr(err, '\n');
  if (!nl || nl[1] != '\0' || !strstr(err, "full.h5")) fail_msg("want one line naming the file, got:\n%s", err);
  free(err);
  check_valid(h5, 0);
  assert_no_temp_files(h5);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("capture after the failed one: %s", err);
  free(err);
  check_valid(h5, 1);
  assert_no_temp_files(h5);
  free(args), free(manifest), free(h5), free(err_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill_and_resume),
      cmocka_unit_test(test_disk_full),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
