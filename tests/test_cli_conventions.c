/* test_cli_conventions: the conventions every refgeo subcommand keeps
 * (tools/cli.h), run from a directory that holds nothing of refgeo's:
 *   - each error is one line "refgeo CMD: ..." and exit status 1;
 *   - bad counts get that one line: 0 or negative --batch (capture took 0 on
 *     old main), a count that overflows int, --max-new-tokens 2147483647
 *     (old main's generate computed n_ids + max_new in int: a negative
 *     context), a prompt plus new tokens beyond the model's context
 *     (nothing capped it at max_ctx), attack's --batch whose session sizes
 *     (batch * 128 tokens) overflow int;
 *   - MODEL is taken positionally or as --model, with the same result;
 *   - --json prints one JSON object on stdout, also for capture, geometry and
 *     attack (old main had no --json there).
 * The context limit is SmolLM2-135M-Instruct's: 8192 positions (its
 * config.json max_position_embeddings, the GGUF's llama.context_length).
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

static char g_dir[1024]; /* REFGEO_TMP/cli_conventions-PID, the working directory */
static char g_model[1024], g_behaviors[1200];

static int setup(void **state) {
  snprintf(g_dir, sizeof g_dir, "%s/cli_conventions-%ld", t_env("REFGEO_TMP"), (long)getpid());
  snprintf(g_model, sizeof g_model, "%s", t_env("REFGEO_MODEL"));
  snprintf(g_behaviors, sizeof g_behaviors, "%s/harmbench/harmbench_behaviors_text_val.csv", t_env("REFGEO_DATA"));
  if (rg_mkdir_p(g_dir) < 0 || chdir(g_dir) != 0) return -1;
  /* the data folder must be found from the executable, not from here */
  return unsetenv("REFGEO_DATA");
}

static int teardown(void **state) {
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs ARGS, which must fail with one stderr line starting "refgeo CMD: "
 * (CMD = the first word of ARGS) and containing NEEDLE. The exit status is
 * 1, except for repro, whose "cannot compare" is 2 (cmd_repro.c). */
static void expect_error(const char *args, const char *needle) {
  char *out = NULL, *err = NULL, prefix[64];
  int rc = t_run_cli(args, &out, &err);
  snprintf(prefix, sizeof prefix, "refgeo %.*s: ", (int)strcspn(args, " "), args);
  int want = strncmp(args, "repro ", 6) == 0 ? 2 : 1;
  if (rc != want) fail_msg("refgeo %.200s: exit %d (expected %d): %s", args, rc, want, err);
  const char *nl = strchr(err, '\n');
  if (!nl || nl[1] != '\0') fail_msg("refgeo %.200s: not one line: %s", args, err);
  if (strncmp(err, prefix, strlen(prefix)) != 0) fail_msg("refgeo %.200s: expected prefix '%s': %s", args, prefix, err);
  if (!strstr(err, needle)) fail_msg("refgeo %.200s: expected '%s' in: %s", args, needle, err);
  free(out), free(err);
}

/* Runs ARGS, which must succeed; returns its stdout (caller frees). */
static char *expect_ok(const char *args) {
  char *out = NULL, *err = NULL;
  if (t_run_cli(args, &out, &err) != 0) fail_msg("refgeo %.300s: %s", args, err);
  free(err);
  return out;
}

/* stdout that must be exactly one JSON object; the caller deletes it. */
static cJSON *parse_object(char *out, const char *what) {
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(out, &end, false);
  if (!cJSON_IsObject(j)) fail_msg("%s: stdout is not a JSON object: %.500s", what, out);
  end += strspn(end, " \t\r\n");
  if (*end) fail_msg("%s: more than one JSON value on stdout: %.500s", what, out);
  free(out);
  return j;
}

static void test_every_command_names_itself(void **state) {
  static const char *const COMMANDS[] = {"info",     "tokenize", "generate", "logits", "synth-model", "capture",
                                         "perturb",  "geometry", "repro",    "asr",    "attack",      "classify",
                                         "train",    "report",   "export",   "run"};
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
    char args[128], needle[128];
    snprintf(args, sizeof args, "%s --no-such-flag", COMMANDS[i]);
    snprintf(needle, sizeof needle, "unknown flag '--no-such-flag' (see refgeo %s --help)", COMMANDS[i]);
    expect_error(args, needle);
    /* and --help carries a worked example of it */
    snprintf(args, sizeof args, "%s --help", COMMANDS[i]);
    snprintf(needle, sizeof needle, "example: refgeo %s ", COMMANDS[i]);
    char *out = expect_ok(args);
    if (!strstr(out, needle)) fail_msg("refgeo %s --help has no '%s'", COMMANDS[i], needle);
    free(out);
  }
}

/* --device: an unknown name is refused before any work, naming what this
 * build has; a GPU backend whose device is absent (a GPU build on a machine
 * without one) fails in one line when the model would load; --device cpu
 * runs; info --devices lists cpu (and no model is needed). */
static void test_device_flag(void **state) {
  char args[1200];
  snprintf(args, sizeof args, "generate %s --device nope --prompt Hi", g_model);
  expect_error(args, "unknown device 'nope' (this build has: cpu");
  snprintf(args, sizeof args, "capture %s --device cpu:0 --out x.h5", g_model);
  expect_error(args, "unknown device 'cpu:0'");
  if (rg_gpu_backend_name() && rg_gpu_device_count() == 0) {
    snprintf(args, sizeof args, "generate %s --device %s --prompt Hi", g_model, rg_gpu_backend_name());
    expect_error(args, "device 0 of 0 found");
  }
  snprintf(args, sizeof args, "generate %s --device cpu --max-new-tokens 2 --prompt Hi", g_model);
  free(expect_ok(args));
  char *out = expect_ok("info --devices");
  if (strncmp(out, "cpu ", 4) != 0) fail_msg("info --devices: %s", out);
  free(out);
  cJSON *j = parse_object(expect_ok("info --devices --json"), "info --devices --json");
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
  assert_string_equal(cJSON_GetObjectItem(first, "device")->valuestring, "cpu");
  const cJSON *isa = cJSON_GetObjectItem(first, "fast_decode"); /* the 8-bit kernels, or null */
  assert_true(cJSON_IsNull(isa) ||
              (cJSON_IsString(isa) && (strcmp(isa->valuestring, "amx") == 0 || strcmp(isa->valuestring, "avx512") == 0 ||
                                       strcmp(isa->valuestring, "avx2") == 0)));
  cJSON_Delete(j);
  /* REFGEO_MAX_ISA caps them: none is the float32 path; an unknown cap is one line */
  assert_int_equal(setenv("REFGEO_MAX_ISA", "none", 1), 0);
  j = parse_object(expect_ok("info --devices --json"), "info --devices --json");
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0), "fast_decode")));
  cJSON_Delete(j);
  assert_int_equal(setenv("REFGEO_MAX_ISA", "avx9", 1), 0);
  expect_error("info --devices", "REFGEO_MAX_ISA: unknown value 'avx9'");
  unsetenv("REFGEO_MAX_ISA");
}

/* The version CMakeLists.txt's project() states, one line on stdout. */
static void test_version(void **state) {
  char *out = expect_ok("--version");
  assert_string_equal(out, "refgeo " REFGEO_VERSION "\n");
  free(out);
}

static void test_bad_counts(void **state) {
  const char *m = g_model, *b = g_behaviors;
  static const struct {
    const char *fmt; /* {M} the model, {B} the behaviors CSV */
    const char *needle;
  } CASES[] = {
      {"capture '{M}' --out acts.h5 --batch 0", "--batch: 0 is not positive"},
      {"capture '{M}' --out acts.h5 --batch -3", "--batch: -3 is not positive"},
      {"asr '{M}' --behaviors '{B}' --out asr --batch 0", "--batch: 0 is not positive"},
      {"asr '{M}' --behaviors '{B}' --out asr --batch -1", "--batch: -1 is not positive"},
      {"attack '{M}' --behaviors '{B}' --out cases.json --batch 0", "--batch: 0 is not positive"},
      {"classify --classifier refusal-rd --csv '{B}' --column Behavior --batch 0", "--batch: 0 is not positive"},
      /* 2^31 does not fit an int: refused by the parser, not wrapped */
      {"capture '{M}' --out acts.h5 --batch 2147483648", "--batch expects an integer, got '2147483648'"},
      {"generate '{M}' --prompt hi --max-new-tokens 99999999999",
       "--max-new-tokens expects an integer, got '99999999999'"},
      /* batch * 128 session tokens must fit an int: 2^31 / 128 = 16777216 */
      {"attack '{M}' --behaviors '{B}' --out cases.json --batch 16777216", "--batch: 16777216 is too large"},
      {"generate '{M}' --prompt hi --max-new-tokens -1", "--max-new-tokens: -1 is negative"},
      {"generate '{M}' --prompt hi --max-new-tokens 2147483647",
       "+ 2147483647 new tokens exceed the model's context of 8192 tokens"},
      /* one prompt token + 8192 new is one position too many */
      {"generate '{M}' --prompt hi --max-new-tokens 8192", "+ 8192 new tokens exceed the model's context of 8192"},
      {"asr '{M}' --behaviors '{B}' --out asr --limit 1 --max-new-tokens 2147483647",
       "+ 2147483647 new tokens exceed the model's context of 8192 tokens"},
      {"geometry --acts acts.h5 '{M}' --out geo --max-val -1", "--max-val: '-1' is not a whole number"},
      {"generate '{M}' --model '{M}' --prompt hi", "MODEL given twice"},
      {"capture '{M}' --run-dir . --out acts.h5", "exactly one of --model, --run-dir, --manifest"},
  };
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    char args[4096];
    size_t k = 0;
    for (const char *p = CASES[i].fmt; *p && k < sizeof args - 1; p++) {
      const char *with = strncmp(p, "{M}", 3) == 0 ? m : strncmp(p, "{B}", 3) == 0 ? b : NULL;
      if (!with) {
        args[k++] = *p;
        continue;
      }
      k += (size_t)snprintf(args + k, sizeof args - k, "%s", with);
      p += 2;
    }
    args[k < sizeof args ? k : sizeof args - 1] = '\0';
    expect_error(args, CASES[i].needle);
  }
  assert_false(rg_path_exists("acts.h5")); /* refused before anything was written */
  assert_false(rg_path_exists("asr/asr.csv"));
}

/* A prompt longer than the context: "hello" repeated 9000 times is at least
 * 9000 tokens in any tokenizer that keeps " hello" one token or more. */
static void test_prompt_beyond_context(void **state) {
  size_t n = 9000, len = strlen("logits '' --prompt ''") + strlen(g_model) + 6 * n + 1;
  char *args = malloc(len);
  assert_non_null(args);
  int k = snprintf(args, len, "logits '%s' --prompt '", g_model);
  for (size_t i = 0; i < n; i++) k += snprintf(args + k, len - (size_t)k, "hello ");
  snprintf(args + k, len - (size_t)k, "'");
  expect_error(args, "+ 0 new tokens exceed the model's context of 8192 tokens");
  free(args);
}

/* MODEL positionally and as --model give the same output. */
static void test_model_positional_or_flag(void **state) {
  static const char *const FORMS[][2] = {
      {"info '%s' --json", "info --model '%s' --json"},
      {"tokenize '%s' 'Hello world'", "tokenize --model '%s' 'Hello world'"},
      {"logits '%s' --prompt 'Hello' --top 3 --threads 2 --json", "logits --model '%s' --prompt 'Hello' --top 3 --threads 2 --json"},
  };
  for (size_t i = 0; i < sizeof FORMS / sizeof FORMS[0]; i++) {
    char a[2048], b[2048];
    snprintf(a, sizeof a, FORMS[i][0], g_model);
    snprintf(b, sizeof b, FORMS[i][1], g_model);
    char *out_a = expect_ok(a), *out_b = expect_ok(b);
    assert_true(strlen(out_a) > 0);
    assert_string_equal(out_a, out_b);
    free(out_a), free(out_b);
  }
}

/* capture, geometry and attack print one JSON object with --json, from a
 * directory away from the repository (capture's default prompt files come
 * from the data folder beside the executable). */
static void test_json_summaries(void **state) {
  char args[4096];
  snprintf(args, sizeof args,
           "capture '%s' --out acts.h5 --n-train 4 --n-val 2 --batch 4 --threads 2 --json", g_model);
  cJSON *c = parse_object(expect_ok(args), "capture --json");
  assert_string_equal(cJSON_GetObjectItem(c, "out")->valuestring, "acts.h5");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "steps")), 1);
  const cJSON *prompts = cJSON_GetObjectItem(c, "prompts");
  assert_int_equal(cJSON_GetObjectItem(prompts, "harmful_train")->valueint, 4);
  assert_int_equal(cJSON_GetObjectItem(prompts, "harmless_val")->valueint, 2);
  cJSON_Delete(c);
  assert_true(rg_path_exists("acts.h5"));

  snprintf(args, sizeof args, "geometry --acts acts.h5 '%s' --out geo --layers 4:5 --max-val 1 --n-min 2 "
           "--threads 2 --json",
           g_model);
  cJSON *g = parse_object(expect_ok(args), "geometry --json");
  assert_string_equal(cJSON_GetObjectItem(g, "out")->valuestring, "geo");
  const cJSON *f;
  cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "files")) {
    char path[256];
    snprintf(path, sizeof path, "geo/%s", f->valuestring);
    if (!rg_path_exists(path)) fail_msg("geometry --json lists %s, which was not written", path);
  }
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "files")), 13);
  cJSON_Delete(g);

  snprintf(args, sizeof args,
           "attack '%s' --behaviors '%s' --out cases.json --steps 1 --limit 1 --search-width 4 --top-k 4 --batch 4 "
           "--threads 2 --json",
           g_model, g_behaviors);
  cJSON *a = parse_object(expect_ok(args), "attack --json");
  const cJSON *results = cJSON_GetObjectItem(a, "results");
  assert_int_equal(cJSON_GetArraySize(results), 1);
  const cJSON *r0 = cJSON_GetArrayItem(results, 0);
  assert_int_equal(cJSON_GetObjectItem(r0, "steps")->valueint, 1);
  assert_true(cJSON_IsString(cJSON_GetObjectItem(r0, "behavior_id")));
  cJSON_Delete(a);
  assert_true(rg_path_exists("cases.json"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_command_names_itself),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_device_flag),
      cmocka_unit_test(test_bad_counts),
      cmocka_unit_test(test_prompt_beyond_context),
      cmocka_unit_test(test_model_positional_or_flag),
      cmocka_unit_test(test_json_summaries),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
