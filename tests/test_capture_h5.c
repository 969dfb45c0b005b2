/* test_capture_h5: the HDF5 activation file (capture/acts_h5.h), read back
 * with the plain HDF5 C API: layout, attributes, float32 and float16 values
 * (the float16 inputs are exactly representable in binary16, so they must
 * come back exactly), resuming after an unfinished step, the step files
 * behind the main file's external links, and the bytes a 20-step series
 * writes (about once each, where the old one-file writer copied the file per
 * step). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/acts_h5.h"
#include "capture/acts_h5_read.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

enum { L = 2, P = 3, D = 4, N = 2 };

static rg_acts_meta meta(bool float16) {
  static const int32_t eoi[] = {1, 2, 3};
  return (rg_acts_meta){.model_id = "tiny", .model_revision = "r1", .model_dtype = "bf16", .chat_template = "{{x}}",
                        .n_layers = L, .d_model = D, .eoi_token_ids = eoi, .n_eoi = 3, .float16 = float16};
}

/* acts of prompt i: value = i*100 + l*10 + p + d/4 (all exact in float16) */
static void prompt_acts(int i, float *a) {
  for (int l = 0; l < L; l++)
    for (int p = 0; p < P; p++)
      for (int d = 0; d < D; d++) a[(l * P + p) * D + d] = (float)(i * 100 + l * 10 + p) + (float)d / 4;
}

static void write_step(rg_acts_file *f, long step, bool finish) {
  assert_int_equal(rg_acts_begin_step(f, step, "run/checkpoint-x"), 0);
  const char *texts[N] = {"hello, world", "second"};
  const char *cats[N] = {"cyber", NULL};
  const int32_t t0[] = {5, 6, 7}, t1[] = {8};
  const int32_t *ids[N] = {t0, t1};
  const int lens[N] = {3, 1};
  assert_int_equal(rg_acts_write_prompts(f, "harmful_train", N, texts, cats, ids, lens), 0);
  assert_int_equal(rg_acts_begin_site(f, "harmful_train", RG_HOOK_RESID_PRE, N, P), 0);
  float a[L * P * D];
  for (int i = 0; i < N; i++) {
    prompt_acts(i, a);
    assert_int_equal(rg_acts_write_prompt(f, RG_HOOK_RESID_PRE, i, a), 0);
  }
  assert_int_equal(rg_acts_end_site(f, RG_HOOK_RESID_PRE), 0);
  if (finish && rg_acts_end_step(f) != 0) fail_msg("%s", rg_error_get());
}

static char *read_str_attr(hid_t loc, const char *name) {
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  assert_true(a >= 0);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char *s = NULL;
  assert_true(H5Aread(a, t, &s) >= 0);
  char *copy = strdup(s);
  H5free_memory(s);
  H5Tclose(t);
  H5Aclose(a);
  return copy;
}

static void check_file(const char *path, long step, bool float16) {
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  assert_true(file >= 0);
  char *s = read_str_attr(file, "format");
  assert_string_equal(s, "steer-acts/1");
  free(s);
  char group[64];
  snprintf(group, sizeof group, "step_%ld/acts/harmful_train/resid_pre", step);
  hid_t d = H5Dopen2(file, group, H5P_DEFAULT);
  assert_true(d >= 0);
  hid_t space = H5Dget_space(d);
  hsize_t dims[4];
  assert_int_equal(H5Sget_simple_extent_ndims(space), 4);
  H5Sget_simple_extent_dims(space, dims, NULL);
  assert_true(dims[0] == L && dims[1] == N && dims[2] == P && dims[3] == D);
  hid_t ftype = H5Dget_type(d);
  assert_int_equal((int)H5Tget_size(ftype), float16 ? 2 : 4);
  H5Tclose(ftype);
  float got[L * N * P * D], want[L * P * D];
  assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
  for (int i = 0; i < N; i++) {
    prompt_acts(i, want);
    for (int l = 0; l < L; l++)
      for (int k = 0; k < P * D; k++) assert_true(got[((l * N + i) * P) * D + k] == want[l * P * D + k]);
  }
  /* hook names and positions are attributes */
  hid_t a = H5Aopen(d, "hook_names", H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char *names[L];
  assert_true(H5Aread(a, t, names) >= 0);
  assert_string_equal(names[1], "blocks.1.hook_resid_pre");
  for (int l = 0; l < L; l++) H5free_memory(names[l]);
  H5Tclose(t);
  H5Aclose(a);
  int32_t pos[P];
  a = H5Aopen(d, "positions", H5P_DEFAULT);
  assert_true(H5Aread(a, H5T_NATIVE_INT32, pos) >= 0);
  H5Aclose(a);
  assert_true(pos[0] == -3 && pos[2] == -1);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(file);
}

static char *fresh_path(const char *name) {
  char *path = t_tmp_path(name);
  unlink(path);
  return path;
}

static void test_write_and_read(void **state) {
  for (int half = 0; half < 2; half++) {
    char *path = fresh_path(half ? "acts16.h5" : "acts32.h5");
    rg_acts_meta m = meta(half);
    rg_acts_file *f = rg_acts_open(path, &m);
    if (!f) fail_msg("%s", rg_error_get());
    write_step(f, 0, true);
    assert_int_equal(rg_acts_has_step(f, 0), 1);
    rg_acts_close(f);
    check_file(path, 0, half);
    char name[512];
    snprintf(name, sizeof name, "%s.step_0.h5.tmp", path);
    assert_false(rg_path_exists(name)); /* the step's temp file is gone */
    snprintf(name, sizeof name, "%s.tmp", path);
    assert_false(rg_path_exists(name));
    /* /step_0 is an external link to the step file beside PATH, named
     * relative to PATH's directory so that the two can move together */
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5L_info_t li;
    assert_true(H5Lget_info(file, "step_0", &li, H5P_DEFAULT) >= 0);
    assert_int_equal(li.type, H5L_TYPE_EXTERNAL);
    char val[512];
    const char *target = NULL, *obj = NULL;
    assert_true(li.u.val_size <= sizeof val && H5Lget_val(file, "step_0", val, sizeof val, H5P_DEFAULT) >= 0);
    assert_true(H5Lunpack_elink_val(val, li.u.val_size, NULL, &target, &obj) >= 0);
    assert_string_equal(target, half ? "acts16.h5.step_0.h5" : "acts32.h5.step_0.h5");
    assert_string_equal(obj, "step_0");
    H5Fclose(file);
    free(path);
  }
}

static void test_resume(void **state) {
  char *path = fresh_path("acts-resume.h5");
  rg_acts_meta m = meta(false);
  rg_acts_file *f = rg_acts_open(path, &m);
  assert_non_null(f);
  write_step(f, 0, true);
  write_step(f, 50, false); /* killed before end_step */
  rg_acts_close(f);

  f = rg_acts_open(path, &m);
  if (!f) fail_msg("%s", rg_error_get());
  assert_int_equal(rg_acts_has_step(f, 0), 1);
  assert_int_equal(rg_acts_has_step(f, 50), 0);
  assert_int_equal(rg_acts_begin_step(f, 0, "x"), -1); /* complete steps are not rewritten */
  assert_non_null(strstr(rg_error_get(), "already complete"));
  write_step(f, 50, true);
  assert_int_equal(rg_acts_has_step(f, 50), 1);
  /* a short site is an error */
  assert_int_equal(rg_acts_begin_step(f, 100, "y"), 0);
  assert_int_equal(rg_acts_begin_site(f, "harmless_train", RG_HOOK_MLP_OUT, 2, P), 0);
  assert_int_equal(rg_acts_end_site(f, RG_HOOK_MLP_OUT), -1);
  assert_non_null(strstr(rg_error_get(), "0 of 2 prompts"));
  rg_acts_close(f);
  check_file(path, 50, false);

  rg_acts_meta other = meta(false);
  other.d_model = 8;
  assert_null(rg_acts_open(path, &other));
  assert_non_null(strstr(rg_error_get(), "d_model"));
  free(path);

  char *junk = t_write_tmp("acts-junk.h5", "not hdf5", 8);
  assert_null(rg_acts_open(junk, &m));
  assert_non_null(strstr(rg_error_get(), junk));
  free(junk);
}

/* This process's bytes passed to write(2) and pwrite(2) so far: the "wchar"
 * line of /proc/self/io (proc(5)). */
static long long bytes_written(void) {
  FILE *f = fopen("/proc/self/io", "r");
  assert_non_null(f);
  char key[64];
  long long v, w = -1;
  while (fscanf(f, "%63s %lld", key, &v) == 2)
    if (strcmp(key, "wchar:") == 0) w = v;
  fclose(f);
  assert_true(w >= 0);
  return w;
}

static long long file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (long long)st.st_size;
}

/* A 20-step series writes each activation byte about once: the bytes the
 * process writes stay within 1.25x of what the files finally hold (HDF5's
 * metadata and the per-step rewrite of the small main file are the rest).
 * The old writer copied the whole file for every step, which wrote 39.1 MB
 * here for 3.7 MB of files (10.5x). The activations are pseudo-random so
 * that deflate cannot shrink them to nothing. */
static void test_series_bytes_linear(void **state) {
  enum { SL = 4, SP = 5, SD = 64, SN = 32, STEPS = 20 };
  char *path = fresh_path("acts-series.h5");
  static const int32_t eoi[] = {1, 2};
  rg_acts_meta m = {.model_id = "t", .n_layers = SL, .d_model = SD, .eoi_token_ids = eoi, .n_eoi = 2};
  const char *texts[SN];
  const int32_t *ids[SN];
  int lens[SN];
  static const int32_t tok[] = {5, 6, 7, 8, 9};
  for (int i = 0; i < SN; i++) texts[i] = "prompt", ids[i] = tok, lens[i] = 5;
  float *a = malloc(sizeof(float) * SL * SP * SD);
  assert_non_null(a);
  uint32_t x = 1;
  long long before = bytes_written();
  rg_acts_file *f = rg_acts_open(path, &m);
  assert_non_null(f);
  for (int st = 0; st < STEPS; st++) {
    assert_int_equal(rg_acts_begin_step(f, st * 10L, "ck"), 0);
    assert_int_equal(rg_acts_write_prompts(f, "harmful_train", SN, texts, NULL, ids, lens), 0);
    assert_int_equal(rg_acts_begin_site(f, "harmful_train", RG_HOOK_RESID_PRE, SN, SP), 0);
    for (int i = 0; i < SN; i++) {
      for (int k = 0; k < SL * SP * SD; k++) {
        x = x * 1103515245u + 12345u; /* an LCG: any incompressible stream will do */
        a[k] = (float)(x >> 8) / 16777216.0f;
      }
      assert_int_equal(rg_acts_write_prompt(f, RG_HOOK_RESID_PRE, i, a), 0);
    }
    assert_int_equal(rg_acts_end_site(f, RG_HOOK_RESID_PRE), 0);
    if (rg_acts_end_step(f) != 0) fail_msg("%s", rg_error_get());
  }
  rg_acts_close(f);
  long long written = bytes_written() - before, held = file_size(path);
  for (int st = 0; st < STEPS; st++) {
    char name[512];
    snprintf(name, sizeof name, "%s.step_%d.h5", path, st * 10);
    held += file_size(name);
  }
  print_message("20 steps: %lld bytes written, %lld bytes in the files (%.2fx)\n", written, held,
                (double)written / (double)held);
  assert_true(written <= held + held / 4);
  free(a);
  free(path);
}

/* Moving the main file without its step files gives an error that names the
 * missing file; rg_acts_open then sees the step as not done, and a rerun
 * writes it again. */
static void test_missing_step_file(void **state) {
  char *path = fresh_path("acts-lost.h5");
  rg_acts_meta m = meta(false);
  rg_acts_file *f = rg_acts_open(path, &m);
  assert_non_null(f);
  write_step(f, 7, true);
  rg_acts_close(f);
  char step_file[512], away[600];
  snprintf(step_file, sizeof step_file, "%s.step_7.h5", path);
  snprintf(away, sizeof away, "%s.away", step_file);
  assert_int_equal(rename(step_file, away), 0);
  assert_null(rg_acts_reader_open(path));
  assert_non_null(strstr(rg_error_get(), "acts-lost.h5.step_7.h5"));
  f = rg_acts_open(path, &m);
  assert_non_null(f);
  assert_int_equal(rg_acts_has_step(f, 7), 0);
  write_step(f, 7, true);
  rg_acts_close(f);
  check_file(path, 7, false);
  unlink(away);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_read),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_series_bytes_linear),
      cmocka_unit_test(test_missing_step_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
