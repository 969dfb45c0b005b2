/* test_train_plan: the memory plan (`refgeo train --plan`, adv_ft/train_plan.h).
 *
 * 1. The session walk (engine/session.h) against the real allocator:
 *    a SmolLM2 training session made on the CPU backend grows glibc's heap
 *    (mallinfo2: bytes in use in the arenas plus mmapped chunks; under ASan
 *    its allocator's count of live bytes) by the
 *    walk's backend + host bytes, within the allocator's own overhead (see
 *    the tolerance); the same session on the plan backend is counted at
 *    exactly the walk's backend bytes (a buffer the walk forgot, or one the
 *    plan backend counts wrongly, shows as a difference).
 * 2. The trainer's plan of data/r2d2-smollm2.ini on SmolLM2: parameters,
 *    gradients and AdamW moments against SmolLM2-135M's parameter count
 *    computed by hand from its config (below), the saved activations of a
 *    block and the KV cache from the trainer's caps and the buffer list of
 *    session_internal.h, every byte the plan backend counted attributed,
 *    and the total the sum of its parts.
 * 3. The CLI on Mistral-7B-v0.1's config.json alone (data/shapes): full
 *    fine-tuning's parameters are 4 bytes x 7,241,732,096 (the model's
 *    published parameter count), LoRA's r 64 adapters on q k v o 4 bytes x
 *    54,525,952 (peft's "trainable params" for that config, and by hand
 *    below), LoRA's frozen base on a GPU the bf16 matrices plus float32
 *    norms; neither fits 80 GiB; bad --device values, --device without
 *    --plan and --plan with --out are one-line errors, and nothing is
 *    written.
 */
#include <cjson/cJSON.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adv_ft/train_config.h"
#include "adv_ft/train_plan.h"
#include "adv_ft/trainer.h"
#include "backend/plan.h"
#include "engine/forward.h"
#include "model/model.h"
#include "engine/session.h"
#include "engine/weights.h"
#include "testlib.h"

/* SmolLM2-135M-Instruct's config.json (HuggingFaceTB): hidden 576, 30
 * layers, 9 heads of 64, 3 kv heads, intermediate 1536, vocab 49152, tied
 * embeddings. */
enum { D = 576, L = 30, NH = 9, QD = NH * 64, KVD = 3 * 64, FF = 1536, V = 49152 };
/* Per block q, k, v, o, gate, up, down and two norms; the embedding (tied
 * head) and the final norm: 134,515,008. */
static const long long SMOLLM2_PARAMS =
    (long long)L * ((long long)D * QD + 2LL * D * KVD + (long long)QD * D + 3LL * D * FF + 2LL * D) +
    (long long)V * D + D;

/* ASan's allocator replaces glibc's, whose mallinfo2 then sees nothing;
 * ASan counts the bytes its live blocks were asked for. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

static size_t heap_in_use(void) {
  if (__sanitizer_get_current_allocated_bytes) return __sanitizer_get_current_allocated_bytes();
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

static rg_model *smollm2(void) {
  rg_model *m = rg_model_load(t_env("REFGEO_MODEL"));
  assert_non_null(m);
  assert_int_equal(m->cfg.d_model, D);
  assert_int_equal(m->cfg.n_layers, L);
  return m;
}

static void test_session_walk_is_the_allocation(void **state) {
  (void)state;
  rg_model *m = smollm2();
  const rg_session_opts so = {.max_batch_tokens = 256, .max_logit_rows = 256, .train = true};
  enum { SEQS = 4, CTX = 128 };

  rg_weights *cw = rg_weights_open(m, &(rg_backend_opts){.threads = 1}, RG_WEIGHTS_TILED);
  assert_non_null(cw);
  /* Blocks below 32 MiB (glibc's largest threshold) come from the heap,
   * not from page-rounded maps of their own: the heap's overhead is small
   * enough to see a forgotten host array. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  const size_t before = heap_in_use();
  rg_session *cs = rg_session_new(cw, SEQS, CTX, &so);
  assert_non_null(cs);
  const size_t grown = heap_in_use() - before;
  rg_session_bytes cb;
  rg_session_memory(cs, &cb);
  const size_t walked = cb.backend + cb.host;
  /* glibc's overhead, not counted by the walk: a 16-byte header and up to
   * 15 bytes of alignment per heap chunk, the CPU backend's 16-byte rg_buf
   * records (10 L + 64 allocations bound a training session's), and a page
   * for each of the few blocks over 32 MiB (the logits and their gradient
   * here). The walk's backend half is checked exactly on the plan backend
   * below. */
  const size_t slack = (10 * L + 64) * 48 + 8 * 4112;
  print_message("session: heap grew %zu bytes, walk %zu (backend %zu, host %zu)\n", grown, walked, cb.backend, cb.host);
  assert_true(grown >= walked);
  assert_true(grown - walked < slack);
  rg_session_free(cs);
  rg_weights_free(cw);

  rg_weights *pw = rg_weights_open(m, &(rg_backend_opts){.name = "plan-cpu", .threads = 1}, RG_WEIGHTS_TILED);
  assert_non_null(pw);
  rg_backend *pb = rg_weights_backend(pw);
  rg_plan_set_tag(pb, 1);
  rg_session *ps = rg_session_new(pw, SEQS, CTX, &so);
  assert_non_null(ps);
  rg_session_bytes pbytes;
  rg_session_memory(ps, &pbytes);
  assert_int_equal(rg_plan_bytes(pb, 1), pbytes.backend);
  assert_int_equal(pbytes.backend, cb.backend);
  assert_int_equal(pbytes.host, cb.host);
  /* session_internal.h's layer_acts: x_in, xn1, x_mid, xn2 [T, d], q, att
   * [T, qd], lse [T, n_heads], gate, up [T, d_ff] */
  assert_int_equal(pbytes.saved_layer, (size_t)256 * (4 * D + 2 * QD + NH + 2 * FF) * sizeof(float));
  assert_int_equal(pbytes.kv_cache, (size_t)2 * L * SEQS * CTX * KVD * sizeof(float));
  rg_session_free(ps);
  assert_int_equal(rg_plan_bytes(pb, 1), 0); /* every buffer freed is taken off */
  rg_weights_free(pw);
  rg_model_free(m);
}

/* Every entry of the plan backends' operation table is filled, as the CPU
 * backend's is (an operation added to backend.h and not to the plan
 * backend would be a NULL call). The table is a name and then function
 * pointers only. */
static void test_plan_tables_are_complete(void **state) {
  (void)state;
  const char *names[] = {"cpu", "plan-cpu", "plan-gpu"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    rg_backend *be = rg_backend_new(&(rg_backend_opts){.name = names[k], .threads = 1});
    assert_non_null(be);
    assert_string_equal(rg_backend_name(be), names[k]);
    assert_int_equal(rg_backend_is_plan(be), k > 0);
    const rg_backend_iface *t = be->iface;
    void (*const *fns)(void) = (void (*const *)(void))((const char *)t + sizeof t->name);
    const size_t n = (sizeof *t - sizeof t->name) / sizeof *fns;
    for (size_t i = 0; i < n; i++) assert_non_null(fns[i]);
    rg_backend_free(be);
  }
}

static rg_train_config smollm2_config(void) {
  char *data = t_data_path(""), *ini = t_data_path("r2d2-smollm2.ini");
  rg_train_config c;
  assert_int_equal(rg_train_config_init(&c, data), 0);
  assert_int_equal(rg_train_config_read(&c, ini), 0);
  assert_int_equal(rg_train_config_set(&c, "model", t_env("REFGEO_MODEL")), 0);
  assert_int_equal(rg_train_config_check(&c), 0);
  free(data), free(ini);
  return c;
}

static void test_smollm2_plan(void **state) {
  (void)state;
  rg_train_config c = smollm2_config();
  /* data/r2d2-smollm2.ini's caps */
  const int cases = c.cases_per_step, utility = c.utility_per_step, case_tokens = c.max_case_tokens;
  const int utility_tokens = c.max_utility_tokens, gcg_batch = c.gcg_batch;
  assert_int_equal(case_tokens, 192);
  rg_train_plan p = {0};
  assert_int_equal(rg_train_plan_device(&p, "cpu"), 0);
  char note[256];
  assert_int_equal(rg_trainer_plan(&c, &p, note, sizeof note), 0);
  rg_train_config_free(&c);

  const size_t params = (size_t)SMOLLM2_PARAMS * sizeof(float);
  assert_int_equal(SMOLLM2_PARAMS, 134515008);
  assert_int_equal(p.params, params);
  assert_int_equal(p.frozen, 0);
  assert_int_equal(p.grads, params);
  assert_int_equal(p.moments, 2 * params);
  const size_t T = 2 * (size_t)cases * case_tokens + (size_t)utility * utility_tokens;
  assert_int_equal(p.train.saved_layers, L);
  assert_int_equal(p.train.saved_layer, T * (4 * D + 2 * QD + NH + 2 * FF) * sizeof(float));
  const size_t seqs = 2 * (size_t)cases + utility, ctx = (size_t)(utility_tokens > case_tokens ? utility_tokens : case_tokens);
  assert_int_equal(p.train.kv_cache, 2 * L * seqs * ctx * KVD * sizeof(float));
  /* the candidates' logit rows: gcg_batch targets of at most half a case,
   * each a final-norm row, a logit row and a loss */
  const size_t R = (size_t)gcg_batch * (case_tokens / 2);
  assert_int_equal(p.cand.logits, R * (D + V + 1) * sizeof(float));
  /* every byte the plan backend counted is in a line of the plan */
  assert_int_equal(p.counted[RG_PLAN_TAG_SESSIONS], p.train.backend + p.cand.backend + p.grads);
  assert_int_equal(p.counted[RG_PLAN_TAG_OPTIMIZER], p.moments);
  assert_int_equal(p.backend_total, p.counted[0] + p.counted[1] + p.counted[2]);
  assert_int_equal(p.total, p.backend_total + p.host_sessions + p.host_trainer + p.host_gcg + p.file_map + p.baseline);
  assert_true(p.baseline > 0);
  print_message("SmolLM2 plan on cpu: %zu bytes (%.3f GiB)\n", p.total, (double)p.total / (1 << 30));
}

/* `refgeo train --plan` on the Mistral-7B-v0.1 shapes as JSON. */
static cJSON *plan_7b(const char *mode, const char *device, int recompute) {
  char *ini = t_data_path("r2d2-harmbench.ini"), *model = t_data_path("shapes/mistral-7b-v0.1");
  char args[1024], *out = NULL;
  snprintf(args, sizeof args, "train --plan --config %s --model %s --mode %s --device %s --recompute %d --json", ini,
           model, mode, device, recompute);
  assert_int_equal(t_run_cli(args, &out, NULL), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  free(out), free(ini), free(model);
  return j;
}

static double num(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

static void test_mistral_7b_plans(void **state) {
  (void)state;
  const double mistral = 7241732096.0, norms = 32 * 2 * 4096 + 4096;
  /* r 64 on q [4096 -> 4096], k, v [4096 -> 1024], o [4096 -> 4096]: r (in + out) each, 32 blocks */
  const double adapters = 32.0 * 64 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096));
  assert_true(adapters == 54525952.0);
  cJSON *full = plan_7b("full", "gpu:80G", 1);
  assert_true(num(full, "parameters") == 4 * mistral);
  assert_true(num(full, "gradients") == 4 * mistral);
  assert_true(num(full, "optimizer_state") == 8 * mistral);
  assert_true(num(full, "frozen_weights") == 0);
  assert_true(num(full, "capacity") == 80.0 * (1 << 30));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(full, "fits")));
  cJSON *lora = plan_7b("lora", "gpu:80G", 1);
  assert_true(num(lora, "parameters") == 4 * adapters);
  assert_true(num(lora, "optimizer_state") == 8 * adapters);
  assert_true(num(lora, "frozen_weights") == 2 * (mistral - norms) + 4 * norms);
  /* with activations recomputed (the ini's recompute = 1, HarmBench's
   * gradient checkpointing) LoRA fits one 80 GiB device: 50.3 GiB */
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lora, "fits")));
  /* the saved activations are the same whatever trains: with recompute one
   * block input (d floats) per token and block; the micro-batch is 2 x 256
   * test-case tokens and 8 x 2048 utility tokens */
  const double T = 2 * 256 + 8 * 2048, d = 4096, nh = 32, qd = nh * 128, ff = 14336;
  assert_true(num(lora, "activations_saved") == num(full, "activations_saved"));
  assert_true(num(full, "activations_per_layer") == T * d * 4);
  assert_true(num(full, "activations_saved") == 32 * num(full, "activations_per_layer"));
  /* without: every block keeps 4 d + 2 qd + n_heads + 2 d_ff floats per token */
  cJSON *kept = plan_7b("lora", "gpu:80G", 0);
  assert_true(num(kept, "activations_per_layer") == T * (4 * d + 2 * qd + nh + 2 * ff) * 4);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(kept, "fits")));
  cJSON_Delete(full);
  cJSON_Delete(lora);
  cJSON_Delete(kept);
}

static void expect_error(const char *args, const char *needle) {
  char *err = NULL;
  assert_int_not_equal(t_run_cli(args, NULL, &err), 0);
  assert_non_null(strstr(err, needle));
  assert_int_equal(strchr(err, '\n') - err + 1, (long)strlen(err)); /* one line */
  free(err);
}

/* recompute auto with nothing fitting one rank names the fewest
 * sequence-parallel ranks that fit, and says when none does. LoRA on the
 * Mistral-7B shapes with one utility sequence of 32768 tokens: 91.6 GiB per
 * rank alone, with the activations and KV cache the excess, which 2 ranks
 * (Ulysses: 8 KV heads) split; full fine-tuning: the weights, gradients and
 * moments alone (108 GiB) exceed 80 GiB on every rank. */
static void test_fewest_ranks(void **state) {
  (void)state;
  char *ini = t_data_path("r2d2-harmbench.ini"), *model = t_data_path("shapes/mistral-7b-v0.1");
  char args[1024];
  snprintf(args, sizeof args,
           "train --plan --config %s --model %s --mode lora --device gpu:80G --recompute auto --utility-per-step 1 "
           "--max-utility-tokens 32768",
           ini, model);
  expect_error(args, "sp = 2 fits, each rank on a GPU of its own");
  snprintf(args, sizeof args, "train --plan --config %s --model %s --mode full --device gpu:80G --recompute auto", ini,
           model);
  expect_error(args, "no sequence-parallel degree up to 64 fits either");
  free(ini), free(model);
}

static void test_cli_errors(void **state) {
  (void)state;
  char *ini = t_data_path("r2d2-harmbench.ini"), *model = t_data_path("shapes/mistral-7b-v0.1");
  char *out_dir = t_tmp_path("train_plan_out");
  char args[1024];
  const char *bad[] = {"gpu:", "gpu:80", "gpu:-1G", "gpu:80GB", "tpu:80G", "80G"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(args, sizeof args, "train --plan --config %s --model %s --device %s", ini, model, bad[i]);
    expect_error(args, "--device");
  }
  snprintf(args, sizeof args, "train --config %s --model %s --device gpu:80G --out %s", ini, model, out_dir);
  expect_error(args, "--plan");
  snprintf(args, sizeof args, "train --plan --config %s --model %s --out %s", ini, model, out_dir);
  expect_error(args, "writes nothing");
  struct stat st;
  assert_int_not_equal(stat(out_dir, &st), 0);
  snprintf(args, sizeof args, "train --plan --config %s --model %s/missing", ini, model);
  expect_error(args, "missing");
  free(ini), free(model), free(out_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_tables_are_complete),
      cmocka_unit_test(test_session_walk_is_the_allocation),
      cmocka_unit_test(test_smollm2_plan),
      cmocka_unit_test(test_mistral_7b_plans),
      cmocka_unit_test(test_fewest_ranks),
      cmocka_unit_test(test_cli_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
