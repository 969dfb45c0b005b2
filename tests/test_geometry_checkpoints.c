/* test_geometry_checkpoints: the checkpoint series a geometry run walks
 * (model/checkpoints.h), from a Trainer-style run directory and from a
 * manifest CSV, and every validation error. The inputs are built in
 * $REFGEO_TMP; expected orders and messages follow from the documented
 * rules. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoints.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

/* Empties REFGEO_TMP/ckpt so that reruns start from nothing. */
static int clean_scratch(void **state) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s/ckpt", t_env("REFGEO_TMP"));
  if (rg_path_exists(buf)) nftw(buf, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

/* REFGEO_TMP/ckpt/NAME as a directory */
static char *scratch_dir(const char *name) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s/ckpt/%s", t_env("REFGEO_TMP"), name);
  assert_int_equal(rg_mkdir_p(buf), 0);
  char *p = strdup(buf);
  assert_non_null(p);
  return p;
}

static void write_text(const char *dir, const char *name, const char *text) {
  char *path = rg_path_join(dir, name);
  assert_non_null(path);
  assert_int_equal(rg_write_file_atomic(path, text, strlen(text)), 0);
  free(path);
}

/* DIR/NAME as an HF-looking directory (config.json only). */
static void make_model_dir(const char *dir, const char *name) {
  char *path = rg_path_join(dir, name);
  assert_non_null(path);
  assert_int_equal(rg_mkdir_p(path), 0);
  write_text(path, "config.json", "{}");
  free(path);
}

static void expect_steps(const rg_checkpoint_series *s, const long *steps, int n) {
  assert_non_null(s);
  assert_int_equal(s->n, n);
  for (int i = 0; i < n; i++) assert_int_equal(s->items[i].step, steps[i]);
}

static void expect_error(rg_checkpoint_series *s, const char *a, const char *b) {
  if (s) fail_msg("expected an error mentioning '%s'", b);
  const char *err = rg_error_get();
  if (!strstr(err, a) || !strstr(err, b)) fail_msg("unexpected error '%s' (wanted '%s' ... '%s')", err, a, b);
}

static void test_run_dir(void **state) {
  char *run = scratch_dir("run");
  char *base = scratch_dir("base");
  write_text(base, "config.json", "{}");
  make_model_dir(run, "checkpoint-500");
  make_model_dir(run, "checkpoint-50");
  make_model_dir(run, "checkpoint-100");
  make_model_dir(run, "checkpoint-250");
  write_text(run, "trainer_state.json", "{}"); /* ignored */
  make_model_dir(run, "runs");                 /* ignored */

  rg_checkpoint_series *s = rg_checkpoints_open(run, base);
  const long want[] = {0, 50, 100, 250, 500}; /* numeric, not lexical, order */
  expect_steps(s, want, 5);
  assert_string_equal(s->items[0].path, base);
  assert_non_null(strstr(s->items[1].path, "/checkpoint-50"));
  rg_checkpoints_free(s);

  expect_error(rg_checkpoints_open(run, NULL), run, "no step 0");

  make_model_dir(run, "checkpoint-0");
  s = rg_checkpoints_open(run, NULL);
  expect_steps(s, want, 5);
  rg_checkpoints_free(s);
  expect_error(rg_checkpoints_open(run, base), "step 0 given twice", "checkpoint-0");

  make_model_dir(run, "checkpoint-050");
  expect_error(rg_checkpoints_open(run, NULL), "step 50 given twice", "checkpoint-050");
  free(run);

  run = scratch_dir("run-bad");
  make_model_dir(run, "checkpoint-final");
  expect_error(rg_checkpoints_open(run, base), "checkpoint-final", "not a non-negative integer");
  free(run);

  run = scratch_dir("run-partial");
  char *partial = scratch_dir("run-partial/checkpoint-10");
  expect_error(rg_checkpoints_open(run, base), "checkpoint-10", "no config.json");
  free(partial);
  free(run);

  run = scratch_dir("run-empty");
  expect_error(rg_checkpoints_open(run, NULL), run, "no checkpoints");
  expect_error(rg_checkpoints_open(run, "/nonexistent/base"), "/nonexistent/base", "does not exist");
  free(run);
  free(base);
}

static void test_manifest(void **state) {
  char *dir = scratch_dir("manifest");
  make_model_dir(dir, "hf0");
  make_model_dir(dir, "hf20");
  write_text(dir, "step10.gguf", "GGUF");
  write_text(dir, "good.csv", "step,path\n20,hf20\n0,hf0\n10,step10.gguf\n");
  char *manifest = rg_path_join(dir, "good.csv");
  rg_checkpoint_series *s = rg_checkpoints_open(manifest, NULL);
  const long want[] = {0, 10, 20};
  expect_steps(s, want, 3);
  char *gguf = rg_path_join(dir, "step10.gguf");
  assert_string_equal(s->items[1].path, gguf); /* relative to the manifest's directory */
  rg_checkpoints_free(s);
  free(gguf);
  free(manifest);

  struct {
    const char *name, *text, *msg;
  } bad[] = {
      {"dup.csv", "step,path\n0,hf0\n10,step10.gguf\n10,hf20\n", "step 10 given twice (line 3 and line 4)"},
      {"missing.csv", "step,path\n0,hf0\n5,nothere\n", "line 3: "},
      {"nonint.csv", "step,path\n0,hf0\n1.5,hf20\n", "line 3: step '1.5' is not a non-negative integer"},
      {"negative.csv", "step,path\n-1,hf0\n", "line 2: step '-1'"},
      {"nocol.csv", "step,checkpoint\n0,hf0\n", "missing column path"},
      {"emptypath.csv", "step,path\n0,\n", "line 2: empty path"},
      {"nostep0.csv", "step,path\n10,step10.gguf\n", "no step 0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_text(dir, bad[i].name, bad[i].text);
    char *path = rg_path_join(dir, bad[i].name);
    expect_error(rg_checkpoints_open(path, NULL), path, bad[i].msg);
    free(path);
  }
  expect_error(rg_checkpoints_open("/nonexistent/manifest.csv", NULL), "/nonexistent/manifest.csv", "no such");
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_dir),
      cmocka_unit_test(test_manifest),
  };
  return cmocka_run_group_tests(tests, clean_scratch, clean_scratch);
}
