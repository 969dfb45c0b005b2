/* test_train: `refgeo train` on a tiny Qwen2 model (tests/fixtures/hf_tiny
 * qwen2_bf16, 2 layers, d 64, a 300-token chatml tokenizer): exact resume
 * after SIGKILL at five places, and bad input.
 *
 * 1. Exact resume. A reference run of 4 updates (2 micro-batches each,
 *    GCG on 2 of 3 pool entries, a pool reset at updates 2 and 4, a state
 *    after every update, checkpoints 0 2 4 in float32) is compared with
 *    runs killed by SIGKILL (util/fault.h, REFGEO_KILL_AT) at
 *      update            inside update 3, after its GCG, before backward;
 *      checkpoint-write  inside checkpoint-2, config and tokenizer written,
 *                        no tensors yet;
 *      state-write       inside state 2, params.f32 written, moments not;
 *      state-rename      after state 3 is in place, state 2 not yet removed;
 *      optimizer         after update 4's AdamW step, before its log,
 *                        state and checkpoint;
 *    and then continued with --resume on as many threads; and in LoRA mode
 *    (rank 4 on q, v, gate) one kill inside update 3. After each kill,
 *    everything visible is whole: each checkpoint-N loads with refgeo's
 *    loader, each state/step-N holds its three files. After the resume,
 *    the final parameters (state/step-4/params.f32) and checkpoints 2 and 4
 *    are bitwise those of the reference run: same data, same draws, same
 *    kernels on the same threads, so any difference is a resume bug (a
 *    lost RNG state, a pool or optimizer step not restored, a data cursor
 *    off by one), not rounding.
 * 2. Checkpoints reload with refgeo's own loader: checkpoint-0 (float32)
 *    holds exactly the base model's parameters, checkpoint-4 exactly the
 *    trained float32 parameters of state/step-4 (the optimizer's own
 *    copies), tensor by tensor in rg_weights order.
 * 3. Bad input: a missing key, an unknown key, a value of the wrong type, a
 *    LoRA target that does not exist, a behaviors file without targets, an
 *    unwritable run dir, --resume on a run dir of another config, an
 *    unknown flag, a new run over an existing one, a damaged state (a
 *    meta.json that is not JSON, a short params.f32): exit 1, one line
 *    naming the key or file, and the existing run dir untouched.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/checkpoints.h"
#include "model/model.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/run_lock.h"

static char *g_model; /* the tiny model's directory */

/* The reference configuration: small enough for the sanitizer build (each
 * run takes about a second there). */
static const char CONFIG[] = "[model]\n"
                             "model = %s\n"
                             "threads = 2\n"
                             "checkpoint_dtype = f32\n"
                             "%s"
                             "[optim]\n"
                             "lr = 1e-3\n"
                             "updates = 4\n"
                             "grad_accum = 2\n"
                             "save_steps = 0 2 4\n"
                             "state_every = 1\n"
                             T_TINY_R2D2_SECTIONS
                             "%s";

/* Writes the config with EXTRA_MODEL lines in [model] and EXTRA_DATA in
 * [data] to REFGEO_TMP/NAME; returns its path. */
static char *write_config(const char *name, const char *extra_model, const char *extra_data) {
  char text[4096];
  snprintf(text, sizeof text, CONFIG, g_model, extra_model, extra_data);
  return t_write_tmp(name, text, strlen(text));
}

static char *run_dir(const char *name) {
  char *d = t_tmp_path(name);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  assert_int_equal(system(cmd), 0);
  return d;
}

static int train(const char *config, const char *dir, const char *more, char **err) {
  char args[2048];
  snprintf(args, sizeof args, "train --config '%s' --out '%s' %s", config, dir, more);
  return t_run_cli(args, NULL, err);
}

static char *file_in(const char *dir, const char *name) {
  char *p = rg_path_join(dir, name);
  size_t n;
  char *data = rg_read_file(p, &n);
  if (!data) fail_msg("%s", rg_error_get());
  free(p);
  return data;
}

static size_t file_size(const char *dir, const char *name) {
  char *p = rg_path_join(dir, name);
  struct stat st;
  const int rc = stat(p, &st);
  free(p);
  return rc == 0 ? (size_t)st.st_size : 0;
}

static void assert_same_file(const char *a_dir, const char *b_dir, const char *name) {
  const size_t na = file_size(a_dir, name), nb = file_size(b_dir, name);
  if (na == 0 || na != nb) fail_msg("%s: %zu bytes in %s, %zu in %s", name, na, a_dir, nb, b_dir);
  char *a = file_in(a_dir, name), *b = file_in(b_dir, name);
  if (memcmp(a, b, na) != 0) fail_msg("%s differs between %s and %s", name, a_dir, b_dir);
  free(a), free(b);
}

/* Everything a killed run left visible is whole. */
static void assert_visible_whole(const char *dir) {
  for (int step = 0; step <= 4; step++) {
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%d", step);
    char *ck = rg_path_join(dir, name);
    if (rg_is_dir(ck)) {
      rg_model *m = rg_model_load(ck);
      if (!m) fail_msg("%s is visible but does not load: %s", ck, rg_error_get());
      rg_model_free(m);
    }
    free(ck);
    snprintf(name, sizeof name, "state/step-%d", step);
    char *st = rg_path_join(dir, name);
    if (rg_is_dir(st) && (!file_size(st, "params.f32") || !file_size(st, "moments.f32") || !file_size(st, "meta.json")))
      fail_msg("%s is visible but incomplete", st);
    free(st);
  }
}

/* A run dir's checkpoints as a later stage lists them: a checkpoint-N.tmp
 * a kill left is not one of them (and stops nothing). */
static void assert_readers_ignore_temps(const char *dir) {
  rg_checkpoint_series *s = rg_checkpoints_from_run_dir(dir, NULL);
  if (!s && strstr(rg_error_get(), "no checkpoints")) return; /* killed before checkpoint-0 */
  /* killed between a checkpoint and its digests: refused, naming it */
  if (!s && strstr(rg_error_get(), "checkpoint-2: not listed in")) return;
  if (!s) fail_msg("%s: its checkpoints do not list: %s", dir, rg_error_get());
  for (int i = 0; i < s->n; i++)
    if (strstr(s->items[i].path, ".tmp")) fail_msg("%s: a temp folder listed as a checkpoint", s->items[i].path);
  rg_checkpoints_free(s);
}

static long g_dead_pid; /* a pid that has ended (plant_stale_temps) */

/* Temp files as killed writers leave them: one of a dead pid (to be
 * removed by the next start) and one of a live one, this test's (to be
 * kept: it might be another writer's). */
static void plant_stale_temps(const char *dir) {
  if (!g_dead_pid) {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    g_dead_pid = pid;
  }
  char name[96];
  snprintf(name, sizeof name, "train_log.csv.tmp.%ld", g_dead_pid);
  char *p = rg_path_join(dir, name);
  assert_int_equal(rg_write_file_atomic(p, "half", 4), 0);
  free(p);
  snprintf(name, sizeof name, "utility.jsonl.tmp.%ld", (long)getpid());
  p = rg_path_join(dir, name);
  assert_int_equal(rg_write_file_atomic(p, "live", 4), 0);
  free(p);
}

/* After a resume: the newest state alone (no older, .tmp or .old one), no
 * temp file of a dead writer (the live one planted stays, and goes now),
 * and every digest in the run's and the state's SHA256SUMS right by
 * `sha256sum -c` (coreutils: a reader that is not refgeo's). */
static void assert_nothing_left(const char *dir, const char *what) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cd '%s' && ls state | tr '\\n' ' ' && find . -name '*.tmp*' | sort | tr '\\n' ' '", dir);
  FILE *fp = popen(cmd, "r");
  assert_non_null(fp);
  char got[512] = "", want[160];
  got[fread(got, 1, sizeof got - 1, fp)] = '\0';
  pclose(fp);
  snprintf(want, sizeof want, "step-4 ./utility.jsonl.tmp.%ld ", (long)getpid());
  if (strcmp(got, want) != 0) fail_msg("%s: left after the resume: \"%s\", expected \"%s\"", what, got, want);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && rm utility.jsonl.tmp.* && sha256sum --quiet -c SHA256SUMS && cd state/step-4 && "
           "sha256sum --quiet -c SHA256SUMS",
           dir);
  if (system(cmd) != 0) fail_msg("%s: sha256sum -c disagrees with %s's SHA256SUMS", what, dir);
}

static void test_resume_after_kill(void **state) {
  (void)state;
  char *config = write_config("train_resume.ini", "", "");
  char *ref = run_dir("train_ref");
  char *err = NULL;
  if (train(config, ref, "", &err) != 0) fail_msg("reference run: %s", err);
  free(err);
  /* remove-file:2 is inside the retirement of state 1 (each retirement
   * unlinks a state's four files), remove-file:10 inside that of state 3,
   * after the last update: the resume has no update left and must still
   * finish it */
  static const struct {
    const char *at, *left; /* the kill, and what it must leave (NULL: nothing checked) */
  } KILLS[] = {{"update:3", NULL},
               {"checkpoint-write:2", "checkpoint-2.tmp"},
               {"checkpoint-listed:2", NULL},
               {"state-write:2", "state/step-2.tmp"},
               {"state-rename:3", "state/step-2"},
               {"state-retire:2", "state/step-2.old"},
               {"remove-file:2", "state/step-1.old"},
               {"remove-file:10", "state/step-3.old"},
               {"optimizer:4", NULL}};
  for (size_t k = 0; k < sizeof KILLS / sizeof KILLS[0]; k++) {
    char *dir = run_dir("train_killed");
    setenv("REFGEO_KILL_AT", KILLS[k].at, 1);
    const int killed = train(config, dir, "", NULL);
    unsetenv("REFGEO_KILL_AT");
    /* sh reports a child killed by signal S as 128 + S */
    if (killed != 128 + SIGKILL) fail_msg("%s: the run ended with status %d, not by SIGKILL", KILLS[k].at, killed);
    assert_visible_whole(dir);
    char *left = KILLS[k].left ? rg_path_join(dir, KILLS[k].left) : NULL;
    if (left && !rg_path_exists(left))
      fail_msg("%s: the kill did not land where the test means it to (no %s)", KILLS[k].at, KILLS[k].left);
    free(left);
    assert_readers_ignore_temps(dir);
    /* the log's header and rows up to the newest state, which the resume
     * restores (later rows are updates it does again, timed again) */
    char *log_before = file_size(dir, "train_log.csv") ? file_in(dir, "train_log.csv") : strdup("");
    long newest = 0;
    for (long step = 1; step <= 4; step++) {
      char name[64];
      snprintf(name, sizeof name, "state/step-%ld", step);
      char *st = rg_path_join(dir, name);
      if (rg_is_dir(st)) newest = step;
      free(st);
    }
    char *cut = log_before;
    for (long line = 0; line <= newest && cut && *cut; line++) cut = strchr(cut, '\n') ? strchr(cut, '\n') + 1 : NULL;
    if (cut) *cut = '\0';
    if (newest > 0 && strlen(log_before) < 20) fail_msg("%s: no log rows before state %ld", KILLS[k].at, newest);
    plant_stale_temps(dir);
    if (train(config, dir, "--resume", &err) != 0) fail_msg("%s: resume: %s", KILLS[k].at, err);
    free(err);
    /* the rows before the resume come back byte for byte */
    char *log_after = file_in(dir, "train_log.csv");
    if (strncmp(log_after, log_before, strlen(log_before)) != 0)
      fail_msg("%s: train_log.csv's rows before the resume changed:\n%s\nafter:\n%s", KILLS[k].at, log_before, log_after);
    free(log_before), free(log_after);
    assert_nothing_left(dir, KILLS[k].at);
    char *a = rg_path_join(ref, "state/step-4"), *b = rg_path_join(dir, "state/step-4");
    assert_same_file(a, b, "params.f32");
    assert_same_file(a, b, "moments.f32");
    free(a), free(b);
    a = rg_path_join(ref, "checkpoint-2"), b = rg_path_join(dir, "checkpoint-2");
    assert_same_file(a, b, "model.safetensors");
    free(a), free(b);
    a = rg_path_join(ref, "checkpoint-4"), b = rg_path_join(dir, "checkpoint-4");
    assert_same_file(a, b, "model.safetensors");
    free(a), free(b);
    free(dir);
  }
  free(ref);
  free(config);
}

/* The same for LoRA adapters (the state holds the adapters only; the
 * checkpoints the merged weights): one kill inside an update. */
static void test_lora_resume_after_kill(void **state) {
  (void)state;
  char *config = write_config("train_lora_resume.ini", "mode = lora\nlora_rank = 4\nlora_targets = q,v,gate\n", "");
  char *ref = run_dir("train_lora_ref"), *dir = run_dir("train_lora_killed");
  char *err = NULL;
  if (train(config, ref, "", &err) != 0) fail_msg("reference run: %s", err);
  free(err);
  setenv("REFGEO_KILL_AT", "update:3", 1);
  const int killed = train(config, dir, "", NULL);
  unsetenv("REFGEO_KILL_AT");
  assert_int_equal(killed, 128 + SIGKILL);
  if (train(config, dir, "--resume", &err) != 0) fail_msg("resume: %s", err);
  free(err);
  char *a = rg_path_join(ref, "state/step-4"), *b = rg_path_join(dir, "state/step-4");
  assert_same_file(a, b, "params.f32");
  assert_same_file(a, b, "moments.f32");
  free(a), free(b);
  a = rg_path_join(ref, "checkpoint-4"), b = rg_path_join(dir, "checkpoint-4");
  assert_same_file(a, b, "model.safetensors");
  free(a), free(b), free(dir), free(ref), free(config);
}

static void expect_error(const char *config, const char *dir, const char *more, const char *want);

/* Copies the run REF to NAME (a fresh copy); returns its path. */
static char *copy_run(const char *ref, const char *name) {
  char *dir = run_dir(name), cmd[2048];
  snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", ref, dir);
  assert_int_equal(system(cmd), 0);
  return dir;
}

/* Flips the low bit of byte AT of DIR/NAME. */
static void flip_byte(const char *dir, const char *name, long at) {
  char *p = rg_path_join(dir, name);
  FILE *fp = fopen(p, "r+b");
  if (!fp) fail_msg("%s: cannot open", p);
  assert_int_equal(fseek(fp, at, SEEK_SET), 0);
  const int c = fgetc(fp);
  assert_true(c != EOF);
  assert_int_equal(fseek(fp, at, SEEK_SET), 0);
  fputc(c ^ 1, fp);
  fclose(fp);
  free(p);
}

/* Changes the first digit after KEY in DIR/NAME (a JSON text that stays
 * valid JSON): 0-8 go up by one, 9 goes to 8. */
static void change_digit_after(const char *dir, const char *name, const char *key) {
  char *text = file_in(dir, name), *at = strstr(text, key);
  if (!at) fail_msg("%s/%s: no %s", dir, name, key);
  at += strcspn(at + strlen(key), "0123456789") + strlen(key);
  *at = *at == '9' ? '8' : (char)(*at + 1);
  char *p = rg_path_join(dir, name);
  assert_int_equal(rg_write_file_atomic(p, text, strlen(text)), 0);
  free(p), free(text);
}

/* Drops the second line of DIR/NAME. */
static void drop_line(const char *dir, const char *name) {
  char *text = file_in(dir, name), *second = strchr(text, '\n');
  assert_non_null(second);
  char *third = strchr(second + 1, '\n');
  assert_non_null(third);
  memmove(second + 1, third + 1, strlen(third + 1) + 1);
  char *p = rg_path_join(dir, name);
  assert_int_equal(rg_write_file_atomic(p, text, strlen(text)), 0);
  free(p), free(text);
}

/* Every kind of state and cache file, damaged one way each in a copy of
 * the finished run REF (full or LoRA): --resume refuses it with one line
 * naming the file, where before these checksums it trained on (a flipped
 * weight, another RNG stream, another suffix, utility examples shifted by
 * one). A copy left alone resumes (so each refusal is the damage's), and a
 * flipped byte of a checkpoint stops the stages that read it. */
static void check_corruption_refused(const char *config, const char *ref, const char *what) {
  char *dir = copy_run(ref, "train_corrupt"), *err = NULL;
  if (train(config, dir, "--resume", &err) != 0) fail_msg("%s: an undamaged copy does not resume: %s", what, err);
  free(err), free(dir);
  static const char *const KINDS[] = {"params", "moments", "rng", "suffix", "log", "sums", "utility"};
  for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
    dir = copy_run(ref, "train_corrupt");
    const char *want = NULL;
    if (strcmp(KINDS[k], "params") == 0) flip_byte(dir, "state/step-4/params.f32", 1000), want = "params.f32: sha256";
    if (strcmp(KINDS[k], "moments") == 0) flip_byte(dir, "state/step-4/moments.f32", 77), want = "moments.f32: sha256";
    if (strcmp(KINDS[k], "rng") == 0) change_digit_after(dir, "state/step-4/meta.json", "\"rng\""), want = "meta.json: sha256";
    if (strcmp(KINDS[k], "suffix") == 0)
      change_digit_after(dir, "state/step-4/meta.json", "\"suffix\""), want = "meta.json: sha256";
    if (strcmp(KINDS[k], "log") == 0) change_digit_after(dir, "state/step-4/meta.json", "\"log\""), want = "meta.json: sha256";
    if (strcmp(KINDS[k], "sums") == 0) {
      char *p = rg_path_join(dir, "state/step-4/SHA256SUMS");
      assert_int_equal(remove(p), 0);
      free(p);
      want = "SHA256SUMS: missing";
    }
    if (strcmp(KINDS[k], "utility") == 0) drop_line(dir, "utility.jsonl"), want = "utility.jsonl: sha256";
    char *err2 = NULL;
    const int rc = train(config, dir, "--resume", &err2);
    const char *nl = err2 ? strchr(err2, '\n') : NULL;
    if (rc != 1 || !strstr(err2, want) || (nl && nl[1]))
      fail_msg("%s, damaged %s: expected exit 1 and one line naming \"%s\", got %d: %s", what, KINDS[k], want, rc,
               err2 ? err2 : "");
    free(err2), free(dir);
  }
  /* a checkpoint's weights, as capture, geometry and asr list them */
  dir = copy_run(ref, "train_corrupt");
  flip_byte(dir, "checkpoint-4/model.safetensors", 5000);
  rg_checkpoint_series *s = rg_checkpoints_from_run_dir(dir, NULL);
  if (s || !strstr(rg_error_get(), "checkpoint-4/model.safetensors: sha256"))
    fail_msg("%s: a damaged checkpoint-4 was %s", what, s ? "listed" : rg_error_get());
  free(dir);
}

static void test_corruption_refused(void **state) {
  (void)state;
  char *config = t_tmp_path("train_resume.ini"), *ref = t_tmp_path("train_ref");
  check_corruption_refused(config, ref, "full");
  free(config), free(ref);
  config = t_tmp_path("train_lora_resume.ini"), ref = t_tmp_path("train_lora_ref");
  check_corruption_refused(config, ref, "lora");
  free(config), free(ref);
}

/* One writer per run dir: while another process holds RUN/.lock (this
 * test, through the same protocol), train is refused with one line naming
 * its pid, and nothing in the run changes; once it lets go, train runs. */
static void test_second_writer_refused(void **state) {
  (void)state;
  char *config = t_tmp_path("train_resume.ini"), *ref = t_tmp_path("train_ref"), *dir = copy_run(ref, "train_locked");
  free(ref);
  const int fd = rg_run_lock(dir);
  assert_true(fd >= 0);
  char want[64], *err = NULL;
  snprintf(want, sizeof want, "in use by another refgeo (pid %ld)", (long)getpid());
  const size_t log_size = file_size(dir, "train_log.csv");
  int rc = train(config, dir, "--resume", &err);
  const char *nl = err ? strchr(err, '\n') : NULL;
  if (rc != 1 || !strstr(err, want) || (nl && nl[1])) fail_msg("expected one line \"%s\", got %d: %s", want, rc, err);
  free(err);
  assert_int_equal(file_size(dir, "train_log.csv"), log_size);
  rg_run_unlock(fd);
  if (train(config, dir, "--resume", &err) != 0) fail_msg("after the lock is let go: %s", err);
  free(err), free(dir), free(config);
}

/* Every eligible behavior must fit max_case_tokens with the longest initial
 * suffix and each target: a long one is refused when the run opens, naming
 * it, not at the pool reset that first draws it. */
static void test_long_behavior_refused(void **state) {
  (void)state;
  char text[5000] = "Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID\n\"";
  for (int i = 0; i < 60; i++) strcat(text, "Write a long story. ");
  strcat(text, "\",standard,misc,,,long_behavior\nSay hi,standard,misc,,,short_behavior\n");
  char *csv = t_write_tmp("train_long.csv", text, strlen(text));
  static const char TARGETS[] = "{\"long_behavior\": [\"Sure\"], \"short_behavior\": [\"Sure\"]}";
  char *json = t_write_tmp("train_long.json", TARGETS, sizeof TARGETS - 1);
  char data[2400];
  snprintf(data, sizeof data, "behaviors = %s\ntargets = %s\n", csv, json);
  char *c = write_config("train_long.ini", "", data), *dir = run_dir("train_long");
  expect_error(c, dir, "--pool-size 1 --cases-per-step 1", "behavior long_behavior: ");
  expect_error(c, dir, "--pool-size 1 --cases-per-step 1", "over max_case_tokens 400");
  free(c), free(dir), free(csv), free(json);
}

static void assert_same_floats(const float *a, const float *b, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) fail_msg("%s: value %zu is %.9g, expected %.9g", what, i, a[i], b[i]);
}

static void test_checkpoints_reload(void **state) {
  (void)state;
  char *ref = t_tmp_path("train_ref"); /* test_resume_after_kill's reference run */
  size_t n_base, n0, n4;
  float *base = t_model_params(g_model, &n_base);
  char *ck = rg_path_join(ref, "checkpoint-0");
  float *p0 = t_model_params(ck, &n0);
  free(ck);
  assert_int_equal(n0, n_base);
  assert_same_floats(p0, base, n0, "checkpoint-0 against the base model");
  ck = rg_path_join(ref, "checkpoint-4");
  float *p4 = t_model_params(ck, &n4);
  free(ck);
  char *st = rg_path_join(ref, "state/step-4");
  assert_int_equal(file_size(st, "params.f32"), n4 * sizeof(float));
  char *trained = file_in(st, "params.f32");
  assert_same_floats(p4, (const float *)trained, n4, "checkpoint-4 against state/step-4/params.f32");
  /* and training moved them */
  size_t moved = 0;
  for (size_t i = 0; i < n4; i++) moved += p4[i] != base[i];
  if (moved < n4 / 2) fail_msg("only %zu of %zu parameters changed in 4 updates", moved, n4);
  free(trained), free(st), free(p4), free(p0), free(base), free(ref);
}

/* A run that must fail: exit 1, one line on stderr containing WANT. */
static void expect_error(const char *config, const char *dir, const char *more, const char *want) {
  char *err = NULL;
  const int rc = train(config, dir, more, &err);
  if (rc != 1) fail_msg("expected exit 1 for \"%s\", got %d: %s", want, rc, err ? err : "");
  const char *nl = strchr(err, '\n');
  if (!strstr(err, want) || (nl && nl[1] != '\0')) fail_msg("expected one line naming \"%s\", got: %s", want, err);
  free(err);
}

/* Utility examples packed into 32-token sequences (TRL's packing; the
 * packing itself is test_utility_data's): the run trains on them and logs
 * a utility loss. */
static void test_utility_packing(void **state) {
  (void)state;
  char *dir = run_dir("train_packed"), *c = write_config("train_packed.ini", "", ""), *err = NULL;
  if (train(c, dir, "--utility-packing on --utility-labels all --max-utility-tokens 32 --updates 1 --save-steps 1",
            &err) != 0)
    fail_msg("%s", err);
  char *log = file_in(dir, "train_log.csv");
  const char *row = strchr(log, '\n');
  assert_non_null(row);
  print_message("packed run's log: %s", row + 1);
  assert_true(strlen(row + 1) > 10);
  free(log), free(err), free(c), free(dir);
}

static void test_bad_input(void **state) {
  (void)state;
  char *dir = run_dir("train_bad");
  char *c = t_write_tmp("train_nomodel.ini", "[optim]\nlr = 1e-3\n", 18);
  expect_error(c, dir, "", "missing key \"model\"");
  free(c);
  c = t_write_tmp("train_unknown.ini", "[optim]\nlearning_rate = 1\n", 27);
  expect_error(c, dir, "", "train_unknown.ini:2: unknown key \"learning_rate\"");
  free(c);
  c = t_write_tmp("train_section.ini", "[pool]\nlr = 1\n", 14);
  expect_error(c, dir, "", "train_section.ini:2: key \"lr\" belongs in section [optim]");
  free(c);
  c = write_config("train_ok.ini", "", "");
  expect_error(c, dir, "--lr fast", "lr: \"fast\" is not a number");
  expect_error(c, dir, "--grad-accum 0", "grad_accum: 0 is below 1");
  expect_error(c, dir, "--learning-rate 1", "unknown flag '--learning-rate'");
  expect_error(c, dir, "--refusal-target 'Sorry ; no'", "refusal_target: \"Sorry ; no\" has a ';' after a blank");
  expect_error(c, dir, "--utility-packing on --utility-labels assistant",
               "utility_packing: a packed sequence supervises every token; set utility_labels = all");
  char *lora = write_config("train_lora.ini", "mode = lora\nlora_targets = q,x\n", "");
  expect_error(lora, dir, "", "lora_targets");
  free(lora);
  /* behaviors whose ids no target file has */
  static const char CSV[] = "Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID\n"
                            "Say something,standard,misc,,,no_such_behavior_id\n";
  char *csv = t_write_tmp("train_orphans.csv", CSV, sizeof CSV - 1);
  char data[1200];
  snprintf(data, sizeof data, "behaviors = %s\n", csv);
  char *orphans = write_config("train_orphans.ini", "", data);
  expect_error(orphans, dir, "", "train_orphans.csv");
  free(orphans), free(csv);
  /* a run dir below a regular file cannot be made */
  char *file = t_write_tmp("train_a_file", "x", 1);
  char *below = rg_path_join(file, "run");
  expect_error(c, below, "", "train_a_file");
  free(below), free(file);
  /* an existing run: not written over, not resumed with another config */
  char *err = NULL;
  if (train(c, dir, "--updates 4 --gcg-steps 0 --utility-per-step 1", &err) != 0) fail_msg("%s", err);
  free(err);
  char *before = file_in(dir, "config.ini");
  const size_t log_before = file_size(dir, "train_log.csv");
  expect_error(c, dir, "--updates 4 --gcg-steps 0 --utility-per-step 1", "already holds a run");
  expect_error(c, dir, "--updates 4 --gcg-steps 0 --utility-per-step 1 --lr 2e-3 --resume", "key \"lr\" differs");
  char *after = file_in(dir, "config.ini");
  assert_string_equal(before, after);
  assert_int_equal(file_size(dir, "train_log.csv"), log_before);
  free(before), free(after);
  char *empty = run_dir("train_empty");
  expect_error(c, empty, "--resume", "no run to resume");
  /* a damaged state: a meta.json that is not JSON, then a short params.f32 */
  char *st = rg_path_join(dir, "state/step-4");
  char *params = rg_path_join(st, "params.f32"), *meta = rg_path_join(st, "meta.json");
  assert_int_equal(rg_write_file_atomic(meta, "{\"step\": 4,", 11), 0);
  expect_error(c, dir, "--updates 4 --gcg-steps 0 --utility-per-step 1 --resume", "meta.json: sha256");
  assert_int_equal(truncate(params, 100), 0);
  expect_error(c, dir, "--updates 4 --gcg-steps 0 --utility-per-step 1 --resume", "params.f32: 100 bytes");
  free(params), free(meta), free(st);
  free(empty);
  free(c);
  free(dir);
}

int main(void) {
  t_require_device();
  g_model = t_hf_tiny("qwen2_bf16");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume_after_kill),
      cmocka_unit_test(test_checkpoints_reload),
      cmocka_unit_test(test_lora_resume_after_kill),
      cmocka_unit_test(test_corruption_refused),
      cmocka_unit_test(test_second_writer_refused),
      cmocka_unit_test(test_long_behavior_refused),
      cmocka_unit_test(test_utility_packing),
      cmocka_unit_test(test_bad_input),
  };
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(g_model);
  return rc;
}
