/* test_run: `refgeo run CONFIG.ini` chains train -> capture -> geometry ->
 * asr -> report in one run directory, resumes after a kill, and skips what
 * is up to date.
 *
 * The job is small enough for the sanitizer build: the tiny Qwen2 model of
 * test_train (2 layers, d 64), 2 R2D2 updates with checkpoints 0 1 2,
 * capture of 6 + 4 prompts per class, geometry on 4 val prompts, DirectRequest
 * ASR of 3 behaviors with 4 new tokens.
 *
 * 1. Resume. Run A goes through uninterrupted. Run B is killed by SIGKILL
 *    (util/fault.h) inside capture, after checkpoint 0 and 1 are captured;
 *    the same command again finishes it. Every CSV of B equals A's: the
 *    analysis tables byte for byte (after the run directory's own name,
 *    which the tables quote, is swapped), train_log.csv but for its two
 *    timing columns. A third run of B does no work and says so, leaving
 *    every file as it was.
 * 2. Progress: bars with rate and ETA under a pseudo-terminal, one line per
 *    checkpoint when stderr is piped.
 * 3. --dry-run lists the stages and writes nothing; "{out}" in a value
 *    becomes the run directory; data/demo.ini and data/demo-qwen.ini plan
 *    (every stage's command accepts its flags).
 * 4. Bad input: an unknown stage, a key in the wrong section, a [run] key
 *    that does not exist, a section refgeo does not know, a [verdict] key or
 *    value the plan refuses, in the file or as a --set override: one line naming the config file or the override
 *    (and the section or key), exit 1, nothing written.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static char *g_model;

static const char TRAIN_INI[] = "[model]\nmodel = %s\nthreads = 2\ncheckpoint_dtype = f32\n"
                                "[optim]\nlr = 1e-3\nupdates = 2\ngrad_accum = 1\nsave_steps = 0 1 2\n"
                                "[pool]\npool_size = 2\ncases_per_step = 1\ngcg_steps = 1\nsearch_width = 8\n"
                                "top_k = 4\ngcg_batch = 8\n"
                                "[data]\nutility_prompts = 4\nutility_max_new_tokens = 4\nutility_per_step = 1\n"
                                "utility_labels = assistant\nmax_case_tokens = 400\nmax_utility_tokens = 128\n";

/* %s: the run dir, then lines added to [run], then to [capture]. */
static const char RUN_INI[] = "[run]\nout = %s\ntrain_config = train.ini\nthreads = 2\n%s"
                              "[capture]\nn_train = 6\nn_val = 4\n%s"
                              "[geometry]\nmax_val = 4\nn_min = 2\n"
                              "[asr]\nbehaviors = %s\nlimit = 3\nmax_new_tokens = 4\n";

static char *g_dir; /* REFGEO_TMP/run-PID: the configs and run dirs */

static char *path_in(const char *rel) { return rg_path_join(g_dir, rel); }

/* Writes run config NAME for run dir OUT (relative to g_dir) and returns its path. */
static char *write_run_config(const char *name, const char *out, const char *run_extra, const char *capture_extra) {
  char *run_dir = path_in(out), *behaviors = t_data_path("harmbench/harmbench_behaviors_text_val.csv");
  char text[4096];
  snprintf(text, sizeof text, RUN_INI, run_dir, run_extra, capture_extra, behaviors);
  char *path = path_in(name);
  assert_int_equal(rg_write_file_atomic(path, text, strlen(text)), 0);
  free(run_dir);
  free(behaviors);
  return path;
}

static int setup(void **state) {
  g_model = t_hf_tiny("qwen2_bf16");
  char name[64];
  snprintf(name, sizeof name, "run-%ld", (long)getpid());
  g_dir = t_tmp_path(name);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
  if (system(cmd) != 0) return -1;
  char text[4096];
  snprintf(text, sizeof text, TRAIN_INI, g_model);
  char *train = path_in("train.ini");
  int rc = rg_write_file_atomic(train, text, strlen(text));
  free(train);
  return rc;
}

static int teardown(void **state) {
  free(g_model);
  free(g_dir);
  return 0;
}

static int run(const char *config, const char *kill_at, char **err) {
  char args[2048];
  snprintf(args, sizeof args, "run '%s'", config);
  if (kill_at) setenv("REFGEO_KILL_AT", kill_at, 1); /* the stages inherit it */
  int rc = t_run_cli(args, NULL, err);
  unsetenv("REFGEO_KILL_AT");
  return rc;
}

static char *read_in(const char *rel) {
  char *p = path_in(rel), *text = rg_read_file(p, NULL);
  if (!text) fail_msg("%s", rg_error_get());
  free(p);
  return text;
}

/* TEXT with every FROM replaced by TO (malloc'd). */
static char *replace_all(const char *text, const char *from, const char *to) {
  size_t n = 0, lf = strlen(from), lt = strlen(to);
  for (const char *p = strstr(text, from); p; p = strstr(p + lf, from)) n++;
  char *out = malloc(strlen(text) + n * (lt > lf ? lt - lf : 0) + 1), *q = out;
  assert_non_null(out);
  for (const char *p = text, *hit; ; p = hit + lf) {
    hit = strstr(p, from);
    size_t keep = hit ? (size_t)(hit - p) : strlen(p);
    memcpy(q, p, keep), q += keep;
    if (!hit) break;
    memcpy(q, to, lt), q += lt;
  }
  *q = '\0';
  return out;
}

/* train_log.csv without its last two columns (tokens_per_s, seconds). */
static char *without_timing(char *csv) {
  for (char *line = csv; line && *line;) {
    char *end = strchr(line, '\n');
    char *cut = line;
    for (int commas = 0; cut < (end ? end : line + strlen(line)); cut++)
      if (*cut == ',' && ++commas == 9) break;
    if (end) memmove(cut, end, strlen(end) + 1), line = cut + 1;
    else *cut = '\0', line = NULL;
  }
  return csv;
}

static double mtime_of(const char *rel) {
  char *p = path_in(rel);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  free(p);
  return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

static void test_resume_after_kill_and_nothing_to_redo(void **state) {
  char *a = write_run_config("a.ini", "a", "", ""), *b = write_run_config("b.ini", "b", "", ""), *err = NULL;
  if (run(a, NULL, &err) != 0) fail_msg("run a: %s", err);
  free(err);
  /* killed in capture: checkpoint 0 and 1 are in acts.h5, 2 is not */
  int rc = run(b, "capture-step:2", &err);
  if (rc == 0 || !strstr(err, "stage capture failed")) fail_msg("run b was not killed in capture: %s", err);
  free(err);
  char *done = path_in("b/stages/capture.done");
  assert_false(rg_path_exists(done));
  free(done);
  if (run(b, NULL, &err) != 0) fail_msg("run b, continued: %s", err);
  assert_non_null(strstr(err, "capture: running"));
  assert_non_null(strstr(err, "train: up to date, skipped"));
  free(err);

  static const char *const tables[] = {"geometry/geometry.csv", "geometry/carriers.csv", "geometry/migration.csv",
                                       "asr/asr.csv"};
  char *dir_a = path_in("a/"), *dir_b = path_in("b/");
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char rel_a[128], rel_b[128];
    snprintf(rel_a, sizeof rel_a, "a/%s", tables[i]);
    snprintf(rel_b, sizeof rel_b, "b/%s", tables[i]);
    char *ta = read_in(rel_a), *tb_raw = read_in(rel_b), *tb = replace_all(tb_raw, dir_b, dir_a);
    if (strcmp(ta, tb) != 0) fail_msg("%s differs after the kill and resume", tables[i]);
    free(ta), free(tb_raw), free(tb);
  }
  char *la = without_timing(read_in("a/train_log.csv")), *lb = without_timing(read_in("b/train_log.csv"));
  assert_string_equal(la, lb);
  free(la), free(lb), free(dir_a), free(dir_b);

  /* A third run: nothing to do, nothing touched. */
  static const char *const outputs[] = {"b/stages/train.done", "b/stages/capture.done", "b/stages/report.done",
                                        "b/acts.h5", "b/report.html"};
  double before[5];
  for (int i = 0; i < 5; i++) before[i] = mtime_of(outputs[i]);
  if (run(b, NULL, &err) != 0) fail_msg("run b, third: %s", err);
  assert_non_null(strstr(err, "nothing to do"));
  assert_null(strstr(err, ": running"));
  free(err);
  for (int i = 0; i < 5; i++)
    if (mtime_of(outputs[i]) != before[i]) fail_msg("%s was written again", outputs[i]);
  free(a), free(b);
}

/* The bars go to a terminal only: `refgeo capture` of run A's checkpoints
 * under a pseudo-terminal (util-linux `script`) draws them, with rate and
 * ETA; with stderr piped it prints one line per checkpoint and no bar. */
/* A stage's output that changed after the stage wrote it (a flipped byte of
 * acts.h5, which geometry would read) stops the next run with one line
 * naming it, where before it was taken as up to date. */
static void test_damaged_stage_output_refused(void **state) {
  (void)state;
  char *c = write_run_config("damaged.ini", "damaged", "", ""), *err = NULL;
  if (run(c, NULL, &err) != 0) fail_msg("%s", err);
  free(err);
  char *acts = path_in("damaged/acts.h5");
  FILE *fp = fopen(acts, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 4000, SEEK_SET), 0);
  const int byte = fgetc(fp);
  assert_int_equal(fseek(fp, 4000, SEEK_SET), 0);
  fputc(byte ^ 0x10, fp);
  fclose(fp);
  const int rc = run(c, NULL, &err);
  /* progress lines of the stages before it, then the error */
  const char *line = err ? strstr(err, "refgeo run: ") : NULL, *nl = line ? strchr(line, '\n') : NULL;
  if (rc != 1 || !line || !strstr(line, "acts.h5: sha256") || (nl && nl[1]))
    fail_msg("expected an error line naming acts.h5, got %d: %s", rc, err ? err : "");
  free(err), free(acts), free(c);
}

/* A stage child killed while `refgeo run` checks its flags (before it can
 * print anything) still gets a reason: how it ended, not an empty line. */
static void test_stage_killed_at_flag_check(void **state) {
  (void)state;
  char *c = write_run_config("flagkill.ini", "flagkill", "", ""), *err = NULL;
  const int rc = run(c, "check-flags:1", &err);
  const char *nl = err ? strchr(err, '\n') : NULL;
  if (rc != 1 || !strstr(err, "killed by signal 9 (Killed) while checking its flags") || (nl && nl[1]))
    fail_msg("expected one line naming the killed stage, got %d: %s", rc, err ? err : "");
  free(err), free(c);
}

/* The state of process PID from /proc ('Z' a zombie), or 0 when it is gone. */
static char proc_state(long pid) {
  char path[64], text[512] = "";
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  const size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  const char *paren = strrchr(text, ')');
  return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* One writer per run directory, also across `refgeo run` and its stages:
 * a run whose train stage is stopped (REFGEO_STOP_AT) holds the lock, and
 * a second run is refused naming both pids; killing only the first `run`
 * takes its stage with it (no writer left behind), and then a rerun
 * finishes the job. */
static void test_killing_run_leaves_no_writer(void **state) {
  (void)state;
  char *c = write_run_config("lock.ini", "lock", "", ""), *lock = path_in("lock/.lock"), cmd[2048];
  snprintf(cmd, sizeof cmd, "REFGEO_STOP_AT=update:1 '%s' run '%s' >/dev/null 2>&1 & echo $!", t_env("REFGEO_BIN"), c);
  FILE *fp = popen(cmd, "r");
  assert_non_null(fp);
  long run_pid = 0, stage_pid = 0;
  assert_int_equal(fscanf(fp, "%ld", &run_pid), 1);
  pclose(fp);
  /* the stage is running once the lock file names it, stopped once /proc says T */
  for (int tries = 0; tries < 1200 && !(stage_pid && proc_state(stage_pid) == 'T'); tries++) {
    char *text = rg_read_file(lock, NULL);
    const char *at = text ? strstr(text, "its stage train is pid ") : NULL;
    if (at) stage_pid = strtol(at + 23, NULL, 10);
    free(text);
    rg_error_clear();
    usleep(100 * 1000);
  }
  if (!stage_pid || proc_state(stage_pid) != 'T') fail_msg("the train stage of run %ld did not stop at update 1", run_pid);
  char *err = NULL, want[160];
  snprintf(want, sizeof want, "in use by another refgeo (pid %ld (refgeo run; its stage train is pid %ld)", run_pid,
           stage_pid);
  int rc = run(c, NULL, &err);
  const char *nl = err ? strchr(err, '\n') : NULL;
  if (rc != 1 || !strstr(err, want) || (nl && nl[1])) fail_msg("second run: expected \"%s\", got %d: %s", want, rc, err);
  free(err);
  assert_int_equal(kill((pid_t)run_pid, SIGKILL), 0);
  char st = 'T';
  for (int tries = 0; tries < 100 && (st = proc_state(stage_pid)) != 0 && st != 'Z'; tries++) usleep(100 * 1000);
  if (st != 0 && st != 'Z') fail_msg("the train stage (pid %ld) outlived its killed run (state %c)", stage_pid, st);
  if (run(c, NULL, &err) != 0) fail_msg("rerun after the kill: %s", err);
  free(err), free(lock), free(c);
}

static void test_progress_bars_on_a_terminal_only(void **state) {
  char *run_a = path_in("a"), *h5_tty = path_in("tty.h5"), *h5_pipe = path_in("pipe.h5"), cmd[4096];
  snprintf(cmd, sizeof cmd, "script -qfec \"'%s' capture --run-dir '%s' --out '%s' --n-train 6 --n-val 4\" /dev/null",
           t_env("REFGEO_BIN"), run_a, h5_tty);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, p);
  text[n] = '\0';
  assert_int_equal(pclose(p), 0);
  if (!strstr(text, "step 2: capture [") || !strstr(text, "ETA ")) fail_msg("no bar on a terminal: %s", text);
  char args[2048], *err = NULL;
  snprintf(args, sizeof args, "capture --run-dir '%s' --out '%s' --n-train 6 --n-val 4", run_a, h5_pipe);
  assert_int_equal(t_run_cli(args, NULL, &err), 0);
  assert_null(strchr(err, '\r'));
  assert_null(strstr(err, "ETA"));
  assert_non_null(strstr(err, "step 2: capture: 20 done in ")); /* 6 + 6 train, 4 + 4 val prompts */
  free(err);
  /* --quiet on a terminal: no bar, no progress line */
  char *h5_quiet = path_in("quiet.h5");
  snprintf(cmd, sizeof cmd,
           "script -qfec \"'%s' capture --quiet --run-dir '%s' --out '%s' --n-train 6 --n-val 4\" /dev/null",
           t_env("REFGEO_BIN"), run_a, h5_quiet);
  p = popen(cmd, "r");
  assert_non_null(p);
  n = fread(text, 1, sizeof text - 1, p);
  text[n] = '\0';
  assert_int_equal(pclose(p), 0);
  if (strstr(text, "capture [") || strstr(text, "done in")) fail_msg("--quiet still shows progress: %s", text);
  free(run_a), free(h5_tty), free(h5_pipe), free(h5_quiet);
}

static void test_dry_run_writes_nothing(void **state) {
  char *c = write_run_config("dry.ini", "dry", "", ""), args[1024], *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "run '%s' --dry-run", c);
  assert_int_equal(t_run_cli(args, &out, &err), 0);
  static const char *const stages[] = {"train ", "capture ", "geometry ", "asr ", "report "};
  for (int i = 0; i < 5; i++)
    if (!strstr(out, stages[i])) fail_msg("--dry-run does not list %s: %s", stages[i], out);
  assert_non_null(strstr(out, "to run (never run"));
  char *dir = path_in("dry");
  assert_false(rg_path_exists(dir));
  free(out), free(err);
  /* "{out}" in a stage's value is the run directory */
  snprintf(args, sizeof args, "run '%s' --dry-run --set 'asr.ablate={out}/geometry/directions.h5:step=0'", c);
  assert_int_equal(t_run_cli(args, &out, &err), 0);
  char want[1024];
  snprintf(want, sizeof want, "--ablate %s/geometry/directions.h5:step=0", dir);
  if (!strstr(out, want)) fail_msg("--dry-run does not show '%s': %s", want, out);
  assert_false(rg_path_exists(dir));
  free(out), free(err);
  /* the shipped demos plan, every stage's flags accepted by its command */
  static const char *const DEMOS[] = {"demo.ini", "demo-qwen.ini"};
  for (int i = 0; i < 2; i++) {
    char *ini = t_data_path(DEMOS[i]);
    snprintf(args, sizeof args, "run '%s' --dry-run --set 'run.out=%s'", ini, dir);
    if (t_run_cli(args, &out, &err) != 0) fail_msg("%s: %s", DEMOS[i], err);
    assert_non_null(strstr(out, "report "));
    /* the demos name their model as ~/.cache/...: the stage gets $HOME's path */
    if (strstr(out, "~/")) fail_msg("%s: a path is passed with its ~: %s", DEMOS[i], out);
    assert_false(rg_path_exists(dir));
    free(out), free(err), free(ini);
  }
  free(dir), free(c);
}

/* One line on stderr naming WHAT, exit 1, and no run dir. */
static void expect_error(const char *name, const char *run_extra, const char *capture_extra, const char *what) {
  char out[64];
  snprintf(out, sizeof out, "bad-%s", name);
  char *c = write_run_config(name, out, run_extra, capture_extra), *err = NULL;
  assert_int_equal(run(c, NULL, &err), 1);
  if (!strstr(err, what)) fail_msg("error '%s' does not say '%s'", err, what);
  if (strchr(err, '\n') != err + strlen(err) - 1) fail_msg("not one line: '%s'", err);
  char *dir = path_in(out);
  if (rg_path_exists(dir)) fail_msg("%s was created", dir);
  free(dir), free(err), free(c);
}

static void test_bad_configs(void **state) {
  expect_error("stage.ini", "stages = train capture plot\n", "", "stage.ini: [run] stages: unknown stage 'plot'");
  expect_error("section.ini", "", "max_new_tokens = 4\n", "section.ini [capture]: unknown flag '--max-new-tokens'");
  expect_error("runkey.ini", "epochs = 3\n", "", "runkey.ini:5: [run] has no key 'epochs'");
  expect_error("unknown.ini", "", "[plots]\nwidth = 3\n", "unknown.ini:9: unknown section [plots]");
  /* the analysis plan is checked before the first stage, not when geometry starts */
  expect_error("mode.ini", "", "[verdict]\nrefusal_score = sequnce\n",
               "mode.ini:9 [verdict] refusal_score: unknown refusal score 'sequnce' (tokens or sequence)");
  expect_error("tau.ini", "", "[verdict]\nkl_max = 0\n", "tau.ini:9 [verdict] kl_max: the KL budget must be > 0");
  expect_error("vkey.ini", "", "[verdict]\nkl_budget = 0.1\n", "vkey.ini:9 [verdict] kl_budget: unknown key");
  expect_error("bands.ini", "", "[verdict]\nearly = 0.9\nlate = 0.1\n",
               "bands.ini [verdict]: plan: early (0.9) must not be above late (0.1)");
  /* --set overrides: the same rules, named by the flag */
  char *c = write_run_config("set.ini", "bad-set", "", ""), args[1024], *err = NULL;
  snprintf(args, sizeof args, "run '%s' --set plots.width=3", c);
  assert_int_equal(t_run_cli(args, NULL, &err), 1);
  assert_non_null(strstr(err, "--set plots.width=3: unknown section [plots]"));
  free(err);
  snprintf(args, sizeof args, "run '%s' --set capture.max_new_tokens=4", c);
  assert_int_equal(t_run_cli(args, NULL, &err), 1);
  assert_non_null(strstr(err, "[capture]: unknown flag '--max-new-tokens'"));
  free(err);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume_after_kill_and_nothing_to_redo),
      cmocka_unit_test(test_stage_killed_at_flag_check),
      cmocka_unit_test(test_damaged_stage_output_refused),
      cmocka_unit_test(test_killing_run_leaves_no_writer),
      cmocka_unit_test(test_progress_bars_on_a_terminal_only),
      cmocka_unit_test(test_dry_run_writes_nothing),
      cmocka_unit_test(test_bad_configs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
