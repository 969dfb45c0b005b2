/* test_geometry_pipeline: `refgeo geometry` end to end on SmolLM2.
 *
 * Setup builds a real 2-checkpoint series: the base GGUF (step 0) and a
 * `refgeo perturb` copy (step 100), captured by `refgeo capture` from the
 * project's default prompt sets (data/prompts, 32/32 train and 16/16 val
 * prompts per class). To stay within ~2 min on 2 cores the geometry run
 * scores only the candidates of layers 4..5 (12 of 180) on the first 4 val
 * prompts per class (--layers 4:6 --max-val 4); the geometry rows still cover
 * all 30 layers x 6 positions. The induce threshold is lowered so that some
 * candidate is admissible (SmolLM2 hardly refuses: with RD's induce >= 0
 * every candidate of layers 4..5 was rejected in a trial run); a second run
 * with --induce-min 1000 checks the "none admissible" rows.
 *
 * The reference predates RD's prompt filter and the null, so both are off
 * here (test_geometry_verdict covers them); N_min (8 by default, checked
 * against every split as captured) is set to the val prompts scored, which
 * the small sanitized capture would otherwise fall below.
 *
 * Checks: the activation reader returns the same float32 bits as h5dump's
 * binary export (an independent HDF5 reader); the three tables have RD's
 * shapes and value ranges, are consistent with each other (migration's best
 * carrier = the rank-1 row of carriers.csv = the admissible argmin bypass),
 * and a python-free awk count of the rows agrees; CLI errors are one line.
 * directions.h5, read by h5dump: every step's directions equal the difference
 * in means recomputed here from h5dump's export of the train activations, and
 * each step marks migration.csv's best carrier (or none).
 *
 * Against an independent reference: tests/fixtures/geometry/
 * pipeline_reference.json, written by tools/reference/make_geometry_reference.py
 * (numpy/scipy over the same activations read with h5py, captured offline with
 * this setup's commands): every geometry.csv row's |r|, cos to step 0, AUROC
 * and prompt_diff spectrum; the sign of every stored direction (its dot with
 * a random unit vector u); migration.csv's carrier spectrum and drift angle.
 * A swapped harmful/harmless split (in capture or here) flips the
 * directions' sign and makes prompt_diff x_harmless - mean harmful, so it
 * fails here although the tables stay consistent with each other (the AUROC
 * and the line angles do not see it). The numbers are reproducible because
 * capture is deterministic; the tolerances (REL_TOL, auroc_tol) leave room
 * for engine changes at float32 rounding level.
 *
 * Under the sanitizers (REFGEO_SANITIZED) the model runs ~5x slower, so the
 * capture keeps 8 train / 4 val prompts per class and geometry scores 2 val
 * prompts per class (the fixture's "small" variant); the checks are the same.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "capture/acts_h5_read.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"

enum { N_LAYERS = 30, N_POS = 6, LO = 4, HI = 6, N_CAND = N_POS * (HI - LO) };

static char *dir, *acts, *out, *out_none;

/* Prompt counts of the capture and the val prompts geometry scores per class;
 * smaller under the sanitizers (see the top). */
static int g_n_train = 32, g_n_val = 16, g_max_val = 4;
static cJSON *g_fixture;
static const cJSON *g_ref; /* the fixture's variant for these counts */

/* Activations reproduce to float32 rounding (~1e-7 relative) after a change of
 * summation order in the engine; a difference of means of ~30 prompts and a
 * spectrum of them keep that within 1e-4 relative of the quantity's scale.
 * A swapped split changes the checked quantities by O(1). */
static const double REL_TOL = 1e-4;

/* AUROC counts pairs: allow 4 of the n_h x n_l pairs to flip order (projections
 * of two prompts within float32 rounding of each other). */
static double auroc_tol(void) { return 4.0 / ((double)g_n_train * g_n_train) + 1e-12; }

static const cJSON *ref_step(long step) {
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(g_ref, "per_step"))
    if (cJSON_GetObjectItem(s, "step")->valueint == step) return s;
  fail_msg("reference: no step %ld", step);
  return NULL;
}

/* |got - want| <= tol * scale, or both NaN (the fixture's null). */
static void expect_near(double got, const cJSON *want, double tol, double scale, const char *what, long step,
                        long layer, long pos) {
  if (cJSON_IsNull(want)) {
    if (!isnan(got)) fail_msg("step %ld layer %ld pos %ld %s: %.10g, reference NaN", step, layer, pos, what, got);
    return;
  }
  if (!(fabs(got - want->valuedouble) <= tol * scale))
    fail_msg("step %ld layer %ld pos %ld %s: %.10g, reference %.10g (tol %.2g)", step, layer, pos, what, got,
             want->valuedouble, tol * scale);
}

/* The reference value NAME of site (layer, pos) at STEP. */
static const cJSON *site_ref(long step, const char *name, long layer, long pos) {
  const cJSON *arr = cJSON_GetObjectItem(cJSON_GetObjectItem(ref_step(step), "sites"), name);
  return cJSON_GetArrayItem(arr, (int)(layer * N_POS + pos + N_POS));
}

static char *tmp(const char *name) {
  char *p = rg_path_join(dir, name);
  assert_non_null(p);
  return p;
}

static void run_ok(const char *args) {
  char *err = NULL;
  int rc = t_run_cli(args, NULL, &err);
  if (rc != 0) fail_msg("refgeo %s: exit %d: %s", args, rc, err);
  free(err);
}

static int setup(void **state) {
  (void)state;
  if (getenv("REFGEO_SANITIZED")) g_n_train = 8, g_n_val = 4, g_max_val = 2;
  g_fixture = t_read_json_fixture("geometry/pipeline_reference.json");
  g_ref = cJSON_GetObjectItem(g_fixture, getenv("REFGEO_SANITIZED") ? "small" : "full");
  assert_int_equal(cJSON_GetObjectItem(g_ref, "n_harmful")->valueint, g_n_train);
  dir = t_tmp_path("geometry_pipeline");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(rg_mkdir_p(dir), 0);
  acts = tmp("acts.h5");
  out = tmp("out");
  out_none = tmp("out_none");
  char *pert = tmp("pert.gguf"), *manifest = tmp("manifest.csv");
  const char *model = t_env("REFGEO_MODEL");
  snprintf(cmd, sizeof cmd, "perturb --model '%s' --out '%s' --scale 0.05 --seed 1", model, pert);
  run_ok(cmd);
  char text[4096];
  snprintf(text, sizeof text, "step,path\n0,%s\n100,%s\n", model, pert);
  assert_int_equal(rg_write_file_atomic(manifest, text, strlen(text)), 0);
  char *prompts = t_fixture_path("../../data/prompts");
  snprintf(cmd, sizeof cmd,
           "capture --manifest '%s' --out '%s' --n-train %d --n-val %d --threads 2 --harmful-train "
           "'%s/harmful_train.json' --harmless-train '%s/harmless_train.json' --harmful-val '%s/harmful_val.json' "
           "--harmless-val '%s/harmless_val.json'",
           manifest, acts, g_n_train, g_n_val, prompts, prompts, prompts, prompts);
  run_ok(cmd);
  snprintf(cmd, sizeof cmd,
           "geometry --acts '%s' --manifest '%s' --out '%s' --layers %d:%d --max-val %d --induce-min -1000 "
           "--no-prompt-filter --n-min %d --null-size 0 --bootstrap 0 --threads 2",
           acts, manifest, out, LO, HI, g_max_val, g_max_val);
  run_ok(cmd);
  snprintf(cmd, sizeof cmd,
           "geometry --acts '%s' --model '%s' --out '%s' --layers %d:%d --max-val 2 --induce-min 1000 "
           "--no-prompt-filter --n-min 2 --null-size 0 --bootstrap 0 --threads 2",
           acts, model, out_none, LO, LO + 1);
  run_ok(cmd);
  free(prompts);
  free(pert);
  free(manifest);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free(dir);
  free(acts);
  free(out);
  free(out_none);
  cJSON_Delete(g_fixture);
  return 0;
}

static rg_csv *table(const char *d, const char *name) {
  char *p = rg_path_join(d, name);
  rg_csv *t = rg_csv_read(p);
  if (!t) fail_msg("%s", rg_error_get());
  free(p);
  return t;
}

static int col(const rg_csv *t, const char *name) {
  int c = rg_csv_col(t, name);
  if (c < 0) fail_msg("%s: no column %s", t->path, name);
  return c;
}

static double dval(const rg_csv *t, size_t r, const char *name) { return strtod(t->rows[r][col(t, name)], NULL); }
static long ival(const rg_csv *t, size_t r, const char *name) { return strtol(t->rows[r][col(t, name)], NULL, 10); }

/* The reader's float32 activations equal h5dump's binary export bit for bit. */
static void test_reader_matches_h5dump(void **state) {
  (void)state;
  rg_acts_reader *r = rg_acts_reader_open(acts);
  assert_non_null(r);
  const rg_acts_reader_info *info = rg_acts_reader_info_of(r);
  assert_int_equal(info->n_layers, N_LAYERS);
  assert_int_equal(info->d_model, 576);
  assert_int_equal(info->n_steps, 2);
  assert_int_equal(info->steps[0], 0);
  assert_int_equal(info->steps[1], 100);
  assert_int_equal(info->n_eoi, N_POS);
  float *a = NULL;
  int n = 0, n_pos = 0;
  assert_int_equal(rg_acts_read_site(r, 100, "harmful_train", RG_HOOK_RESID_PRE, &a, &n, &n_pos), 0);
  assert_int_equal(n, g_n_train);
  assert_int_equal(n_pos, N_POS);
  size_t n_raw = 0;
  float *raw = t_h5dump_floats(acts, "/step_100/acts/harmful_train/resid_pre", &n_raw);
  assert_int_equal(n_raw, (size_t)N_LAYERS * g_n_train * N_POS * 576);
  assert_memory_equal(raw, a, n_raw * sizeof(float));
  free(raw);
  free(a);

  int32_t **ids = NULL;
  int *lens = NULL, n_ids = 0;
  assert_int_equal(rg_acts_read_token_ids(r, 0, "harmless_val", &ids, &lens, &n_ids), 0);
  assert_int_equal(n_ids, g_n_val);
  /* Every prompt ends with the eoi tokens stored in the root attributes. */
  for (int i = 0; i < n_ids; i++) {
    assert_true(lens[i] > N_POS);
    for (int p = 0; p < N_POS; p++) assert_int_equal(ids[i][lens[i] - N_POS + p], info->eoi_token_ids[p]);
  }
  rg_acts_token_ids_free(ids, lens, n_ids);
  char *ck = rg_acts_read_checkpoint(r, 0);
  assert_string_equal(ck, t_env("REFGEO_MODEL"));
  free(ck);

  /* Missing pieces are one-line errors naming the file. */
  assert_int_equal(rg_acts_read_site(r, 7, "harmful_train", RG_HOOK_RESID_PRE, &a, &n, &n_pos), -1);
  assert_non_null(strstr(rg_error_get(), "no group /step_7"));
  assert_int_equal(rg_acts_read_site(r, 0, "harmful_train", RG_HOOK_MLP_OUT, &a, &n, &n_pos), -1);
  assert_non_null(strstr(rg_error_get(), "no dataset /step_0/acts/harmful_train/mlp_out"));
  rg_acts_reader_close(r);
  char *junk = t_write_tmp("geometry_pipeline/junk.h5", "not hdf5", 8);
  assert_null(rg_acts_reader_open(junk));
  assert_non_null(strstr(rg_error_get(), "junk.h5: not an HDF5 file"));
  free(junk);
}

static void test_geometry_table(void **state) {
  (void)state;
  rg_csv *g = table(out, "geometry.csv");
  assert_int_equal(g->n_rows, 2 * N_LAYERS * N_POS);
  for (size_t r = 0; r < g->n_rows; r++) {
    long step = ival(g, r, "step"), layer = ival(g, r, "layer"), pos = ival(g, r, "pos");
    assert_true(step == 0 || step == 100);
    assert_true(layer >= 0 && layer < N_LAYERS && pos >= -N_POS && pos <= -1);
    char hook[64];
    snprintf(hook, sizeof hook, "blocks.%ld.hook_resid_pre", layer);
    assert_string_equal(g->rows[r][col(g, "hook")], hook);
    assert_int_equal(ival(g, r, "n_harmful"), g_n_train);
    assert_int_equal(ival(g, r, "n_harmless"), g_n_train);
    assert_string_equal(g->rows[r][col(g, "matrix")], "prompt_diff");
    double norm = dval(g, r, "dir_norm"), auroc = dval(g, r, "auroc");
    const double ref_norm = site_ref(step, "dir_norm", layer, pos)->valuedouble;
    expect_near(norm, site_ref(step, "dir_norm", layer, pos), REL_TOL, ref_norm, "dir_norm", step, layer, pos);
    expect_near(auroc, site_ref(step, "auroc", layer, pos), auroc_tol(), 1, "auroc", step, layer, pos);
    expect_near(dval(g, r, "cos_step0"), site_ref(step, "cos_step0", layer, pos), REL_TOL, 1, "cos_step0", step,
                layer, pos);
    static const char *const SPECTRUM[][2] = {
        {"erank_sigma", "erank_sigma"}, {"erank_sigma2", "erank_sigma2"}, {"participation_ratio", "pr"}};
    for (int k = 0; k < 3; k++) {
      const cJSON *want = site_ref(step, SPECTRUM[k][1], layer, pos);
      expect_near(dval(g, r, SPECTRUM[k][0]), want, REL_TOL, cJSON_IsNull(want) ? 0 : want->valuedouble,
                  SPECTRUM[k][0], step, layer, pos);
    }
    if (layer == 0) {
      /* Block 0's input is the embedding of the eoi tokens, the same in
       * every prompt: no direction, so every measure is NaN. */
      assert_true(norm == 0 && isnan(auroc) && isnan(dval(g, r, "cos_step0")));
      continue;
    }
    assert_true(norm > 0);
    assert_true(auroc >= 0 && auroc <= 1);
    double c0 = dval(g, r, "cos_step0"), a0 = dval(g, r, "angle_step0_deg");
    assert_true(c0 >= -1 && c0 <= 1 && a0 >= 0 && a0 <= 180);
    /* cos and angle are two views of one number; 1e-6 deg covers the
     * conversion of a %.17g cos through acos near the extremes. */
    assert_true(fabs(cos(a0 * M_PI / 180) - c0) < 1e-6);
    if (step == 0) {
      assert_true(fabs(c0 - 1) < 1e-12 && a0 < 1e-5);
      assert_true(isnan(dval(g, r, "cos_prev")) && isnan(dval(g, r, "angle_prev_deg")));
    } else {
      /* With two steps, the previous step is step 0. */
      assert_true(dval(g, r, "cos_prev") == c0);
    }
    double es = dval(g, r, "erank_sigma"), es2 = dval(g, r, "erank_sigma2"), pr = dval(g, r, "participation_ratio");
    /* n_train x 576 matrix: every measure lies in [1, n_train], and
     * erank_sigma >= erank_sigma2 >= PR (entropy orders of a distribution). */
    assert_true(es >= 1 && es <= g_n_train && es2 >= 1 && pr >= 1 - 1e-12 && es >= es2 - 1e-9 && es2 >= pr - 1e-9);
  }
  /* The refusal direction separates the classes at the last position of a
   * middle layer: the harmful train prompts project higher (AUROC near 1). */
  for (size_t r = 0; r < g->n_rows; r++)
    if (ival(g, r, "layer") == 12 && ival(g, r, "pos") == -1) assert_true(dval(g, r, "auroc") > 0.8);
  rg_csv_free(g);
}

static void test_carriers_and_migration(void **state) {
  (void)state;
  rg_csv *c = table(out, "carriers.csv"), *m = table(out, "migration.csv");
  assert_int_equal(c->n_rows, 2 * N_CAND);
  assert_int_equal(m->n_rows, 2);
  for (size_t s = 0; s < 2; s++) {
    long step = ival(m, s, "step");
    int n_adm = 0;
    size_t best = (size_t)-1;
    for (size_t r = 0; r < c->n_rows; r++) {
      if (ival(c, r, "step") != step) continue;
      long layer = ival(c, r, "layer");
      assert_true(layer >= LO && layer < HI);
      double kl = dval(c, r, "kl");
      assert_true(kl >= 0 && isfinite(dval(c, r, "bypass")) && isfinite(dval(c, r, "induce")));
      const char *reason = c->rows[r][col(c, "reject_reason")];
      int adm = (int)ival(c, r, "admissible");
      assert_int_equal(adm, reason[0] == 0);
      /* Only the KL rule can reject here (induce-min -1000, layers < 24). */
      if (!adm) assert_true(strcmp(reason, "kl") == 0 && kl > 0.1);
      else assert_true(kl <= 0.1);
      n_adm += adm;
      if (adm && (best == (size_t)-1 || dval(c, r, "bypass") < dval(c, best, "bypass"))) best = r;
      if (adm && ival(c, r, "rank") == 1) assert_true(best == r || dval(c, r, "bypass") <= dval(c, best, "bypass"));
    }
    assert_int_equal(ival(m, s, "n_admissible"), n_adm);
    if (n_adm == 0) {
      assert_string_equal(m->rows[s][col(m, "label")], "none");
      continue;
    }
    assert_int_equal(ival(c, best, "rank"), 1);
    assert_int_equal(ival(m, s, "best_layer"), ival(c, best, "layer"));
    assert_int_equal(ival(m, s, "best_pos"), ival(c, best, "pos"));
    assert_true(dval(m, s, "bypass") == dval(c, best, "bypass"));
    assert_true(dval(m, s, "rel_depth") == (double)ival(c, best, "layer") / N_LAYERS);
    assert_string_equal(m->rows[s][col(m, "label")], "early"); /* layers 4, 5 of 30 */
    assert_string_equal(m->rows[s][col(m, "matrix")], "carrier");
    /* 6 unit rows: measures in [1, 6]. */
    double es = dval(m, s, "erank_sigma");
    assert_true(es >= 1 && es <= 6 && dval(m, s, "pr") >= 1 - 1e-12);
    double drift = dval(m, s, "angle_vs_step0_deg");
    if (step == 0) assert_true(drift < 1e-5);
    else assert_true(isnan(drift) || (drift >= 0 && drift <= 90));
    /* Against the reference: the carrier matrix's spectrum at the best layer,
     * and the drift as the line angle between this step's best candidate and
     * step 0's (the fixture has the angle of every pair of candidates). */
    const long bl = ival(m, s, "best_layer"), bp = ival(m, s, "best_pos");
    const cJSON *spec = cJSON_GetArrayItem(cJSON_GetObjectItem(ref_step(step), "carrier_spectrum"), (int)bl);
    static const char *const MEASURES[3] = {"erank_sigma", "erank_sigma2", "pr"};
    for (int k = 0; k < 3; k++)
      expect_near(dval(m, s, MEASURES[k]), cJSON_GetArrayItem(spec, k), REL_TOL, cJSON_GetArrayItem(spec, k)->valuedouble,
                  MEASURES[k], step, bl, bp);
    const size_t row0 = ival(m, 0, "step") == 0 ? 0 : 1;
    if (strcmp(m->rows[row0][col(m, "label")], "none") != 0) {
      const long k = (bp + N_POS) * (HI - LO) + bl - LO; /* RD's candidate order: position, then layer */
      const long k0 = (ival(m, row0, "best_pos") + N_POS) * (HI - LO) + ival(m, row0, "best_layer") - LO;
      const cJSON *angles = cJSON_GetObjectItem(ref_step(step), "line_angle_vs_step0");
      /* degrees: 0.05 covers an arccos near 0, where float32-level changes of
       * the directions move the angle most (sqrt of their size). */
      expect_near(drift, cJSON_GetArrayItem(cJSON_GetArrayItem(angles, (int)k), (int)k0), 0.05, 1, "drift", step, bl,
                  bp);
    }
    print_message("step %ld: best carrier pos %ld layer %ld bypass %.4f induce %.4f kl %.4f, %d admissible, drift "
                  "%.3f deg\n",
                  step, ival(m, s, "best_pos"), ival(m, s, "best_layer"), dval(m, s, "bypass"), dval(m, s, "induce"),
                  dval(m, s, "kl"), n_adm, drift);
  }
  rg_csv_free(c);
  rg_csv_free(m);

  /* --induce-min 1000 rejects everything: "none admissible" rows. */
  rg_csv *cn = table(out_none, "carriers.csv"), *mn = table(out_none, "migration.csv");
  assert_int_equal(cn->n_rows, N_POS);
  assert_int_equal(mn->n_rows, 1);
  for (size_t r = 0; r < cn->n_rows; r++) {
    const char *reason = cn->rows[r][col(cn, "reject_reason")];
    assert_true(strcmp(reason, "induce") == 0 || strcmp(reason, "kl") == 0);
    assert_string_equal(cn->rows[r][col(cn, "rank")], "");
  }
  assert_string_equal(mn->rows[0][col(mn, "best_layer")], "");
  assert_string_equal(mn->rows[0][col(mn, "label")], "none");
  assert_string_equal(mn->rows[0][col(mn, "matrix")], "none");
  assert_int_equal(ival(mn, 0, "n_admissible"), 0);
  rg_csv_free(cn);
  rg_csv_free(mn);
}

/* A python-free count of the data rows with awk agrees with the shapes. */
static void test_awk_row_counts(void **state) {
  (void)state;
  char cmd[4096], *p = tmp("awk.out");
  snprintf(cmd, sizeof cmd,
           "cd '%s' && for f in geometry carriers migration; do awk -F, 'NR>1{n++} END{print n}' $f.csv; done > '%s'",
           out, p);
  assert_int_equal(system(cmd), 0);
  char *got = rg_read_file(p, NULL), want[64];
  snprintf(want, sizeof want, "%d\n%d\n2\n", 2 * N_LAYERS * N_POS, 2 * N_CAND);
  assert_string_equal(got, want);
  free(got);
  free(p);
}

/* The largest |x| of an array, for a scale-aware tolerance. */
static double max_abs(const double *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
  return m;
}

/* Mean over prompts of a [L][n][N_POS][d] activation export, into [L][N_POS][d]. */
static void prompt_means(const float *x, size_t n_values, int d, double *mean) {
  size_t n = n_values / ((size_t)N_LAYERS * N_POS * d);
  memset(mean, 0, (size_t)N_LAYERS * N_POS * d * sizeof *mean);
  for (int l = 0; l < N_LAYERS; l++)
    for (size_t i = 0; i < n; i++)
      for (int p = 0; p < N_POS; p++)
        for (int k = 0; k < d; k++)
          mean[((size_t)l * N_POS + p) * d + k] += x[(((size_t)l * n + i) * N_POS + p) * d + k] / (double)n;
}

static void test_directions_file(void **state) {
  (void)state;
  enum { D = 576 };
  char *path = rg_path_join(out, "directions.h5");
  rg_csv *mig = table(out, "migration.csv");
  assert_int_equal(mig->n_rows, 2);
  size_t n_site = (size_t)N_LAYERS * N_POS * D;
  double *mh = malloc(n_site * sizeof *mh), *ml = malloc(n_site * sizeof *ml), *want = malloc(n_site * sizeof *want);
  assert_non_null(mh && ml && want);
  for (size_t r = 0; r < mig->n_rows; r++) {
    long step = ival(mig, r, "step");
    char dset[128];
    size_t n_dirs, n_h, n_l;
    snprintf(dset, sizeof dset, "/step_%ld/resid_pre", step);
    float *dirs = t_h5dump_floats(path, dset, &n_dirs);
    assert_int_equal(n_dirs, n_site);
    snprintf(dset, sizeof dset, "/step_%ld/acts/harmful_train/resid_pre", step);
    float *harm = t_h5dump_floats(acts, dset, &n_h);
    snprintf(dset, sizeof dset, "/step_%ld/acts/harmless_train/resid_pre", step);
    float *harmless = t_h5dump_floats(acts, dset, &n_l);
    prompt_means(harm, n_h, D, mh);
    prompt_means(harmless, n_l, D, ml);
    for (size_t i = 0; i < n_site; i++) want[i] = mh[i] - ml[i];
    /* The file stores the float64 difference rounded to float32: within
     * half an ulp of float32 (2^-24 relative) plus the summation-order
     * difference of two float64 means (~1e-12 of the largest value). */
    double scale = max_abs(want, n_site), worst = 0;
    for (size_t i = 0; i < n_site; i++) {
      double err = fabs(dirs[i] - want[i]) - 0x1p-24 * fabs(want[i]);
      worst = fmax(worst, err);
    }
    if (worst > 1e-12 * scale) fail_msg("step %ld: direction error %.3g beyond float32 rounding", step, worst);
    /* Each stored direction's sign and size against the reference: its dot
     * with the fixture's random unit vector u. */
    const cJSON *u = cJSON_GetObjectItem(g_fixture, "u");
    assert_int_equal(cJSON_GetArraySize(u), D);
    double uv[D];
    for (int k = 0; k < D; k++) uv[k] = cJSON_GetArrayItem(u, k)->valuedouble;
    for (int l = 0; l < N_LAYERS; l++)
      for (int p = 0; p < N_POS; p++) {
        double dot = 0;
        const float *rd = dirs + ((size_t)l * N_POS + p) * D;
        for (int k = 0; k < D; k++) dot += rd[k] * uv[k];
        const double norm = site_ref(step, "dir_norm", l, p - N_POS)->valuedouble;
        expect_near(dot, site_ref(step, "proj_u", l, p - N_POS), REL_TOL, norm, "direction . u", step, l, p - N_POS);
      }

    char *attrs;
    char arg[128], line[64];
    snprintf(arg, sizeof arg, "-a /step_%ld/selected_layer", step);
    attrs = t_h5dump(arg, path);
    const char *best_layer = mig->rows[r][col(mig, "best_layer")];
    snprintf(line, sizeof line, "(0): %s", *best_layer ? best_layer : "-1");
    if (!strstr(attrs, line)) fail_msg("step %ld: expected selected_layer %s in %s", step, line, attrs);
    free(attrs);
    if (*best_layer) {
      snprintf(arg, sizeof arg, "-a /step_%ld/selected_pos", step);
      attrs = t_h5dump(arg, path);
      snprintf(line, sizeof line, "(0): %s", mig->rows[r][col(mig, "best_pos")]);
      if (!strstr(attrs, line)) fail_msg("step %ld: expected selected_pos %s in %s", step, line, attrs);
      free(attrs);
    }
    free(dirs);
    free(harm);
    free(harmless);
  }
  free(mh);
  free(ml);
  free(want);
  rg_csv_free(mig);
  free(path);
}

static void test_cli_errors(void **state) {
  (void)state;
  char cmd[4096], *err = NULL;
  char *missing = tmp("missing.h5");
  snprintf(cmd, sizeof cmd, "geometry --acts '%s' --model '%s' --out '%s'", missing, t_env("REFGEO_MODEL"), out_none);
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "missing.h5: not an HDF5 file"));
  free(err);
  snprintf(cmd, sizeof cmd, "geometry --acts '%s' --model '%s' --out '%s' --layers 5:40", acts, t_env("REFGEO_MODEL"),
           out_none);
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "layer range 5:40"));
  free(err);
  snprintf(cmd, sizeof cmd, "geometry --acts '%s' --out '%s'", acts, out_none);
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "exactly one of --model"));
  free(err);
  snprintf(cmd, sizeof cmd, "geometry --acts '%s' --model '%s' --out '%s' --refusal-tokens 5,x", acts,
           t_env("REFGEO_MODEL"), out_none);
  assert_int_equal(t_run_cli(cmd, NULL, &err), 1);
  assert_non_null(strstr(err, "--refusal-tokens"));
  free(err);
  free(missing);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reader_matches_h5dump),
      cmocka_unit_test(test_geometry_table),
      cmocka_unit_test(test_carriers_and_migration),
      cmocka_unit_test(test_awk_row_counts),
      cmocka_unit_test(test_directions_file),
      cmocka_unit_test(test_cli_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
