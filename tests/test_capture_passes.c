/* test_capture_passes: `refgeo capture` runs one forward pass per prompt
 * batch whatever the number of hook sites, and what it stores per site is
 * what a capture of that site alone stores.
 *
 * The passes are counted outside the capture code: this program is linked
 * with --wrap=rg_session_prefill (tests/CMakeLists.txt), so every prefill the
 * library makes goes through __wrap_rg_session_prefill below. Two splits of
 * 5 and 3 of the forward fixture's prompts with batch 2 must take
 * ceil(5/2) + ceil(3/2) = 5 prefills of 8 prompts in all, with all 5 sites
 * as with one; a pass per site (the old capture) makes 25 of 40.
 *
 * Values: each site's dataset from the all-sites capture must equal, bit for
 * bit, the one from a capture of that site alone (same batches, same
 * engine, so the same floats). The single-site resid_pre is checked against
 * transformers by test_capture's fixture case.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/acts_h5_read.h"
#include "capture/capture.h"
#include "engine/forward.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static int n_prefills, n_prompts_prefilled;

int __real_rg_session_prefill(rg_session *s, const int32_t *const *prompts, const int *lens, int n, float *logits);
int __wrap_rg_session_prefill(rg_session *s, const int32_t *const *prompts, const int *lens, int n, float *logits);
int __wrap_rg_session_prefill(rg_session *s, const int32_t *const *prompts, const int *lens, int n, float *logits) {
  n_prefills++;
  n_prompts_prefilled += n;
  return __real_rg_session_prefill(s, prompts, lens, n, logits);
}

enum { N_A = 5, N_B = 3, BATCH = 2 };

/* The forward fixture's prompt texts FIRST..FIRST+N-1 as a JSON split. */
static rg_prompt_set *fixture_prompts(const char *path, int first, int n) {
  cJSON *index = t_read_json_fixture("forward/index.json");
  cJSON *prompts = cJSON_GetObjectItem(index, "prompts");
  assert_true(cJSON_GetArraySize(prompts) >= first + n);
  cJSON *arr = cJSON_CreateArray();
  for (int i = first; i < first + n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "instruction", cJSON_GetObjectItem(cJSON_GetArrayItem(prompts, i), "text")->valuestring);
    cJSON_AddItemToArray(arr, o);
  }
  char *json = cJSON_PrintUnformatted(arr);
  assert_int_equal(rg_write_file_atomic(path, json, strlen(json)), 0);
  free(json);
  cJSON_Delete(arr);
  cJSON_Delete(index);
  rg_prompt_set *s = rg_prompts_load(path);
  if (!s) fail_msg("%s", rg_error_get());
  return s;
}

static char *fresh(const char *name) {
  char *p = t_tmp_path(name);
  unlink(p);
  return p;
}

/* Captures SITES of both splits into H5; returns the prefills it made. */
static int capture(const char *h5, const rg_capture_split *splits, uint32_t sites) {
  rg_checkpoint item = {0, (char *)t_env("REFGEO_MODEL")};
  rg_checkpoint_series series = {1, &item};
  rg_capture_opts o = {.splits = splits, .n_splits = 2, .sites = sites, .batch = BATCH, .threads = 2};
  n_prefills = n_prompts_prefilled = 0;
  if (rg_capture_series(&series, h5, &o) != 0) fail_msg("%s", rg_error_get());
  return n_prefills;
}

static void read_site(const char *h5, const char *split, rg_hook_site site, float **acts, size_t *count) {
  rg_acts_reader *r = rg_acts_reader_open(h5);
  if (!r) fail_msg("%s", rg_error_get());
  int n = 0, n_pos = 0;
  if (rg_acts_read_site(r, 0, split, site, acts, &n, &n_pos) != 0) fail_msg("%s", rg_error_get());
  const rg_acts_reader_info *info = rg_acts_reader_info_of(r);
  *count = (size_t)info->n_layers * n * n_pos * info->d_model;
  rg_acts_reader_close(r);
}

static void test_one_pass_per_batch(void **state) {
  char *pa = t_tmp_path("passes_a.json"), *pb = t_tmp_path("passes_b.json");
  rg_prompt_set *a = fixture_prompts(pa, 0, N_A), *b = fixture_prompts(pb, N_A, N_B);
  const rg_capture_split splits[2] = {{"split_a", a}, {"split_b", b}};
  const uint32_t all = (1u << RG_HOOK_N_SITES) - 1;

  char *h5_all = fresh("passes_all.h5");
  int passes = capture(h5_all, splits, all);
  const int want = (N_A + BATCH - 1) / BATCH + (N_B + BATCH - 1) / BATCH;
  print_message("all %d sites: %d prefills of %d prompts (want %d of %d)\n", RG_HOOK_N_SITES, passes,
                n_prompts_prefilled, want, N_A + N_B);
  assert_int_equal(passes, want);
  assert_int_equal(n_prompts_prefilled, N_A + N_B);

  for (int site = 0; site < RG_HOOK_N_SITES; site++) {
    char name[64];
    snprintf(name, sizeof name, "passes_%s.h5", rg_hook_site_name((rg_hook_site)site));
    char *h5_one = fresh(name);
    assert_int_equal(capture(h5_one, splits, RG_HOOK_BIT(site)), want);
    for (int k = 0; k < 2; k++) {
      float *x = NULL, *y = NULL;
      size_t nx = 0, ny = 0;
      read_site(h5_all, splits[k].name, (rg_hook_site)site, &x, &nx);
      read_site(h5_one, splits[k].name, (rg_hook_site)site, &y, &ny);
      assert_int_equal(nx, ny);
      if (memcmp(x, y, nx * sizeof *x) != 0)
        fail_msg("%s/%s differs between the all-sites and the one-site capture", splits[k].name,
                 rg_hook_site_name((rg_hook_site)site));
      free(x), free(y);
    }
    free(h5_one);
  }
  rg_prompts_free(a), rg_prompts_free(b);
  free(h5_all), free(pa), free(pb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_pass_per_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
