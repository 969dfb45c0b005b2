/* test_capture.c: `refgeo perturb` and `refgeo capture` on SmolLM2-135M
 * (Q4_1 GGUF), with the HDF5 file read back independently of the writer by
 * h5dump (hdf5-tools) and the numbers compared with transformers.
 *
 *  - perturb: the relative change of every perturbed weight has the
 *    requested spread, the token embedding is untouched, Q4_1 d and m of a
 *    block move together, a seed gives the same file and another seed not.
 *  - series: capture (CLI) of base + perturbed (manifest) on 2/2 train and
 *    1/1 val prompts of data/prompts: dataset shapes, TransformerLens hook
 *    names, positions, steps, template name and eoi ids (= the last tokens
 *    of transformers' chat tokenization) from h5dump; layer 0 (the
 *    unperturbed embedding) equal across steps, the last layer not; a rerun
 *    skips both steps.
 *  - sites/float16: two sites stored as float16; resid_post of block L
 *    equals resid_pre of block L+1 (both filled by one pass;
 *    test_capture_passes checks them against one-site captures).
 *  - fixture: capture (library) of 4 of the forward fixture's prompt texts:
 *    the stored token ids equal transformers' apply_chat_template ids and
 *    resid_pre at the last 4 positions equals transformers' hidden states
 *    (tests/fixtures/forward, tools/reference/make_forward_fixtures.py).
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "tensor/dtype.h"
#include "formats/gguf.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

enum { N_LAYERS = 30, D_MODEL = 576, N_POS = 6 /* chatml "<|im_end|>\n<|im_start|>assistant\n" */ };
/* Prompts per train / val split in the series test (small: it also runs
 * under ASan, where the model does ~20 tokens/s). */
enum { N_TRAIN = 2, N_VAL = 1 };

/* Same bound as test_forward (the capture runs the same forward): both sides
 * compute in float32 on identical dequantized weights, so only summation
 * order differs (measured ~1e-6 relative). */
static const double RESID_TOL = 1e-4;

static char *tmp_dir(void) {
  char *d = t_tmp_path("capture");
  assert_int_equal(rg_mkdir_p(d), 0);
  return d;
}

static char *join(const char *a, const char *b) {
  char *p = rg_path_join(a, b);
  assert_non_null(p);
  return p;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected '%s' in:\n%.2000s", needle, hay);
}

/* ---------------------------------------------------------------- perturb */

/* Relative changes w'/w - 1 over the F32 tensors and over the Q4_1 d scales;
 * the largest |m'/m - d'/d| of a Q4_1 block; whether token_embd is kept. */
typedef struct {
  double f32_sum, f32_sq, d_sum, d_sq, worst_dm;
  long long n_f32, n_d;
  bool embd_same;
} perturb_stats;

static perturb_stats compare_ggufs(const char *base, const char *pert) {
  rg_gguf *a = rg_gguf_open(base), *b = rg_gguf_open(pert);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(rg_gguf_n_tensors(a), rg_gguf_n_tensors(b));
  perturb_stats st = {0};
  for (int64_t i = 0; i < rg_gguf_n_tensors(a); i++) {
    const rg_tensor *ta = rg_gguf_tensor(a, i), *tb = rg_gguf_tensor(b, i);
    assert_string_equal(ta->name, tb->name);
    assert_int_equal(ta->nbytes, tb->nbytes);
    if (strcmp(ta->name, "token_embd.weight") == 0) st.embd_same = memcmp(ta->data, tb->data, ta->nbytes) == 0;
    if (ta->type == RG_F32) {
      const float *x = ta->data, *y = tb->data;
      for (size_t k = 0; k < ta->nbytes / 4; k++) {
        if (x[k] == 0) continue;
        double r = y[k] / x[k] - 1;
        st.f32_sum += r, st.f32_sq += r * r, st.n_f32++;
      }
    } else if (ta->type == RG_Q4_1 && strncmp(ta->name, "blk.", 4) == 0) {
      const uint8_t *x = ta->data, *y = tb->data;
      for (size_t k = 0; k + 20 <= ta->nbytes; k += 20) { /* block_q4_1: f16 d, f16 m, 16 bytes */
        uint16_t h[4];
        memcpy(h, x + k, 4);
        memcpy(h + 2, y + k, 4);
        double d0 = rg_fp16_to_fp32(h[0]), m0 = rg_fp16_to_fp32(h[1]);
        double d1 = rg_fp16_to_fp32(h[2]), m1 = rg_fp16_to_fp32(h[3]);
        if (fabs(d0) < 1e-4 || fabs(m0) < 1e-4) continue; /* f16 subnormal range: rounding dominates */
        double r = d1 / d0 - 1;
        st.d_sum += r, st.d_sq += r * r, st.n_d++;
        st.worst_dm = fmax(st.worst_dm, fabs((m1 / m0 - 1) - r));
      }
    }
  }
  rg_gguf_close(a);
  rg_gguf_close(b);
  return st;
}

static char *run_perturb(const char *dir, const char *name, int seed) {
  char *out = join(dir, name);
  char args[2048];
  snprintf(args, sizeof args, "perturb --model '%s' --out '%s' --scale 0.05 --seed %d", t_env("REFGEO_MODEL"), out,
           seed);
  char *err = NULL;
  int rc = t_run_cli(args, NULL, &err);
  if (rc != 0) fail_msg("perturb: %s", err);
  free(err);
  return out;
}

static void test_perturb(void **state) {
  char *dir = tmp_dir();
  char *p7 = run_perturb(dir, "pert.gguf", 7), *p7b = run_perturb(dir, "pert-again.gguf", 7),
       *p8 = run_perturb(dir, "pert-seed8.gguf", 8);
  perturb_stats st = compare_ggufs(t_env("REFGEO_MODEL"), p7);
  double f32_mean = st.f32_sum / st.n_f32, f32_sd = sqrt(st.f32_sq / st.n_f32 - f32_mean * f32_mean);
  double d_mean = st.d_sum / st.n_d, d_sd = sqrt(st.d_sq / st.n_d - d_mean * d_mean);
  print_message("perturb: %lld f32 values mean %.2e sd %.4f; %lld q4_1 d mean %.2e sd %.4f; worst |m-d| %.2e\n",
                st.n_f32, f32_mean, f32_sd, st.n_d, d_mean, d_sd, st.worst_dm);
  /* 1 + 0.05 z with z ~ N(0,1): sd 0.05. With n > 3e4 values the sample sd
   * has a standard error of 0.05/sqrt(2n) < 2e-4 and the mean 0.05/sqrt(n)
   * < 3e-4, so 0.003 / 0.002 are > 10 sigma (q4_1 d adds f16 rounding,
   * relative 2^-11, negligible). */
  assert_true(st.n_f32 > 30000 && st.n_d > 30000);
  assert_true(fabs(f32_sd - 0.05) < 0.003 && fabs(f32_mean) < 0.002);
  assert_true(fabs(d_sd - 0.05) < 0.003 && fabs(d_mean) < 0.002);
  /* d and m get the same factor; each is rounded to f16 separately
   * (relative 2^-11 each, times |1 + r| < 1.3): 2e-3. */
  assert_true(st.worst_dm < 2e-3);
  assert_true(st.embd_same);

  size_t na, nb, nc;
  char *a = rg_read_file(p7, &na), *b = rg_read_file(p7b, &nb), *c = rg_read_file(p8, &nc);
  assert_true(a && b && c && na == nb && na == nc);
  assert_memory_equal(a, b, na);
  assert_true(memcmp(a, c, na) != 0);
  free(a), free(b), free(c);
  unlink(p7b), unlink(p8);
  free(p7), free(p7b), free(p8), free(dir);
}

/* ---------------------------------------------------------------- series */

static char *data_prompts(const char *split) {
  char name[256];
  snprintf(name, sizeof name, "../../data/prompts/%s.json", split);
  return t_fixture_path(name);
}

static void check_shapes(const char *h5, long step) {
  static const char *const splits[] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};
  for (int i = 0; i < 4; i++) {
    char args[256], want[64];
    snprintf(args, sizeof args, "-H -d /step_%ld/acts/%s/resid_pre", step, splits[i]);
    snprintf(want, sizeof want, "( %d, %d, %d, %d )", N_LAYERS, i < 2 ? N_TRAIN : N_VAL, N_POS, D_MODEL);
    char *out = t_h5dump(args, h5);
    assert_contains(out, want);
    assert_contains(out, "H5T_IEEE_F32LE");
    free(out);
  }
}

/* The last N_POS token ids of fixture prompt 0, as h5dump prints them. */
static void fixture_eoi_text(char *buf, size_t n) {
  cJSON *index = t_read_json_fixture("forward/index.json");
  cJSON *ids = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(index, "prompts"), 0), "ids");
  int len = cJSON_GetArraySize(ids);
  size_t at = 0;
  for (int k = len - N_POS; k < len; k++)
    at += (size_t)snprintf(buf + at, n - at, "%s%d", k > len - N_POS ? ", " : "", cJSON_GetArrayItem(ids, k)->valueint);
  cJSON_Delete(index);
}

static void test_series(void **state) {
  char *dir = tmp_dir();
  char *manifest = join(dir, "series.csv"), *h5 = join(dir, "series.h5");
  char *pert = run_perturb(dir, "pert.gguf", 7);
  char csv[2048];
  snprintf(csv, sizeof csv, "step,path\n0,%s\n100,pert.gguf\n", t_env("REFGEO_MODEL"));
  assert_int_equal(rg_write_file_atomic(manifest, csv, strlen(csv)), 0);
  unlink(h5);

  char *ht = data_prompts("harmful_train"), *lt = data_prompts("harmless_train"), *hv = data_prompts("harmful_val"),
       *lv = data_prompts("harmless_val");
  char args[8192];
  snprintf(args, sizeof args,
           "capture --manifest '%s' --out '%s' --harmful-train '%s' --harmless-train '%s' --harmful-val '%s' "
           "--harmless-val '%s' --n-train %d --n-val %d --seed 3 --threads 2",
           manifest, h5, ht, lt, hv, lv, N_TRAIN, N_VAL);
  char *err = NULL;
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("capture: %s", err);
  print_message("%s", err);
  assert_contains(err, "step 0: ");
  assert_contains(err, "step 100: ");
  assert_contains(err, "tokens/s");
  free(err);

  check_shapes(h5, 0);
  check_shapes(h5, 100);
  char *out = t_h5dump("-a /step_0/acts/harmful_train/resid_pre/hook_names", h5);
  assert_contains(out, "\"blocks.0.hook_resid_pre\"");
  assert_contains(out, "\"blocks.29.hook_resid_pre\"");
  assert_true(strstr(out, "blocks.30.") == NULL);
  free(out);
  out = t_h5dump("-a /step_100/acts/harmless_val/resid_pre/positions", h5);
  assert_contains(out, "(0): -6, -5, -4, -3, -2, -1\n");
  free(out);
  out = t_h5dump("-a /step_100/step", h5);
  assert_contains(out, "(0): 100\n");
  free(out);
  out = t_h5dump("-a /step_100/complete", h5);
  assert_contains(out, "(0): 1\n");
  free(out);
  out = t_h5dump("-a /chat_template", h5);
  assert_contains(out, "(0): \"chatml\"");
  free(out);
  char eoi[128];
  fixture_eoi_text(eoi, sizeof eoi);
  out = t_h5dump("-a /eoi_token_ids", h5);
  assert_contains(out, eoi);
  free(out);

  /* perturb keeps token_embd, so layer 0's input (the embedding) is the same
   * at both steps, bit for bit; the last layer's is not. */
  size_t n0, n1;
  float *a0 = t_h5dump_floats(h5, "/step_0/acts/harmful_train/resid_pre", &n0);
  float *a1 = t_h5dump_floats(h5, "/step_100/acts/harmful_train/resid_pre", &n1);
  const size_t per_layer = (size_t)N_TRAIN * N_POS * D_MODEL;
  assert_int_equal(n0, N_LAYERS * per_layer);
  assert_int_equal(n1, n0);
  assert_memory_equal(a0, a1, per_layer * sizeof(float));
  double dd = 0, rr = 0;
  for (size_t i = (N_LAYERS - 1) * per_layer; i < n0; i++) dd += (a1[i] - a0[i]) * (a1[i] - a0[i]), rr += a0[i] * a0[i];
  print_message("layer 29 rel L2 change base -> perturbed: %.3g\n", sqrt(dd / rr));
  assert_true(sqrt(dd / rr) > 1e-3); /* a 5% weight perturbation moves it far more than rounding */
  free(a0), free(a1);

  /* Rerun: both steps are complete and skipped. */
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("capture rerun: %s", err);
  assert_contains(err, "step 0: already captured");
  assert_contains(err, "step 100: already captured");
  assert_true(strstr(err, "tokens/s") == NULL);
  free(err);

  free(ht), free(lt), free(hv), free(lv);
  free(pert), free(manifest), free(h5), free(dir);
}

/* ---------------------------------------------------------------- sites */

/* The values of an h5dump -d dump, malloc'd: each line of the DATA block
 * without its "(i,j,k,l): " index prefix (which counts from the hyperslab
 * start), up to the block's end (attributes follow it). */
static char *dump_values(const char *dump) {
  const char *p = strstr(dump, "DATA {");
  assert_non_null(p);
  const char *end = strchr(p, '}');
  assert_non_null(end);
  char *vals = malloc((size_t)(end - p) + 1), *w = vals;
  assert_non_null(vals);
  while ((p = strstr(p, "): ")) && p < end) {
    p += 3;
    size_t n = strcspn(p, "\n}");
    memcpy(w, p, n);
    w += n;
    p += n;
  }
  *w = '\0';
  return vals;
}

static void test_sites_float16(void **state) {
  char *dir = tmp_dir(), *h5 = join(dir, "sites.h5");
  unlink(h5);
  char *ht = data_prompts("harmful_train"), *lt = data_prompts("harmless_train"), *hv = data_prompts("harmful_val"),
       *lv = data_prompts("harmless_val");
  char args[8192];
  snprintf(args, sizeof args,
           "capture --model '%s' --out '%s' --harmful-train '%s' --harmless-train '%s' --harmful-val '%s' "
           "--harmless-val '%s' --n-train 1 --n-val 1 --threads 2 --float16 --sites resid_post,resid_pre",
           t_env("REFGEO_MODEL"), h5, ht, lt, hv, lv);
  char *err = NULL;
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("capture: %s", err);
  free(err);

  char *out = t_h5dump("-H -d /step_0/acts/harmless_val/resid_post", h5);
  assert_contains(out, "16-bit little-endian floating-point");
  assert_contains(out, "( 30, 1, 6, 576 )");
  free(out);
  out = t_h5dump("-a /step_0/acts/harmless_val/resid_post/hook_names", h5);
  assert_contains(out, "\"blocks.0.hook_resid_post\"");
  free(out);
  /* Both sites round the same float32 values to float16, so the identity
   * holds exactly, value for value. */
  char *post = t_h5dump("-d /step_0/acts/harmless_val/resid_post -s 0,0,0,0 -c 29,1,6,576", h5);
  char *pre = t_h5dump("-d /step_0/acts/harmless_val/resid_pre -s 1,0,0,0 -c 29,1,6,576", h5);
  char *vp = dump_values(post), *vq = dump_values(pre);
  assert_true(strlen(vp) > 29 * 6 * 576); /* at least one character per value */
  assert_string_equal(vp, vq);
  free(vp), free(vq), free(post), free(pre);
  free(ht), free(lt), free(hv), free(lv), free(h5), free(dir);
}

/* ---------------------------------------------------------------- fixture */

/* Parses the next "(a, b, ...)" group of h5dump's vlen output at *P (with
 * -w 0 all rows follow "(0): " on one line, separated by ", "). */
static int parse_vlen_row(const char **p, int32_t *ids, int max) {
  const char *q = strchr(*p, '(');
  assert_non_null(q);
  q++;
  int n = 0;
  while (*q && *q != ')') {
    char *end;
    long v = strtol(q, &end, 10);
    assert_true(end != q && n < max);
    ids[n++] = (int32_t)v;
    q = end;
    while (*q == ',' || *q == ' ') q++;
  }
  *p = q;
  return n;
}

/* Fixture prompts used: two harmful, two harmless, the longest last (4 of
 * 10, to keep the ASan run short). */
static const int PICK[] = {0, 3, 6, 9};

static void test_fixture(void **state) {
  cJSON *index = t_read_json_fixture("forward/index.json");
  cJSON *prompts = cJSON_GetObjectItem(index, "prompts");
  const int n = (int)(sizeof PICK / sizeof PICK[0]), last_k = cJSON_GetObjectItem(index, "last_k")->valueint;
  assert_true(last_k <= N_POS && cJSON_GetArraySize(prompts) > PICK[n - 1]);

  /* The fixture's prompt texts as a refusal_direction-style JSON split. */
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON *pi = cJSON_GetArrayItem(prompts, PICK[i]);
    cJSON_AddStringToObject(o, "instruction", cJSON_GetObjectItem(pi, "text")->valuestring);
    cJSON_AddStringToObject(o, "category", cJSON_GetObjectItem(pi, "kind")->valuestring);
    cJSON_AddItemToArray(arr, o);
  }
  char *json = cJSON_PrintUnformatted(arr);
  cJSON_Delete(arr);
  char *dir = tmp_dir(), *json_path = join(dir, "fixture_prompts.json"), *h5 = join(dir, "fixture.h5");
  assert_int_equal(rg_write_file_atomic(json_path, json, strlen(json)), 0);
  free(json);
  unlink(h5);

  rg_prompt_set *set = rg_prompts_load(json_path);
  assert_non_null(set);
  rg_checkpoint series_item = {0, (char *)t_env("REFGEO_MODEL")};
  rg_checkpoint_series series = {1, &series_item};
  rg_capture_split split = {"fixture", set};
  /* batch 3 over 4 prompts: a full batch and a ragged one. */
  rg_capture_opts o = {.splits = &split, .n_splits = 1, .batch = 3, .threads = 2};
  if (rg_capture_series(&series, h5, &o) != 0) fail_msg("%s", rg_error_get());
  rg_prompts_free(set);

  char *dump = t_h5dump("-d /step_0/prompts/fixture/token_ids", h5);
  const char *row = strstr(dump, "(0): ");
  assert_non_null(row);
  row += strlen("(0): ");
  size_t nv;
  float *acts = t_h5dump_floats(h5, "/step_0/acts/fixture/resid_pre", &nv);
  assert_int_equal(nv, (size_t)N_LAYERS * n * N_POS * D_MODEL);
  double worst = 0;
  for (int p = 0; p < n; p++) {
    cJSON *ids = cJSON_GetObjectItem(cJSON_GetArrayItem(prompts, PICK[p]), "ids");
    int32_t got[512];
    int len = parse_vlen_row(&row, got, 512);
    assert_int_equal(len, cJSON_GetArraySize(ids));
    for (int k = 0; k < len; k++) assert_int_equal(got[k], cJSON_GetArrayItem(ids, k)->valueint);

    char name[64];
    snprintf(name, sizeof name, "forward/resid_base_%d.f32", PICK[p]);
    size_t nr;
    float *ref = t_read_f32(name, &nr); /* [n_layers][last_k][d_model] */
    assert_int_equal(nr, (size_t)N_LAYERS * last_k * D_MODEL);
    for (int l = 0; l < N_LAYERS; l++) {
      double d2 = 0, r2 = 0;
      for (int k = 0; k < last_k; k++) {
        const float *g = acts + (((size_t)l * n + p) * N_POS + (N_POS - last_k + k)) * D_MODEL;
        const float *w = ref + ((size_t)l * last_k + k) * D_MODEL;
        for (int j = 0; j < D_MODEL; j++) d2 += (g[j] - w[j]) * (g[j] - w[j]), r2 += (double)w[j] * w[j];
      }
      double rel = sqrt(d2 / r2);
      worst = fmax(worst, rel);
      if (!(rel <= RESID_TOL)) fail_msg("fixture prompt %d layer %d: resid_pre rel L2 %.3g", PICK[p], l, rel);
    }
    free(ref);
  }
  print_message("fixture: %d prompts, token ids equal, worst resid_pre rel L2 %.3g\n", n, worst);
  free(acts);
  free(dump);
  free(json_path), free(h5), free(dir);
  cJSON_Delete(index);
}

static void test_errors(void **state) {
  char *err = NULL;
  assert_int_equal(t_run_cli("capture --out /nonexistent/x.h5", NULL, &err), 1);
  assert_contains(err, "exactly one of --model, --run-dir, --manifest");
  free(err);
  char args[2048];
  snprintf(args, sizeof args, "capture --model '%s' --out x.h5 --harmful-train /nonexistent/h.json",
           t_env("REFGEO_MODEL"));
  assert_int_equal(t_run_cli(args, NULL, &err), 1);
  assert_contains(err, "/nonexistent/h.json");
  free(err);
  snprintf(args, sizeof args, "capture --model '%s' --out x.h5 --sites resid_pre,resid_bogus", t_env("REFGEO_MODEL"));
  assert_int_equal(t_run_cli(args, NULL, &err), 1);
  assert_contains(err, "--sites: unknown site 'resid_bogus'");
  free(err);
  assert_int_equal(t_run_cli("perturb --model /nonexistent.gguf --out /tmp/x.gguf", NULL, &err), 1);
  assert_contains(err, "/nonexistent.gguf");
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_perturb),
      cmocka_unit_test(test_series),
      cmocka_unit_test(test_sites_float16),
      cmocka_unit_test(test_fixture),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
