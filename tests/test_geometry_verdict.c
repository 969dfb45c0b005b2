/* test_geometry_verdict: the carrier verdict against models with a planted
 * answer, and its parts against hand-computed references.
 *
 * The planted model (a 12-layer Llama of width 32, byte-level tokenizer):
 * every weight is zero but these. The embedding of every token has 1 in
 * dimension C (a constant) and small seeded values in dimensions 3..31; the
 * marker byte '#' adds 1 in dimension M. Block P's attention has zero
 * queries and keys, so each position averages the (RMS-normalized) values
 * of its prefix, and its value/output maps read dimension M and write
 * GAIN times it into dimension U. The unembedding gives the refusal token
 * R (an added token "I'm sorry") the logit (4 x_U - 2 x_C) / rms(x) and the
 * byte 'O' the logit 2 x_C / rms(x); every other logit is 0. So a prompt
 * dense in markers is refused ("I'm sorryI'm sorry..."), one without is
 * answered "OOOO...", and from block P+1 on the eoi positions of harmful
 * and harmless prompts differ exactly along U: the difference-in-means
 * direction is U at every eoi position of every layer above P and zero
 * below. Ablating U removes the refusal; adding it to a harmless prompt
 * causes one; ablating U changes no harmless logit (KL 0). Every candidate
 * above P ties, and RD's loop order then selects (pos -n_pos, layer P + 1):
 * the planted answer. A random direction ablated everywhere barely moves
 * the refusal, so the carrier beats the null.
 *
 * Prompts: harmful ones are dense in '#' (refused) except a few with one
 * marker (not refused: the filter must drop them); harmless ones have none.
 *
 * Series (checkpoint manifests): late (P = 7: layer 8 of 12, depth 0.67)
 * then early (P = 1: layer 2, depth 0.17) must give "migration"; late twice
 * "no migration"; a model with GAIN 0 twice "undetermined" with no refusal
 * to carry.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#include "geometry/auroc.h"
#include "geometry/bootstrap.h"
#include "geometry/refusal_tokens.h"
#include "geometry/verdict.h"
#include "geometry/verdict_plan.h"
#include "formats/safetensors_write.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/rng.h"

enum {
  D = 32, N_LAYERS = 12, N_HEADS = 4, N_KV = 2, HEAD_DIM = 8, FF = 64, VOCAB = 300,
  DIM_C = 0, DIM_M = 1, DIM_U = 2,
  TOK_MARK = '#', TOK_COMPLY = 'O', TOK_REFUSE = 259, /* the first id after the bytes and ChatML's 3 specials */
  LATE_P = 7, EARLY_P = 1
};

/* ---------------------------------------------------------------- the planted model */

typedef struct {
  char name[96];
  float *data;
  int64_t rows, cols; /* cols = 0: a vector of rows */
} ptensor;

static void set_tensor(ptensor *t, const char *name, int64_t rows, int64_t cols) {
  snprintf(t->name, sizeof t->name, "%s", name);
  t->rows = rows;
  t->cols = cols;
  t->data = calloc((size_t)(rows * (cols ? cols : 1)), sizeof(float));
  assert_non_null(t->data);
}

static float *at(ptensor *t, int64_t r, int64_t c) { return &t->data[r * (t->cols ? t->cols : 1) + c]; }

static void write_weights(const char *dir, int plant, float gain) {
  enum { PER_LAYER = 9, N_T = 3 + PER_LAYER * N_LAYERS };
  ptensor *t = calloc(N_T, sizeof *t);
  int n = 0;
  ptensor *emb = &t[n++];
  set_tensor(emb, "model.embed_tokens.weight", VOCAB, D);
  uint64_t state = 7;
  for (int v = 0; v < VOCAB; v++) {
    *at(emb, v, DIM_C) = 1;
    if (v == TOK_MARK) *at(emb, v, DIM_M) = 1;
    for (int k = 3; k < D; k++) *at(emb, v, k) = 0.1f * ((float)(rg_splitmix64(&state) >> 40) / (float)(1 << 24) - 0.5f);
  }
  for (int l = 0; l < N_LAYERS; l++) {
    char name[96];
    const char *parts[PER_LAYER] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                    "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                                    "mlp.down_proj"};
    const int64_t shape[PER_LAYER][2] = {{D, 0},  {N_HEADS * HEAD_DIM, D}, {N_KV * HEAD_DIM, D}, {N_KV * HEAD_DIM, D},
                                         {D, N_HEADS * HEAD_DIM}, {D, 0}, {FF, D}, {FF, D}, {D, FF}};
    for (int p = 0; p < PER_LAYER; p++) {
      snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, parts[p]);
      ptensor *x = &t[n++];
      set_tensor(x, name, shape[p][0], shape[p][1]);
      if (shape[p][1] == 0)
        for (int k = 0; k < D; k++) x->data[k] = 1; /* RMSNorm weights */
      if (l == plant && p == 3) *at(x, 0, DIM_M) = 1;    /* v: kv head 0, value dim 0 reads M */
      if (l == plant && p == 4) *at(x, DIM_U, 0) = gain; /* o: head 0's value dim 0 -> U */
    }
  }
  ptensor *norm = &t[n++];
  set_tensor(norm, "model.norm.weight", D, 0);
  for (int k = 0; k < D; k++) norm->data[k] = 1;
  ptensor *head = &t[n++];
  set_tensor(head, "lm_head.weight", VOCAB, D);
  *at(head, TOK_REFUSE, DIM_U) = 4;
  *at(head, TOK_REFUSE, DIM_C) = -2;
  *at(head, TOK_COMPLY, DIM_C) = 2;
  rg_tensor rt[N_T];
  for (int i = 0; i < n; i++) {
    rt[i] = (rg_tensor){.name = t[i].name, .type = RG_F32, .n_dims = t[i].cols ? 2 : 1, .data = t[i].data};
    for (int k = 0; k < RG_MAX_DIMS; k++) rt[i].ne[k] = 1;
    rt[i].ne[0] = t[i].cols ? t[i].cols : t[i].rows;
    if (t[i].cols) rt[i].ne[1] = t[i].rows;
    rt[i].nbytes = (size_t)(t[i].rows * (t[i].cols ? t[i].cols : 1)) * sizeof(float);
  }
  char *path = rg_path_join(dir, "model.safetensors");
  assert_int_equal(rg_safetensors_write(path, rt, n, NULL, NULL, NULL), 0);
  free(path);
  for (int i = 0; i < n; i++) free(t[i].data);
  free(t);
}

/* The refusal token's text in tokenizer.json: an added (not special) token,
 * so that replies decode to text HarmBench's substrings call a refusal. */
static void add_refusal_token(const char *dir) {
  char *path = rg_path_join(dir, "tokenizer.json");
  size_t len;
  char *text = rg_read_file(path, &len);
  assert_non_null(text);
  cJSON *root = cJSON_Parse(text);
  free(text);
  assert_non_null(root);
  cJSON *vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "vocab");
  cJSON_DeleteItemFromObject(vocab, "<|unused_0|>");
  cJSON_AddNumberToObject(vocab, "I'm sorry", TOK_REFUSE);
  cJSON *a = cJSON_CreateObject();
  cJSON_AddNumberToObject(a, "id", TOK_REFUSE);
  cJSON_AddStringToObject(a, "content", "I'm sorry");
  cJSON_AddBoolToObject(a, "single_word", false);
  cJSON_AddBoolToObject(a, "lstrip", false);
  cJSON_AddBoolToObject(a, "rstrip", false);
  cJSON_AddBoolToObject(a, "normalized", false);
  cJSON_AddBoolToObject(a, "special", false);
  cJSON_AddItemToArray(cJSON_GetObjectItem(root, "added_tokens"), a);
  char *out = cJSON_Print(root);
  assert_int_equal(rg_write_file_atomic(path, out, strlen(out)), 0);
  free(out);
  cJSON_Delete(root);
  free(path);
}

/* A planted model directory under REFGEO_TMP (made once per process). */
static char *planted_model(const char *name, int plant, float gain) {
  char rel[128];
  snprintf(rel, sizeof rel, "planted-%ld/%s", (long)getpid(), name);
  char *dir = t_tmp_path(rel);
  if (rg_is_dir(dir)) return dir;
  assert_int_equal(rg_mkdir_p(dir), 0);
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %d, "
           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
           "\"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 512, "
           "\"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
           "\"hidden_act\": \"silu\", \"bos_token_id\": null, \"eos_token_id\": 258}",
           D, FF, N_LAYERS, N_HEADS, N_KV, HEAD_DIM, VOCAB);
  snprintf(rel, sizeof rel, "planted-%ld/%s.config.json", (long)getpid(), name);
  char *cfg_path = t_write_tmp(rel, cfg, strlen(cfg));
  char args[2048];
  snprintf(args, sizeof args, "synth-model --config '%s' --out '%s' --dtype f32", cfg_path, dir);
  char *err = NULL;
  int rc = t_run_cli(args, NULL, &err);
  if (rc != 0) fail_msg("synth-model: %s", err);
  free(err);
  free(cfg_path);
  write_weights(dir, plant, gain);
  add_refusal_token(dir);
  return dir;
}

/* ---------------------------------------------------------------- prompts */

enum { N_TRAIN = 12, N_TRAIN_LIGHT = 3, N_VAL = 6, N_VAL_LIGHT = 1 };
/* N_min of the planted series: every refused harmful val prompt (5 of 6)
 * must be kept, as the train split's 9 of 12 are */
enum { N_MIN = N_VAL - N_VAL_LIGHT };

static const char *WORDS[] = {"tell", "me", "how", "to", "make", "a", "thing", "for", "the", "party", "today", "now"};

/* Prompt I of a class: harmful ones dense in markers, LIGHT ones with a
 * single marker, harmless ones with none. */
static void prompt_text(char *out, size_t len, int i, int harmful, int light) {
  size_t at = 0;
  for (int w = 0; w < 6; w++) {
    at += (size_t)snprintf(out + at, len - at, "%s%s", w ? " " : "", WORDS[(i + w) % 12]);
    if (harmful && !light) at += (size_t)snprintf(out + at, len - at, " ####");
  }
  if (harmful && light) snprintf(out + at, len - at, " #");
}

static char *write_prompts(const char *name, int n, int n_light, int harmful) {
  cJSON *arr = cJSON_CreateArray();
  char text[256];
  for (int i = 0; i < n; i++) {
    prompt_text(text, sizeof text, i, harmful, harmful && i >= n - n_light);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "instruction", text);
    cJSON_AddItemToArray(arr, o);
  }
  char *s = cJSON_Print(arr);
  cJSON_Delete(arr);
  char rel[128];
  snprintf(rel, sizeof rel, "planted-%ld/%s.json", (long)getpid(), name);
  char *path = t_write_tmp(rel, s, strlen(s));
  free(s);
  return path;
}

/* ---------------------------------------------------------------- a series run */

typedef struct {
  rg_csv *mig;
  cJSON *verdict;
  char *out;
} series_result;

static char *g_prompt_flags;

/* Captures and scores the two-checkpoint series (step 0: A, step 100: B). */
/* Steps 0 and 100 (models A and B) captured with the prompt files of FLAGS
 * and scored with EXTRA flags. */
static series_result run_series_with(const char *name, const char *a, const char *b, const char *extra,
                                     const char *flags) {
  char rel[128];
  snprintf(rel, sizeof rel, "planted-%ld/%s.manifest.csv", (long)getpid(), name);
  char manifest[4096];
  snprintf(manifest, sizeof manifest, "step,path\n0,%s\n100,%s\n", a, b);
  char *mpath = t_write_tmp(rel, manifest, strlen(manifest));
  snprintf(rel, sizeof rel, "planted-%ld/%s.h5", (long)getpid(), name);
  char *acts = t_tmp_path(rel);
  snprintf(rel, sizeof rel, "planted-%ld/%s-geometry", (long)getpid(), name);
  series_result r = {.out = t_tmp_path(rel)};
  char args[8192], *err = NULL;
  snprintf(args, sizeof args, "capture --manifest '%s' %s --out '%s' --threads 1", mpath, flags, acts);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("capture: %s", err);
  free(err);
  err = NULL;
  snprintf(args, sizeof args,
           "geometry --acts '%s' --manifest '%s' --refusal-tokens auto --n-min %d --bootstrap 200 --threads 1 --out "
           "'%s' %s",
           acts, mpath, N_MIN, r.out, extra ? extra : "");
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("geometry: %s", err);
  print_message("%s", err);
  free(err);
  char *mig = rg_path_join(r.out, "migration.csv"), *ver = rg_path_join(r.out, "verdict.json");
  r.mig = rg_csv_read(mig);
  assert_non_null(r.mig);
  size_t len;
  char *text = rg_read_file(ver, &len);
  assert_non_null(text);
  r.verdict = cJSON_Parse(text);
  assert_non_null(r.verdict);
  free(text);
  free(mig);
  free(ver);
  free(mpath);
  free(acts);
  return r;
}

static series_result run_series(const char *name, const char *a, const char *b, const char *extra) {
  return run_series_with(name, a, b, extra, g_prompt_flags);
}

static void series_free(series_result *r) {
  rg_csv_free(r->mig);
  cJSON_Delete(r->verdict);
  free(r->out);
}

static int col(const rg_csv *t, const char *name) {
  int c = rg_csv_col(t, name);
  if (c < 0) fail_msg("no column %s", name);
  return c;
}

static const char *cell(const rg_csv *t, int row, const char *name) { return t->rows[row][col(t, name)]; }

static const char *verdict_of(const series_result *r) {
  return cJSON_GetObjectItem(r->verdict, "verdict")->valuestring;
}

static char *g_late, *g_early, *g_none;
static char *g_harmful_val; /* its prompts, which the planted models refuse */

static int setup(void **state) {
  g_late = planted_model("late", LATE_P, 2.0f);
  g_early = planted_model("early", EARLY_P, 2.0f);
  g_none = planted_model("none", LATE_P, 0.0f);
  char *ht = write_prompts("harmful_train", N_TRAIN, N_TRAIN_LIGHT, 1);
  char *lt = write_prompts("harmless_train", N_TRAIN, 0, 0);
  char *hv = write_prompts("harmful_val", N_VAL, N_VAL_LIGHT, 1);
  char *lv = write_prompts("harmless_val", N_VAL, 0, 0);
  size_t len = 4 * strlen(ht) + 256;
  g_prompt_flags = malloc(len);
  snprintf(g_prompt_flags, len, "--harmful-train '%s' --harmless-train '%s' --harmful-val '%s' --harmless-val '%s'",
           ht, lt, hv, lv);
  g_harmful_val = hv;
  free(ht), free(lt), free(lv);
  return 0;
}

static int teardown(void **state) {
  free(g_late), free(g_early), free(g_none), free(g_prompt_flags), free(g_harmful_val);
  return 0;
}

/* ---------------------------------------------------------------- end to end */

static void test_planted_migration(void **state) {
  series_result r = run_series("late-early", g_late, g_early, "--transfer-layers");
  assert_int_equal(r.mig->n_rows, 2);
  /* the planted layers: P + 1 */
  assert_string_equal(cell(r.mig, 0, "status"), "carrier");
  assert_string_equal(cell(r.mig, 0, "best_layer"), "8");
  assert_string_equal(cell(r.mig, 0, "label"), "late");
  assert_string_equal(cell(r.mig, 1, "status"), "carrier");
  assert_string_equal(cell(r.mig, 1, "best_layer"), "2");
  assert_string_equal(cell(r.mig, 1, "label"), "early");
  /* the probe of the checkpoint's own refusals reads them from the planted layer on */
  assert_string_equal(cell(r.mig, 0, "probe_layer"), "8");
  assert_string_equal(cell(r.mig, 1, "probe_layer"), "2");
  for (int s = 0; s < 2; s++) {
    /* the filter keeps exactly the dense harmful prompts and every harmless one */
    assert_int_equal(atoi(cell(r.mig, s, "harmful_train_kept")), N_TRAIN - N_TRAIN_LIGHT);
    assert_int_equal(atoi(cell(r.mig, s, "harmful_train_total")), N_TRAIN);
    assert_int_equal(atoi(cell(r.mig, s, "harmless_train_kept")), N_TRAIN);
    assert_int_equal(atoi(cell(r.mig, s, "harmful_val_kept")), N_VAL - N_VAL_LIGHT);
    assert_int_equal(atoi(cell(r.mig, s, "harmless_val_kept")), N_VAL);
    /* auto tokens: the one token every refusal opens with */
    char want[16];
    snprintf(want, sizeof want, "%d", TOK_REFUSE);
    assert_string_equal(cell(r.mig, s, "refusal_tokens"), want);
    assert_true(fabs(atof(cell(r.mig, s, "score_auroc")) - 1.0) < 1e-12);
    /* the carrier beats the null by far: ablating U removes the refusal */
    assert_true(atof(cell(r.mig, s, "bypass")) < atof(cell(r.mig, s, "null_bypass_p5")));
    /* ties at every resample: the interval is the planted layer */
    assert_true(atof(cell(r.mig, s, "layer_lo")) == atof(cell(r.mig, s, "best_layer")));
    assert_true(atof(cell(r.mig, s, "layer_hi")) == atof(cell(r.mig, s, "best_layer")));
  }
  assert_string_equal(verdict_of(&r), "migration");
  /* transfer: both planted models carry the same direction U, at different
   * blocks, so each step's carrier ablated in the other model removes its
   * refusal as well (below that model's null), and a step's own row repeats
   * its migration.csv scores (same prompts, same tokens) */
  char *tpath = rg_path_join(r.out, "transfer.csv");
  rg_csv *t = rg_csv_read(tpath);
  assert_non_null(t);
  int n_carrier = 0, n_layer_rows[2] = {0, 0};
  for (size_t i = 0; i < t->n_rows; i++) {
    int to = strcmp(cell(t, (int)i, "to_step"), "0") == 0 ? 0 : 1;
    if (strcmp(cell(t, (int)i, "carrier"), "0") == 0) {
      /* --transfer-layers: each layer's best direction. The late model's
       * directions are zero up to its planted block (nothing is ablated or
       * added: the base score), U above it; the early model's are U from
       * layer 2. So at the early layers step 100's direction removes
       * the refusal in both models while step 0's does nothing: the
       * picture of a carrier that moved. */
      int from = strcmp(cell(t, (int)i, "from_step"), "0") == 0 ? 0 : 1, layer = atoi(cell(t, (int)i, "layer"));
      double bypass = atof(cell(t, (int)i, "bypass")), p5 = atof(cell(r.mig, to, "null_bypass_p5"));
      bool planted = layer > (from == 0 ? LATE_P : EARLY_P);
      if (planted != (bypass < p5))
        fail_msg("transfer from step %d layer %d into step %d: bypass %g against null p5 %g", from, layer, to, bypass,
                 p5);
      n_layer_rows[from]++;
      continue;
    }
    n_carrier++;
    assert_true(atof(cell(t, (int)i, "bypass")) < atof(cell(r.mig, to, "null_bypass_p5")));
    if (strcmp(cell(t, (int)i, "from_step"), cell(t, (int)i, "to_step")) == 0) {
      assert_true(atof(cell(t, (int)i, "bypass")) == atof(cell(r.mig, to, "bypass")));
      assert_true(atof(cell(t, (int)i, "induce")) == atof(cell(r.mig, to, "induce")));
    }
  }
  assert_int_equal(n_carrier, 4);
  /* every layer of both steps into both models (a zero direction scores, as the base) */
  assert_int_equal(n_layer_rows[0], 2 * N_LAYERS);
  assert_int_equal(n_layer_rows[1], 2 * N_LAYERS);
  rg_csv_free(t);
  free(tpath);
  series_free(&r);
}

/* The sequence score (log p("I'm sorry") - log p("O"), one token each in the
 * planted tokenizer) finds the same planted layers and verdict. */
static void test_planted_migration_sequence(void **state) {
  series_result r = run_series("late-early-seq", g_late, g_early,
                               "--refusal-score sequence --refusal-string \"I'm sorry\" --compliance-string O");
  char want[32];
  snprintf(want, sizeof want, "seq:%d|%d", TOK_REFUSE, TOK_COMPLY);
  for (int s = 0; s < 2; s++) {
    assert_string_equal(cell(r.mig, s, "status"), "carrier");
    assert_string_equal(cell(r.mig, s, "refusal_tokens"), want);
    assert_int_equal(atoi(cell(r.mig, s, "harmful_train_kept")), N_TRAIN - N_TRAIN_LIGHT);
  }
  assert_string_equal(cell(r.mig, 0, "best_layer"), "8");
  assert_string_equal(cell(r.mig, 1, "best_layer"), "2");
  assert_string_equal(verdict_of(&r), "migration");
  series_free(&r);
}

static void test_planted_no_migration(void **state) {
  series_result r = run_series("late-late", g_late, g_late, NULL);
  assert_string_equal(cell(r.mig, 0, "best_layer"), "8");
  assert_string_equal(cell(r.mig, 1, "best_layer"), "8");
  assert_string_equal(verdict_of(&r), "no migration");
  series_free(&r);
}

static void test_planted_no_refusal(void **state) {
  series_result r = run_series("none", g_none, g_none, NULL);
  assert_string_equal(cell(r.mig, 0, "status"), "no refusal to carry");
  assert_string_equal(cell(r.mig, 1, "status"), "no refusal to carry");
  assert_string_equal(verdict_of(&r), "undetermined");
  assert_non_null(strstr(cJSON_GetObjectItem(r.verdict, "reason")->valuestring, "no refusal to carry"));
  series_free(&r);
  /* a step without refusal before a scored one: the transfer pass has one
   * direction to score, the scored step's in its own model (it once
   * ablated the unscored step's missing direction and crashed) */
  r = run_series("none-late", g_none, g_late, NULL);
  assert_string_equal(cell(r.mig, 0, "status"), "no refusal to carry");
  assert_string_equal(cell(r.mig, 1, "status"), "carrier");
  char *tpath = rg_path_join(r.out, "transfer.csv");
  rg_csv *t = rg_csv_read(tpath);
  assert_non_null(t);
  assert_int_equal(t->n_rows, 1);
  assert_string_equal(cell(t, 0, "from_step"), cell(t, 0, "to_step"));
  rg_csv_free(t);
  free(tpath);
  series_free(&r);
}

/* Harmless val prompts the model refuses (the harmful val file given as
 * both: 1 of 6 is not refused, under N_min): too little contrast to score,
 * said as such, not as "no refusal". */
static void test_planted_harmless_refused(void **state) {
  const char *hv = strstr(g_prompt_flags, "--harmless-val");
  assert_non_null(hv);
  char flags[8192];
  snprintf(flags, sizeof flags, "%.*s--harmless-val '%s'", (int)(hv - g_prompt_flags), g_prompt_flags, g_harmful_val);
  series_result r = run_series_with("harmless-refused", g_late, g_late, NULL, flags);
  assert_string_equal(cell(r.mig, 0, "status"), "harmless prompts refused");
  assert_string_equal(cell(r.mig, 0, "harmless_val_kept"), "1");
  assert_string_equal(verdict_of(&r), "undetermined");
  assert_non_null(strstr(cJSON_GetObjectItem(r.verdict, "reason")->valuestring, "step 0: harmless prompts refused"));
  series_free(&r);
}

/* ---------------------------------------------------------------- the parts */

static void test_refusal_tokens_fit(void **state) {
  /* refusals open with 7 (x4), 9 (x3), 5 (x2), 3 (x1); complied replies do
   * not count; 90% of 10 refusals needs 7, 9 and 5 (9 of 10) */
  const int32_t first[] = {7, 9, 7, 5, 3, 7, 9, 9, 5, 7, 1, 1, 1};
  const bool refused[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  int32_t ids[4];
  double covered;
  assert_int_equal(rg_refusal_tokens_fit(first, refused, 13, 0.9, ids, 4, &covered), 3);
  assert_int_equal(ids[0], 7);
  assert_int_equal(ids[1], 9);
  assert_int_equal(ids[2], 5);
  assert_true(fabs(covered - 0.9) < 1e-15);
  /* a tie in counts takes the smaller id first */
  const int32_t tie[] = {8, 6};
  const bool both[] = {1, 1};
  assert_int_equal(rg_refusal_tokens_fit(tie, both, 2, 0.5, ids, 4, &covered), 1);
  assert_int_equal(ids[0], 6);
  /* no refusal: no token */
  const bool none[] = {0, 0};
  assert_int_equal(rg_refusal_tokens_fit(tie, none, 2, 0.9, ids, 4, &covered), 0);
  assert_true(isnan(covered));
  /* more tokens needed than allowed: the first MAX_IDS, and the coverage
   * they reach (7 and 9 open 7 of 10) */
  assert_int_equal(rg_refusal_tokens_fit(first, refused, 13, 1.0, ids, 2, &covered), 2);
  assert_int_equal(ids[0], 7);
  assert_int_equal(ids[1], 9);
  assert_true(fabs(covered - 0.7) < 1e-15);
  /* a token that opens as many answers as refusals is passed over: 4 opens
   * 3 refusals and 3 answers, 2 opens 2 refusals; 90% of 5 is out of reach,
   * so 2 alone (2 of 5) */
  const int32_t mixed[] = {4, 4, 4, 4, 4, 4, 2, 2};
  const bool judged[] = {1, 1, 1, 0, 0, 0, 1, 1};
  assert_int_equal(rg_refusal_tokens_fit(mixed, judged, 8, 0.9, ids, 4, &covered), 1);
  assert_int_equal(ids[0], 2);
  assert_true(fabs(covered - 0.4) < 1e-15);
}

static void test_percentile_matches_numpy(void **state) {
  /* numpy.percentile([3, 1, 4, 1, 5, 9, 2, 6], q) with the default linear
   * interpolation: q = 5 -> 1.0, 2.5 -> 1.0, 50 -> 3.5, 97.5 -> 8.475, 90 -> 6.9 */
  const double x[] = {3, 1, 4, 1, 5, 9, 2, 6};
  assert_true(fabs(rg_percentile(x, 8, 5) - 1.0) < 1e-12);
  assert_true(fabs(rg_percentile(x, 8, 2.5) - 1.0) < 1e-12);
  assert_true(fabs(rg_percentile(x, 8, 50) - 3.5) < 1e-12);
  assert_true(fabs(rg_percentile(x, 8, 97.5) - 8.475) < 1e-12);
  assert_true(fabs(rg_percentile(x, 8, 90) - 6.9) < 1e-12);
  assert_true(fabs(rg_percentile(x, 1, 97.5) - 3.0) < 1e-12);
}

static void test_auroc_split(void **state) {
  /* Mann-Whitney by hand: positives {0.9, 0.1} against {0.8, 0.4} win 2 of
   * 4 pairs; positives {0.9, 0.8} win all 4 */
  const double x[] = {0.9, 0.1, 0.8, 0.4};
  const bool half[] = {1, 1, 0, 0}, all[] = {1, 0, 1, 0}, none[] = {0, 0, 0, 0};
  int np, nn;
  assert_true(fabs(rg_auroc_split(x, half, 4, &np, &nn) - 0.5) < 1e-15);
  assert_int_equal(np, 2);
  assert_int_equal(nn, 2);
  assert_true(fabs(rg_auroc_split(x, all, 4, &np, &nn) - 1.0) < 1e-15);
  assert_true(isnan(rg_auroc_split(x, none, 4, &np, &nn)));
  assert_int_equal(nn, 4);
}

static rg_verdict_step carrier_at(long step, int layer, double lo, double hi) {
  return (rg_verdict_step){.step = step, .status = RG_STEP_CARRIER, .layer = layer, .layer_lo = lo, .layer_hi = hi,
                           .erank_sigma = 1.25};
}

static void test_verdict_rules(void **state) {
  rg_depth_thresholds b = rg_depth_thresholds_default();
  rg_verdict v;
  /* 24 layers: late from 16, early below 8 */
  rg_verdict_step moved[] = {carrier_at(0, 18, 17, 19), carrier_at(50, 17, 16, 18), carrier_at(250, 4, 3, 6)};
  rg_verdict_decide(moved, 3, 24, &b, &v);
  assert_string_equal(v.verdict, "migration");
  assert_int_equal(v.from_step, 0);
  assert_int_equal(v.to_step, 250);
  rg_verdict_step overlapping[] = {carrier_at(0, 18, 5, 19), carrier_at(250, 4, 3, 6)};
  rg_verdict_decide(overlapping, 2, 24, &b, &v);
  assert_string_equal(v.verdict, "undetermined");
  assert_non_null(strstr(v.reason, "overlap"));
  rg_verdict_step stays[] = {carrier_at(0, 18, 17, 19), carrier_at(250, 20, 19, 21)};
  rg_verdict_decide(stays, 2, 24, &b, &v);
  assert_string_equal(v.verdict, "no migration");
  rg_verdict_step upward[] = {carrier_at(0, 4, 3, 5), carrier_at(250, 20, 19, 21)};
  rg_verdict_decide(upward, 2, 24, &b, &v);
  assert_string_equal(v.verdict, "no migration");
  assert_string_equal(v.reason, "no late-band carrier is followed by an early-band one: step 0 layer 4 (early), "
                                "step 250 layer 20 (late)");
  /* the first carrier in the middle band, a later late one, then an early
   * one: the late-then-early pair decides, not the first step */
  rg_verdict_step mid_first[] = {carrier_at(0, 12, 11, 13), carrier_at(50, 18, 17, 18), carrier_at(250, 4, 3, 6)};
  rg_verdict_decide(mid_first, 3, 24, &b, &v);
  assert_string_equal(v.verdict, "migration");
  assert_int_equal(v.from_step, 50);
  assert_int_equal(v.to_step, 250);
  /* a move into the middle band with overlapping intervals is no late-to-
   * early move: it leaves nothing undetermined */
  rg_verdict_step mid_wobble[] = {carrier_at(0, 17, 16, 18), carrier_at(50, 15, 14, 17), carrier_at(250, 17, 16, 18)};
  rg_verdict_decide(mid_wobble, 3, 24, &b, &v);
  assert_string_equal(v.verdict, "no migration");
  /* late, early, and back to late: not a lasting move */
  rg_verdict_step back[] = {carrier_at(0, 18, 17, 19), carrier_at(50, 4, 3, 6), carrier_at(250, 18, 17, 19)};
  rg_verdict_decide(back, 3, 24, &b, &v);
  assert_string_equal(v.verdict, "undetermined");
  assert_non_null(strstr(v.reason, "not a lasting move"));
  /* a carrier found in under half the resamples is not a carrier */
  rg_verdict_step unstable[] = {carrier_at(0, 18, 17, 19), carrier_at(250, 4, 3, 6)};
  unstable[1].status = RG_STEP_UNSTABLE;
  rg_verdict_decide(unstable, 2, 24, &b, &v);
  assert_string_equal(v.verdict, "undetermined");
  assert_string_equal(v.reason,
                      "a carrier at 1 of 2 steps (step 250: carrier in under half the resamples): a move needs two");
  rg_verdict_step one[] = {carrier_at(0, 18, 17, 19),
                           {.step = 250, .status = RG_STEP_BELOW_NULL, .layer = 3, .layer_lo = NAN, .layer_hi = NAN}};
  rg_verdict_decide(one, 2, 24, &b, &v);
  assert_string_equal(v.verdict, "undetermined");
  assert_string_equal(v.reason, "a carrier at 1 of 2 steps (step 250: nothing beats the null): a move needs two");
  /* Lan et al.'s claims on the moved series (steps 0, 50, 250) */
  rg_lan_claim c[RG_LAN_CLAIMS];
  rg_verdict_decide(moved, 3, 24, &b, &v);
  rg_lan_claims_check(moved, 3, 24, &b, &v, c);
  assert_string_equal(c[0].outcome, "matched");
  assert_string_equal(c[1].outcome, "matched");
  assert_string_equal(c[2].outcome, "matched");
  assert_string_equal(c[3].outcome, "not testable");
  rg_verdict_decide(stays, 2, 24, &b, &v);
  rg_lan_claims_check(stays, 2, 24, &b, &v, c);
  assert_string_equal(c[1].outcome, "contradicted"); /* step 250's carrier is late */
}

static void test_plan_pinning(void **state) {
  rg_verdict_plan p = rg_verdict_plan_default();
  char *dir = t_tmp_path("plan-pin");
  rg_mkdir_p(dir);
  char *sum = rg_path_join(dir, "plan.sha256");
  remove(sum);
  assert_int_equal(rg_verdict_plan_pin(&p, dir, false), 0);
  assert_int_equal(rg_verdict_plan_pin(&p, dir, false), 0); /* the same plan again */
  /* the file holds sha256sum's line for plan.ini: check it with sha256sum */
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cd '%s' && sha256sum --check --status plan.sha256", dir);
  assert_int_equal(system(cmd), 0);
  rg_verdict_plan q = p;
  assert_int_equal(rg_verdict_plan_set(&q, "kl_max", "0.2", "test"), 0);
  assert_int_equal(rg_verdict_plan_pin(&q, dir, false), -1);
  assert_non_null(strstr(rg_error_get(), "another plan"));
  assert_int_equal(rg_verdict_plan_pin(&q, dir, true), 0);
  /* bad values: one line each */
  assert_int_equal(rg_verdict_plan_set(&q, "kl_max", "0", "--kl-max"), -1);
  assert_int_equal(rg_verdict_plan_set(&q, "kl_max", "-1", "--kl-max"), -1);
  assert_int_equal(rg_verdict_plan_set(&q, "refusal_tokens", "sometimes", "--refusal-tokens"), -1);
  assert_int_equal(rg_verdict_plan_set(&q, "induce_rule", "max", "--induce-rule"), -1);
  assert_int_equal(rg_verdict_plan_set(&q, "colour", "red", "plan.ini [verdict]"), -1);
  free(sum);
  free(dir);
}

static void test_cli_bad_plans(void **state) {
  char rel[128], args[8192], *err = NULL;
  snprintf(rel, sizeof rel, "planted-%ld", (long)getpid());
  char *dir = t_tmp_path(rel); /* this process's: nothing left from an earlier run */
  /* N_min above the captured harmful train prompts (12) */
  snprintf(args, sizeof args, "capture '%s' %s --out '%s/bad.h5' --threads 1", g_late, g_prompt_flags, dir);
  assert_int_equal(t_run_cli(args, NULL, &err), 0);
  free(err);
  const char *bad[] = {"--n-min 13",         "--n-min 7",         "--kl-max 0",
                       "--kl-max -0.5",      "--refusal-tokens bogus", "--induce-rule max",
                       "--refusal-score logprob"};
  const char *says[] = {"n_min 13 is more than the 12 harmful_train prompts",
                        "n_min 7 is more than the 6 harmful_val prompts",
                        "--kl-max",
                        "--kl-max",
                        "--refusal-tokens",
                        "--induce-rule",
                        "--refusal-score: unknown refusal score 'logprob'"};
  for (int i = 0; i < 7; i++) {
    snprintf(args, sizeof args, "geometry --acts '%s/bad.h5' '%s' --out '%s/bad-%d' %s", dir, g_late, dir, i, bad[i]);
    err = NULL;
    assert_int_not_equal(t_run_cli(args, NULL, &err), 0);
    assert_non_null(strstr(err, says[i]));
    assert_true(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    snprintf(rel, sizeof rel, "%s/bad-%d/verdict.json", dir, i);
    assert_false(rg_path_exists(rel)); /* nothing written as a result */
    free(err);
  }
  /* a plan changed between runs is refused; --start-over accepts it */
  snprintf(args, sizeof args,
           "geometry --acts '%s/bad.h5' '%s' --out '%s/replan' --refusal-tokens auto --bootstrap 10 --null-size 2 "
           "--max-val 2 --n-min %d",
           dir, g_late, dir, N_MIN);
  err = NULL;
  assert_int_equal(t_run_cli(args, NULL, &err), 0);
  free(err);
  char again[8300];
  snprintf(again, sizeof again, "%s --kl-max 0.5", args);
  err = NULL;
  assert_int_not_equal(t_run_cli(again, NULL, &err), 0);
  assert_non_null(strstr(err, "another plan"));
  free(err);
  snprintf(again, sizeof again, "%s --kl-max 0.5 --start-over", args);
  err = NULL;
  assert_int_equal(t_run_cli(again, NULL, &err), 0);
  free(err);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusal_tokens_fit),
      cmocka_unit_test(test_percentile_matches_numpy),
      cmocka_unit_test(test_auroc_split),
      cmocka_unit_test(test_verdict_rules),
      cmocka_unit_test(test_plan_pinning),
      cmocka_unit_test(test_planted_migration),
      cmocka_unit_test(test_planted_migration_sequence),
      cmocka_unit_test(test_planted_no_migration),
      cmocka_unit_test(test_planted_no_refusal),
      cmocka_unit_test(test_planted_harmless_refused),
      cmocka_unit_test(test_cli_bad_plans),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
