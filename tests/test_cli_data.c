/* test_cli_data: the CLI finds its default data files from any current
 * directory, by the rule of tools/cli_data.h: $REFGEO_DATA when set, else
 * data/ beside the executable, else data/ beside the executable's folder.
 * Old main read the shared data folder's harmbench/ and data/prompts/ relative to the
 * current directory, so every command below failed from another directory,
 * naming those files.
 *
 * Most runs give a model path that does not exist: asr, attack and capture
 * read their default data files (refusal list, classifier prompts, GCG
 * targets, prompt sets) before they load a model, so a one-line error that
 * names the missing model, and no data file, shows that every default was
 * found and parsed. One asr run on the real model then scores a completion
 * with the default refusal list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static char g_dir[1024];      /* REFGEO_TMP/cli_data-PID: this run's files */
static char g_missing[1200];  /* a model path that does not exist */
static char g_behaviors[1200];
static char g_data[1024];     /* the repository's data/, kept before tests unset REFGEO_DATA */

static void make_dir(const char *sub) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", g_dir, sub);
  if (rg_mkdir_p(path) < 0) fail_msg("%s", rg_error_get());
}

/* The three commands, each with defaults for every data file it reads. */
static const char *const COMMANDS[] = {"asr", "attack", "capture"};
enum { N_COMMANDS = 3 };

static void command_args(const char *cmd, char *args, size_t cap) {
  if (strcmp(cmd, "asr") == 0)
    snprintf(args, cap,
             "asr --model '%s' --behaviors '%s' --out '%s/asr' --classifier refusal-harmbench --classifier judge "
             "--judge '%s'",
             g_missing, g_behaviors, g_dir, g_missing);
  else if (strcmp(cmd, "attack") == 0)
    snprintf(args, cap, "attack --model '%s' --behaviors '%s' --out '%s/cases.json'", g_missing, g_behaviors, g_dir);
  else
    snprintf(args, cap, "capture --model '%s' --out '%s/acts.h5'", g_missing, g_dir);
}

/* Runs CMD and returns its one-line error (caller frees); fails unless the
 * exit status is 1. */
static char *run_failing(const char *cmd) {
  char args[8192], *err = NULL;
  command_args(cmd, args, sizeof args);
  int rc = t_run_cli(args, NULL, &err);
  if (rc != 1) fail_msg("refgeo %s: exit %d (expected 1): %s", cmd, rc, err);
  assert_int_equal(strchr(err, '\n') - err + 1, (long)strlen(err)); /* one line */
  return err;
}

/* Every default was found: the error is the missing model's. */
static void expect_defaults_found(const char *where) {
  for (int i = 0; i < N_COMMANDS; i++) {
    char *err = run_failing(COMMANDS[i]);
    if (!strstr(err, g_missing) || strstr(err, "harmbench/") || strstr(err, "prompts/"))
      fail_msg("%s: refgeo %s did not get past its default data: %s", where, COMMANDS[i], err);
    free(err);
  }
}

/* Every default was looked for under DATA_DIR and not found there. */
static void expect_defaults_missing_under(const char *data_dir) {
  static const char *const FIRST_READ[N_COMMANDS] = {"harmbench/refusal_substrings.json",
                                                     "harmbench/harmbench_targets_text.json",
                                                     "prompts/harmful_train.json"};
  for (int i = 0; i < N_COMMANDS; i++) {
    char want[1400];
    snprintf(want, sizeof want, "%s/%s", data_dir, FIRST_READ[i]);
    char *err = run_failing(COMMANDS[i]);
    if (!strstr(err, want)) fail_msg("refgeo %s: expected '%s' in: %s", COMMANDS[i], want, err);
    free(err);
  }
}

static int setup(void **state) {
  snprintf(g_dir, sizeof g_dir, "%s/cli_data-%ld", t_env("REFGEO_TMP"), (long)getpid());
  snprintf(g_missing, sizeof g_missing, "%s/no-such-model.gguf", g_dir);
  snprintf(g_data, sizeof g_data, "%s", t_env("REFGEO_DATA"));
  snprintf(g_behaviors, sizeof g_behaviors, "%s/harmbench/harmbench_behaviors_text_val.csv", g_data);
  make_dir("elsewhere");
  /* from a directory with no data/ and no shared data folder near it */
  char cwd[1200];
  snprintf(cwd, sizeof cwd, "%s/elsewhere", g_dir);
  assert_int_equal(chdir(cwd), 0);
  return 0;
}

/* Removes this run's files (the executable's copy is the large one). */
static int teardown(void **state) {
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* The tree's own build: data/ is beside the build folder (rule 3). */
static void test_found_from_another_directory(void **state) {
  assert_int_equal(unsetenv("REFGEO_DATA"), 0);
  expect_defaults_found("build in the source tree");
}

/* $REFGEO_DATA wins over the executable's location, even when wrong. */
static void test_env_overrides(void **state) {
  char nodata[1200];
  snprintf(nodata, sizeof nodata, "%s/nodata", g_dir);
  assert_int_equal(setenv("REFGEO_DATA", nodata, 1), 0);
  expect_defaults_missing_under(nodata);
  assert_int_equal(setenv("REFGEO_DATA", "", 1), 0); /* empty counts as unset */
  expect_defaults_found("REFGEO_DATA empty");
  assert_int_equal(unsetenv("REFGEO_DATA"), 0);
}

/* A copy of the executable in DIR/bin: without data/ near it, the error
 * names DIR/data (rule 3, the one used when nothing is found); with
 * DIR/bin/data it is found there (rule 2), before DIR/data (which holds an
 * empty harmbench/ here). */
static void test_executable_location(void **state) {
  assert_int_equal(unsetenv("REFGEO_DATA"), 0);
  char bin[1200], dir_data[1200], bin_data[1200];
  snprintf(bin, sizeof bin, "%s/bin/refgeo", g_dir);
  snprintf(dir_data, sizeof dir_data, "%s/data", g_dir);
  snprintf(bin_data, sizeof bin_data, "%s/bin/data", g_dir);
  make_dir("bin");
  if (rg_copy_file(t_env("REFGEO_BIN"), bin) < 0) fail_msg("%s", rg_error_get());
  assert_int_equal(chmod(bin, 0755), 0);
  char *real_bin = strdup(t_env("REFGEO_BIN"));
  assert_non_null(real_bin);
  assert_int_equal(setenv("REFGEO_BIN", bin, 1), 0);

  expect_defaults_missing_under(dir_data);

  make_dir("data/harmbench");
  static const char *const FILES[] = {
      "harmbench/refusal_substrings.json", "harmbench/classifier_prompts.json",
      "harmbench/harmbench_targets_text.json", "prompts/harmful_train.json",
      "prompts/harmless_train.json", "prompts/harmful_val.json",
      "prompts/harmless_val.json"};
  make_dir("bin/data/harmbench");
  make_dir("bin/data/prompts");
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
    char src[1400], dst[1400];
    snprintf(src, sizeof src, "%s/%s", g_data, FILES[i]);
    snprintf(dst, sizeof dst, "%s/%s", bin_data, FILES[i]);
    if (rg_copy_file(src, dst) < 0) fail_msg("%s", rg_error_get());
  }
  expect_defaults_found("data/ beside the executable");

  assert_int_equal(setenv("REFGEO_BIN", real_bin, 1), 0);
  free(real_bin);
}

/* The real thing: one completion scored with the default refusal list. */
static void test_asr_runs_from_another_directory(void **state) {
  assert_int_equal(unsetenv("REFGEO_DATA"), 0);
  char args[8192], *err = NULL;
  snprintf(args, sizeof args,
           "asr --model '%s' --behaviors '%s' --out '%s/asr-real' --limit 1 --max-new-tokens 1 --batch 1 "
           "--threads 2",
           t_env("REFGEO_MODEL"), g_behaviors, g_dir);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("refgeo asr: %s", err);
  free(err);
  char path[1200];
  snprintf(path, sizeof path, "%s/asr-real/asr.csv", g_dir);
  char *csv = rg_read_file(path, NULL);
  if (!csv) fail_msg("%s", rg_error_get());
  assert_non_null(strstr(csv, "\n0,DirectRequest,refusal-harmbench,1,"));
  free(csv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_found_from_another_directory),
      cmocka_unit_test(test_env_overrides),
      cmocka_unit_test(test_asr_runs_from_another_directory),
      cmocka_unit_test(test_executable_location), /* last: it points REFGEO_BIN at a copy */
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
