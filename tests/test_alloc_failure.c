/* test_alloc_failure: loading SmolLM2 with each of its allocations failing in
 * turn (issue 17, "Allocation failure").
 *
 * alloc_fail.c (linked with --wrap, see alloc_fail.h for exactly what counts
 * as an allocation event) numbers the events of one rg_model_load. For the
 * GGUF (REFGEO_MODEL), for the same model as a Hugging Face directory, and
 * for a sharded directory (test_hf_sharded), the test loads once to count the events, N_total, then loads again with
 * event N failing, for every N in 1..N_total. Each of those loads must
 * return NULL with a one-line error that names the file and says that memory
 * ran out (not that the file is bad), free every block it allocated (af_live
 * back where it was; under ASan, LeakSanitizer also checks PCRE2's and
 * libc's blocks at exit) and not crash. The one exception is
 * pcre2_jit_compile, whose failure the tokenizer survives by design (it
 * falls back to the interpreter): that load must succeed and tokenize as the
 * unfailed one does. Load N_total + 1 must succeed with N_total events.
 *
 * The Hugging Face directory is SmolLM2-135M-Instruct's: its config.json
 * (as published on the Hub), random bf16 weights of those shapes written by
 * `refgeo synth-model` (loading never reads weight values, only the header),
 * and tokenizer.json / tokenizer_config.json written here from the GGUF's
 * tokenizer (the 49152 tokens, the 48900 merges, the control tokens as
 * special added tokens, the pre-tokenizer's splits) and its chat template
 * by refgeo's exporter (tokenizer/tokenizer_export.h).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"
#include "engine/hf_write.h"
#include "testlib.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"

/* config.json of HuggingFaceTB/SmolLM2-135M-Instruct on the Hugging Face Hub. */
static const char *SMOLLM2_CONFIG =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 576,"
    " \"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, \"is_llama_config\": true,"
    " \"max_position_embeddings\": 8192, \"model_type\": \"llama\", \"num_attention_heads\": 9,"
    " \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pad_token_id\": 2, \"pretraining_tp\": 1,"
    " \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, \"rope_scaling\": null, \"rope_theta\": 100000,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\","
    " \"use_cache\": true, \"vocab_size\": 49152}";

/* Most allocation events one load may make (see walk). */
enum { MAX_EVENTS = 2000 };

/* Text whose ids show that a tokenizer works (digits, words, a special). */
static const char *PROBE = "<|im_start|>user\nHello, world! 12345 caf\xc3\xa9<|im_end|>";

/* ---------------------------------------------------------------- the HF directory */

static void write_json(const char *dir, const char *name, cJSON *j) {
  if (rg_hf_write_json(dir, name, j) != 0) fail_msg("%s", rg_error_get());
  cJSON_Delete(j);
}

/* tokenizer.json and tokenizer_config.json of SmolLM2, its GGUF's tokenizer
 * and chat template written out by refgeo's exporter (the same files
 * `refgeo export` writes; test_model_checkpoint checks them against
 * transformers). */
static void write_tokenizer_files(const char *gguf_path, const char *dir) {
  rg_gguf *g = rg_gguf_open(gguf_path);
  if (!g) fail_msg("%s", rg_error_get());
  rg_tokenizer *t = rg_tokenizer_from_gguf(g);
  if (!t) fail_msg("%s", rg_error_get());
  char *tpl = rg_gguf_dup_str(g, "tokenizer.chat_template");
  assert_non_null(tpl);
  cJSON *tok = NULL, *cfg = NULL;
  if (rg_tokenizer_export(t, tpl, &tok, &cfg) != 0) fail_msg("%s", rg_error_get());
  write_json(dir, "tokenizer.json", tok);
  write_json(dir, "tokenizer_config.json", cfg);
  free(tpl);
  rg_tokenizer_free(t);
  rg_gguf_close(g);
}

/* REFGEO_TMP/alloc_failure-PID/SmolLM2-135M-Instruct, written once. */
static char *make_hf_dir(const char *gguf_path) {
  char rel[128];
  snprintf(rel, sizeof rel, "alloc_failure-%ld", (long)getpid());
  char *base = t_tmp_path(rel), *dir = rg_path_join(base, "SmolLM2-135M-Instruct");
  char *config = rg_path_join(base, "config.json");
  assert_int_equal(rg_mkdir_p(base), 0);
  assert_int_equal(rg_write_file_atomic(config, SMOLLM2_CONFIG, strlen(SMOLLM2_CONFIG)), 0);
  char args[2048], *err = NULL;
  snprintf(args, sizeof args, "synth-model --config '%s' --out '%s'", config, dir);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("refgeo %s: %s", args, err);
  free(err);
  write_tokenizer_files(gguf_path, dir); /* over synth-model's stand-in tokenizer */
  free(config);
  free(base);
  return dir;
}

static void remove_hf_dir(char *dir) {
  static const char *FILES[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"};
  for (size_t k = 0; k < sizeof FILES / sizeof FILES[0]; k++) {
    char *p = rg_path_join(dir, FILES[k]);
    unlink(p);
    free(p);
  }
  rmdir(dir);
  *strrchr(dir, '/') = '\0';
  char *config = rg_path_join(dir, "config.json");
  unlink(config);
  free(config);
  rmdir(dir);
  free(dir);
}

/* ---------------------------------------------------------------- the walk */

/* PROBE's ids under M's tokenizer (malloc'd), *n their count. */
static int32_t *probe_ids(const rg_model *m, int *n) {
  int32_t *ids = NULL;
  if (rg_tokenize(m->tokenizer, PROBE, strlen(PROBE), true, false, &ids, n) != 0) fail_msg("%s", rg_error_get());
  return ids;
}

/* Loads PATH with event FAIL_AT failing (0: none); *EVENTS gets the number
 * of events the load made. */
static rg_model *load_failing(const char *path, long fail_at, long *events) {
  rg_error_clear();
  af_arm(fail_at);
  rg_model *m = rg_model_load(path);
  *events = af_disarm();
  return m;
}

static void walk(const char *path) {
  const long before = af_live();
  long total;
  rg_model *m = load_failing(path, 0, &total);
  if (!m) fail_msg("%s: %s", path, rg_error_get());
  int n_ref;
  int32_t *ref = probe_ids(m, &n_ref);
  rg_model_free(m);
  const long live = af_live(); /* what every load must come back to */
  assert_int_equal(live, before + 1); /* REF */
  /* The walk costs N_total loads. SmolLM2 loads in 641 (GGUF) and 351 (HF)
   * events; one allocation per token or per merge again (49152 tokens,
   * 48900 merges) would turn seconds into hours, so that fails here. */
  if (total > MAX_EVENTS) fail_msg("%s: a load makes %ld allocation events (at most %d expected)", path, total, MAX_EVENTS);

  const double t0 = rg_now_seconds();
  long jit_failures = 0;
  for (long n = 1; n <= total; n++) {
    long events;
    m = load_failing(path, n, &events);
    const char *kind = af_failed_kind();
    if (!kind) fail_msg("%s: event %ld never came (this load made %ld events, the first %ld)", path, n, events, total);
    const char *msg = rg_error_get();
    if (m && strcmp(kind, "pcre2_jit_compile") == 0) {
      int n_ids;
      int32_t *ids = probe_ids(m, &n_ids);
      assert_int_equal(n_ids, n_ref);
      assert_memory_equal(ids, ref, sizeof *ids * (size_t)n_ref);
      free(ids);
      rg_model_free(m);
      jit_failures++;
    } else if (m) {
      fail_msg("%s: event %ld (%s) failed, yet the load succeeded", path, n, kind);
    } else if (!*msg || strchr(msg, '\n') || !strstr(msg, path)) {
      fail_msg("%s: event %ld (%s) failed with an error that is empty, not one line, or not about the file: '%s'",
               path, n, kind, msg);
    } else if (!strstr(msg, "memory")) {
      fail_msg("%s: event %ld (%s) failed with an error that does not say memory ran out: '%s'", path, n, kind, msg);
    }
    if (af_live() != live)
      fail_msg("%s: event %ld (%s) failed and %ld blocks leaked; error: %s", path, n, kind, af_live() - live, msg);
  }
  const double walk_s = rg_now_seconds() - t0;

  long events;
  m = load_failing(path, total + 1, &events);
  if (!m) fail_msg("%s: load %ld (no event fails) failed: %s", path, total + 1, rg_error_get());
  assert_null(af_failed_kind());
  assert_int_equal(events, total);
  rg_model_free(m);
  free(ref);
  assert_int_equal(af_live(), before);
  fprintf(stderr, "%s: %ld allocation events, each failed in turn in %.1f s (%ld pcre2_jit_compile failures survived)\n",
          path, total, walk_s, jit_failures);
}

static void test_gguf(void **state) {
  (void)state;
  walk(t_env("REFGEO_MODEL"));
}

static void test_hf_dir(void **state) {
  (void)state;
  char *dir = make_hf_dir(t_env("REFGEO_MODEL"));
  /* The directory must be SmolLM2: the same config and tokenizer as the GGUF. */
  rg_model *hf = rg_model_load(dir), *gguf = rg_model_load(t_env("REFGEO_MODEL"));
  if (!hf || !gguf) fail_msg("%s", rg_error_get());
  const rg_config *a = &hf->cfg, *b = &gguf->cfg;
  assert_int_equal(a->n_layers, b->n_layers);
  assert_int_equal(a->d_model, b->d_model);
  assert_int_equal(a->d_ff, b->d_ff);
  assert_int_equal(a->n_heads, b->n_heads);
  assert_int_equal(a->n_kv_heads, b->n_kv_heads);
  assert_int_equal(a->vocab_size, b->vocab_size);
  assert_int_equal(hf->n_tensors, gguf->n_tensors);
  int n_hf, n_gguf;
  int32_t *ids_hf = probe_ids(hf, &n_hf), *ids_gguf = probe_ids(gguf, &n_gguf);
  assert_int_equal(n_hf, n_gguf);
  assert_memory_equal(ids_hf, ids_gguf, sizeof *ids_hf * (size_t)n_hf);
  free(ids_hf);
  free(ids_gguf);
  rg_model_free(hf);
  rg_model_free(gguf);
  walk(dir);
  remove_hf_dir(dir);
}

/* SmolLM2 is one model.safetensors; the sharded form (an index and several
 * shards) is walked on the tiny Mistral model that synth-model splits into
 * 60 KB shards. */
static void test_hf_sharded(void **state) {
  (void)state;
  char *dir = t_hf_tiny("mistral_f16"), *index = rg_path_join(dir, "model.safetensors.index.json");
  assert_true(rg_path_exists(index));
  walk(dir);
  free(index);
  free(dir);
}

int main(void) {
  af_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gguf),
      cmocka_unit_test(test_hf_dir),
      cmocka_unit_test(test_hf_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
