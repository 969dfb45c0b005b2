/* test_capture_h5: the HDF5 activation file (capture/acts_h5.h), read back
 * with the plain HDF5 C API: layout, attributes, float32 and float16 values
 * (the float16 inputs are exactly representable in binary16, so they must
 * come back exactly), and resuming after an unfinished step. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/acts_h5.h"
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
    assert_int_equal(rg_acts_write_prompt(f, i, a), 0);
  }
  assert_int_equal(rg_acts_end_site(f), 0);
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
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.step_0.tmp", path);
    assert_false(rg_path_exists(tmp)); /* the step's temp file is gone */
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
  assert_int_equal(rg_acts_end_site(f), -1);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_read),
      cmocka_unit_test(test_resume),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
