/* test_directions: the directions file (geometry/directions_h5.h) and the
 * CLI's --ablate / --actadd / --coeff flags that read it.
 *
 *  - The file is read back by h5dump (hdf5-tools, a reader independent of
 *    refgeo's): every value bit for bit, the layout and attributes h5py
 *    users rely on.
 *  - FILE[:step=S,pos=P,layer=L] parsing, and the lookup's defaults (the only
 *    step, the selected carrier) and one-line errors: a file of the wrong
 *    width, a step, position or layer not in the file, a step without an
 *    admissible carrier, several steps and none named, not a directions file.
 *  - `refgeo logits` on SmolLM2 with --ablate / --actadd gives exactly the
 *    logits of the library with the same intervention set on a session (the
 *    engine's interventions themselves are checked against transformers in
 *    test_forward), and differs from the plain run; bad flag values are one
 *    line and exit 1.
 *  - `refgeo asr --ablate` names the attack after the intervention, keeps its
 *    completions in a file of their own (a plain run's are never resumed for
 *    it), and generates what `refgeo generate --ablate` generates.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/directions_h5.h"
#include "engine/forward.h"
#include "model/model.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/rng.h"

enum { L = 3, P = 2, D = 4 };

/* Deterministic values: [step][layer][pos][k]. */
static float value(int s, int l, int p, int k) { return (float)(1000 * s + 100 * l + 10 * p + k) / 7.0f; }

/* Two steps: step 0 with no admissible carrier, step 50 selecting (pos -1, layer 2). */
static char *write_small(const char *name) {
  static float dirs[2][L][P][D];
  for (int s = 0; s < 2; s++)
    for (int l = 0; l < L; l++)
      for (int p = 0; p < P; p++)
        for (int k = 0; k < D; k++) dirs[s][l][p][k] = value(s, l, p, k);
  rg_directions_step steps[2] = {
      {.step = 0, .checkpoint = "base", .dirs = &dirs[0][0][0][0], .selected_layer = -1},
      {.step = 50, .checkpoint = "ck50", .dirs = &dirs[1][0][0][0], .selected_pos = -1, .selected_layer = 2},
  };
  char *path = t_tmp_path(name);
  assert_int_equal(rg_directions_write(path, L, P, D, steps, 2), 0);
  return path;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected '%s' in:\n%.2000s", needle, hay);
}

static void test_layout_h5dump(void **state) {
  (void)state;
  char *path = write_small("directions_small.h5");
  size_t n;
  float *got = t_h5dump_floats(path, "/step_50/resid_pre", &n);
  assert_int_equal(n, L * P * D);
  for (int l = 0; l < L; l++)
    for (int p = 0; p < P; p++)
      for (int k = 0; k < D; k++) assert_true(got[(l * P + p) * D + k] == value(1, l, p, k));
  free(got);
  char *out = t_h5dump("-H", path);
  assert_contains(out, "DATASET \"resid_pre\"");
  assert_contains(out, "H5T_IEEE_F32LE");
  assert_contains(out, "( 3, 2, 4 )");
  free(out);
  out = t_h5dump("-a /format", path);
  assert_contains(out, "\"refgeo-directions/1\"");
  free(out);
  out = t_h5dump("-a /step_50/selected_layer", path);
  assert_contains(out, "(0): 2");
  free(out);
  out = t_h5dump("-a /step_0/selected_layer", path);
  assert_contains(out, "(0): -1");
  free(out);
  out = t_h5dump("-a /step_50/resid_pre/hook_names", path);
  assert_contains(out, "\"blocks.2.hook_resid_pre\"");
  free(out);
  out = t_h5dump("-a /positions", path);
  assert_contains(out, "(0): -2, -1");
  free(out);
  free(path);
}

static void test_spec_parse(void **state) {
  (void)state;
  char *file;
  rg_direction_ref r;
  assert_int_equal(rg_direction_spec_parse("d.h5", &file, &r), 0);
  assert_string_equal(file, "d.h5");
  assert_false(r.has_step || r.has_pos || r.has_layer);
  free(file);
  assert_int_equal(rg_direction_spec_parse("run:1/d.h5:layer=2,step=50,pos=-1", &file, &r), 0);
  assert_string_equal(file, "run:1/d.h5"); /* a ':' in the path is kept */
  assert_true(r.has_step && r.step == 50 && r.has_pos && r.pos == -1 && r.has_layer && r.layer == 2);
  free(file);
  assert_int_equal(rg_direction_spec_parse("d.h5:step=7", &file, &r), 0);
  assert_true(r.has_step && r.step == 7 && !r.has_pos);
  free(file);
  const char *bad[][2] = {
      {"d.h5:pos=-1", "give both pos= and layer="}, {"d.h5:layer=1,pos=0", "must be negative"},
      {"d.h5:step=x", "expected an integer"},       {"d.h5:step=1,color=2", "unknown key"},
      {":step=1", "no file named"},                 {"d.h5:layer=-3,pos=-1", "out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(rg_direction_spec_parse(bad[i][0], &file, &r), -1);
    assert_contains(rg_error_get(), bad[i][1]);
    assert_null(strchr(rg_error_get(), '\n'));
  }
}

/* Reads SPEC (suffix only) from PATH; expects success and the given ref. */
static void expect_read(const char *path, const char *suffix, int step, int pos, int layer) {
  char spec[512];
  snprintf(spec, sizeof spec, "%s%s", path, suffix);
  char *file;
  rg_direction_ref r;
  float v[D];
  assert_int_equal(rg_direction_spec_parse(spec, &file, &r), 0);
  if (rg_directions_read(file, &r, D, v) != 0) fail_msg("%s: %s", spec, rg_error_get());
  assert_int_equal(r.step, step);
  assert_int_equal(r.pos, pos);
  assert_int_equal(r.layer, layer);
  for (int k = 0; k < D; k++) assert_true(v[k] == value(step == 50, layer, P + pos, k));
  free(file);
}

static void expect_read_error(const char *path, const char *suffix, int d_model, const char *phrase) {
  char spec[512];
  snprintf(spec, sizeof spec, "%s%s", path, suffix);
  char *file;
  rg_direction_ref r;
  float v[D + 1];
  assert_int_equal(rg_direction_spec_parse(spec, &file, &r), 0);
  assert_int_equal(rg_directions_read(file, &r, d_model, v), -1);
  assert_contains(rg_error_get(), phrase);
  assert_contains(rg_error_get(), file); /* the message names the file */
  assert_null(strchr(rg_error_get(), '\n'));
  free(file);
}

static void test_read(void **state) {
  (void)state;
  char *path = write_small("directions_read.h5");
  expect_read(path, ":step=50", 50, -1, 2);                /* the selected carrier */
  expect_read(path, ":step=50,pos=-2,layer=0", 50, -2, 0); /* explicit */
  expect_read(path, ":step=0,pos=-1,layer=1", 0, -1, 1);
  expect_read_error(path, "", D, "holds steps 0, 50; name one");
  expect_read_error(path, ":step=0", D, "step 0 had no admissible carrier");
  expect_read_error(path, ":step=7", D, "no step 7 (the file holds 0, 50)");
  expect_read_error(path, ":step=50,pos=-3,layer=0", D, "no position -3");
  expect_read_error(path, ":step=50,pos=-1,layer=3", D, "no layer 3");
  expect_read_error(path, ":step=50", D + 1, "width 4, the model's d_model is 5");
  char *junk = t_write_tmp("directions_junk.h5", "not hdf5", 8);
  expect_read_error(junk, "", D, "cannot open as HDF5");
  free(junk);

  /* A file of one step needs no step. */
  static const float one[L][P][D] = {{{1}}};
  rg_directions_step s = {.step = 3, .checkpoint = "m", .dirs = &one[0][0][0], .selected_pos = -2, .selected_layer = 0};
  char *single = t_tmp_path("directions_single.h5");
  assert_int_equal(rg_directions_write(single, L, P, D, &s, 1), 0);
  char *file;
  rg_direction_ref r;
  float v[D];
  assert_int_equal(rg_direction_spec_parse(single, &file, &r), 0);
  assert_int_equal(rg_directions_read(file, &r, D, v), 0);
  assert_true(r.step == 3 && r.pos == -2 && r.layer == 0 && v[0] == 1.0f && v[1] == 0.0f);
  free(file);
  free(single);
  free(path);
}

/* ---------------------------------------------------------------- the CLI on SmolLM2 */

enum { SEL_LAYER = 6, SEL_POS = -1 };
static const char PROMPT[] = "Write a short poem about the sea.";

/* A directions file for SmolLM2 (d_model 576, 30 layers) whose step 0
 * selects (SEL_POS, SEL_LAYER); its vector there goes to DIR. */
static char *smollm_directions(const rg_model *m, float **dir) {
  int d = m->cfg.d_model, nl = m->cfg.n_layers;
  float *all = calloc((size_t)nl * P * d, sizeof *all);
  assert_non_null(all);
  uint64_t rng = 7;
  for (size_t i = 0; i < (size_t)nl * P * d; i++) /* uniform in [-2, 2) */
    all[i] = (float)((double)(rg_splitmix64(&rng) >> 11) * 0x1p-53 - 0.5) * 4.0f;
  rg_directions_step s = {.step = 0, .checkpoint = m->path, .dirs = all, .selected_pos = SEL_POS,
                          .selected_layer = SEL_LAYER};
  char *path = t_tmp_path("directions_smollm.h5");
  assert_int_equal(rg_directions_write(path, nl, P, d, &s, 1), 0);
  *dir = malloc((size_t)d * sizeof **dir);
  assert_non_null(*dir);
  memcpy(*dir, all + ((size_t)SEL_LAYER * P + (P + SEL_POS)) * d, (size_t)d * sizeof **dir);
  free(all);
  return path;
}

/* The last-position logits of PROMPT (chat template) with IV (may be NULL). */
static float *library_logits(const rg_model *m, const rg_intervention *iv) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "tokenize '%s' --chat --json '%s'", m->path, PROMPT);
  char *out = NULL;
  assert_int_equal(t_run_cli(cmd, &out, NULL), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  cJSON *jids = cJSON_GetObjectItem(j, "ids");
  int n = cJSON_GetArraySize(jids);
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  for (int i = 0; i < n; i++) ids[i] = (int32_t)cJSON_GetArrayItem(jids, i)->valueint;
  cJSON_Delete(j);
  free(out);
  rg_session *s = t_session(m, 2, RG_WEIGHTS_AUTO, 1, n, NULL);
  if (iv) assert_int_equal(rg_session_set_intervention(s, iv), 0);
  float *lg = malloc((size_t)m->cfg.vocab_size * sizeof *lg);
  const int32_t *prompts[1] = {ids};
  assert_int_equal(rg_session_prefill(s, prompts, &n, 1, lg), 0);
  t_session_free(s);
  free(ids);
  return lg;
}

/* Runs `refgeo logits` with FLAGS; checks its top-5 logits equal LG's. */
static void expect_cli_logits(const rg_model *m, const char *flags, const float *lg) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "logits '%s' --chat --prompt '%s' --top 5 --threads 2 --json %s", m->path, PROMPT, flags);
  char *out = NULL, *err = NULL;
  int rc = t_run_cli(cmd, &out, &err);
  if (rc != 0) fail_msg("refgeo %s: %s", cmd, err);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  cJSON *top = cJSON_GetObjectItem(j, "top"), *e;
  assert_int_equal(cJSON_GetArraySize(top), 5);
  cJSON_ArrayForEach(e, top) {
    int id = cJSON_GetObjectItem(e, "id")->valueint;
    double logit = cJSON_GetObjectItem(e, "logit")->valuedouble;
    if ((float)logit != lg[id]) fail_msg("%s: id %d: CLI %.9g, library %.9g", flags, id, logit, lg[id]);
  }
  cJSON_Delete(j);
  free(out);
  free(err);
}

static void test_cli_interventions(void **state) {
  (void)state;
  rg_model *m = rg_model_load(t_env("REFGEO_MODEL"));
  assert_non_null(m);
  float *dir;
  char *path = smollm_directions(m, &dir);
  char flags[1024];

  float *plain = library_logits(m, NULL);
  rg_intervention ablate = {.ablate_dir = dir};
  float *ablated = library_logits(m, &ablate);
  rg_intervention add = {.actadd_vec = dir, .actadd_layer = SEL_LAYER, .actadd_coeff = 2.0f};
  float *added = library_logits(m, &add);
  int differ = 0;
  for (int i = 0; i < m->cfg.vocab_size; i++) differ += ablated[i] != plain[i] && added[i] != plain[i];
  assert_true(differ > m->cfg.vocab_size / 2); /* the interventions do change the logits */

  expect_cli_logits(m, "", plain);
  snprintf(flags, sizeof flags, "--ablate '%s'", path); /* the selected carrier */
  expect_cli_logits(m, flags, ablated);
  snprintf(flags, sizeof flags, "--actadd '%s:pos=%d,layer=%d' --coeff 2", path, SEL_POS, SEL_LAYER);
  expect_cli_logits(m, flags, added);

  /* Bad values: one line, exit 1. */
  char *small = write_small("directions_cli_small.h5");
  struct {
    const char *flags, *phrase;
  } bad[] = {
      {"--coeff 2", "--coeff: needs --actadd"},
      {"--ablate '%s:step=50'", "width 4, the model's d_model is 576"},
      {"--ablate '%s:step=1'", "no step 1"},
      {"--actadd '%s:pos=-9,layer=0'", "no position -9"},
      {"--ablate '%s:pos=-1,layer=99'", "no layer 99"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char f[1024], cmd[2048];
    snprintf(f, sizeof f, bad[i].flags, i == 1 ? small : path);
    snprintf(cmd, sizeof cmd, "logits '%s' --prompt hi %s", m->path, f);
    char *err = NULL;
    assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
    assert_contains(err, bad[i].phrase);
    assert_true(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    free(err);
  }
  free(small);
  free(plain);
  free(ablated);
  free(added);
  free(dir);
  free(path);
  rg_model_free(m);
}

/* The generation of `refgeo generate --chat --prompt TEXT FLAGS` (16 tokens). */
static char *cli_generation(const char *model, const char *text, const char *flags) {
  char cmd[2048], *out = NULL;
  snprintf(cmd, sizeof cmd, "generate '%s' --chat --prompt '%s' --max-new-tokens 16 --threads 2 --json %s", model, text,
           flags);
  assert_int_equal(t_run_cli(cmd, &out, NULL), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  char *g = strdup(cJSON_GetObjectItem(j, "text")->valuestring);
  cJSON_Delete(j);
  free(out);
  return g;
}

/* The generation of behavior ID in an asr completions file. */
static char *asr_generation(const char *path, const char *id) {
  char *text = rg_read_file(path, NULL);
  if (!text) fail_msg("%s: missing", path);
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, id), 0);
  assert_non_null(first);
  char *g = strdup(cJSON_GetObjectItem(first, "generation")->valuestring);
  cJSON_Delete(j);
  free(text);
  return g;
}

static void test_asr_ablate(void **state) {
  (void)state;
  const char *model = t_env("REFGEO_MODEL");
  rg_model *m = rg_model_load(model);
  assert_non_null(m);
  float *dir;
  char *dirs = smollm_directions(m, &dir);
  rg_model_free(m);
  const char csv[] = "id,prompt\np1,Write a short poem about the sea.\n";
  char *prompts = t_write_tmp("directions_asr_prompts.csv", csv, strlen(csv));
  char *out = t_tmp_path("directions_asr");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
  assert_int_equal(system(cmd), 0);
  const char *common = "--classifier refusal-xstest --max-new-tokens 16 --batch 1 --threads 2";
  snprintf(cmd, sizeof cmd, "asr --model '%s' --prompts '%s' --out '%s' %s", model, prompts, out, common);
  char *err = NULL;
  if (t_run_cli(cmd, NULL, &err) != 0) fail_msg("%s: %s", cmd, err);
  free(err);
  snprintf(cmd, sizeof cmd, "asr --model '%s' --prompts '%s' --out '%s' %s --ablate '%s'", model, prompts, out, common,
           dirs);
  if (t_run_cli(cmd, NULL, &err) != 0) fail_msg("%s: %s", cmd, err);
  free(err);

  char *asr_csv = rg_path_join(out, "asr.csv");
  char *rows = rg_read_file(asr_csv, NULL);
  assert_non_null(rows);
  assert_contains(rows, "0,DirectRequest,refusal-xstest,");
  char label[128];
  snprintf(label, sizeof label, "0,DirectRequest+ablate(step=0;pos=%d;layer=%d),refusal-xstest,", SEL_POS, SEL_LAYER);
  assert_contains(rows, label);

  /* Plain and ablated completions: separate files, each what `generate` gives. */
  char *plain_path = rg_path_join(out, "completions_step0.json");
  char find[4096];
  snprintf(find, sizeof find, "ls '%s'/completions_step0_ablate_*.json > '%s/ablated_name'", out, out);
  assert_int_equal(system(find), 0);
  snprintf(find, sizeof find, "%s/ablated_name", out);
  char *ablated_path = rg_read_file(find, NULL);
  assert_non_null(ablated_path);
  ablated_path[strcspn(ablated_path, "\n")] = '\0';
  char flags[1024];
  snprintf(flags, sizeof flags, "--ablate '%s'", dirs);
  char *want_plain = cli_generation(model, "Write a short poem about the sea.", ""),
       *want_ablated = cli_generation(model, "Write a short poem about the sea.", flags);
  char *got_plain = asr_generation(plain_path, "p1"), *got_ablated = asr_generation(ablated_path, "p1");
  assert_string_equal(got_plain, want_plain);
  assert_string_equal(got_ablated, want_ablated);
  assert_string_not_equal(got_plain, got_ablated);
  free(want_plain);
  free(want_ablated);
  free(got_plain);
  free(got_ablated);
  free(plain_path);
  free(ablated_path);
  free(rows);
  free(asr_csv);
  free(out);
  free(prompts);
  free(dir);
  free(dirs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_h5dump),
      cmocka_unit_test(test_spec_parse),
      cmocka_unit_test(test_read),
      cmocka_unit_test(test_cli_interventions),
      cmocka_unit_test(test_asr_ablate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
