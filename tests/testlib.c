/* testlib.c: helpers shared by the cmocka tests (testlib.h). */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/cpu/blas_core.h"
#include "engine/weights.h"
#include "model/model.h"
#include "util/error.h"
#include "util/fileio.h"

/* Every test program runs the OpenBLAS kernels that the CLI runs
 * (backend/cpu/blas_core.h, tools/cli.h cli_runtime_env): tests compare results
 * computed in their own process with the CLI's bit for bit, and two kernel
 * sets round differently. OpenBLAS reads OPENBLAS_CORETYPE as it loads,
 * before any constructor of the program, so the program restarts itself
 * once with it set. glibc calls ELF constructors with main's arguments. */
__attribute__((constructor)) static void t_blas_kernels(int argc, char **argv, char **envp) {
  if (rg_blas_core_select()) execv("/proc/self/exe", argv);
}

void t_require_device(void) {
  const char *d = getenv("REFGEO_DEVICE");
  if (!d || !*d || strcmp(d, "cpu") == 0) return;
  rg_backend *be = rg_backend_new(&(rg_backend_opts){0});
  if (!be) { /* skipped without a GPU; a GPU whose backend does not start fails */
    const bool absent = rg_gpu_device_count() == 0;
    printf("%s: device %s: %s\n", absent ? "SKIPPED" : "FAILED", d, rg_error_get());
    exit(absent ? 77 : 1);
  }
  rg_backend_free(be);
}

const char *t_env(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) fail_msg("environment variable %s is not set (run the tests through ctest)", name);
  return v;
}

static char *join_env(const char *var, const char *name) {
  char *p = rg_path_join(t_env(var), name);
  assert_non_null(p);
  return p;
}

char *t_fixture_path(const char *name) { return join_env("REFGEO_FIXTURES", name); }
char *t_data_path(const char *name) { return join_env("REFGEO_DATA", name); }
char *t_tmp_path(const char *name) { return join_env("REFGEO_TMP", name); }

float *t_read_f32(const char *fixture_name, size_t *n) {
  char *path = t_fixture_path(fixture_name);
  size_t len = 0;
  char *data = rg_read_file(path, &len);
  if (!data) fail_msg("%s", rg_error_get());
  assert_int_equal(len % 4, 0);
  float *f = malloc(len ? len : 1);
  assert_non_null(f);
  memcpy(f, data, len);
  free(data);
  free(path);
  *n = len / 4;
  return f;
}

static char *slurp_fd(int fd) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  for (;;) {
    if (len + 1024 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
    ssize_t r = read(fd, buf + len, cap - len - 1);
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  return buf;
}

int t_run_cli(const char *args, char **out, char **err) {
  char *err_path = t_tmp_path("cli-stderr.XXXXXX");
  int efd = mkstemp(err_path);
  assert_true(efd >= 0);
  size_t n = strlen(args) + strlen(err_path) + strlen(t_env("REFGEO_BIN")) + 16;
  char *cmd = malloc(n);
  assert_non_null(cmd);
  snprintf(cmd, n, "%s %s 2>%s", t_env("REFGEO_BIN"), args, err_path);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char *o = slurp_fd(fileno(p));
  int status = pclose(p);
  char *e = slurp_fd(efd);
  close(efd);
  unlink(err_path);
  free(err_path);
  free(cmd);
  if (out) *out = o; else free(o);
  if (err) *err = e; else free(e);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *t_write_tmp(const char *name, const void *data, size_t len) {
  char *path = t_tmp_path(name);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  if (len) assert_int_equal(fwrite(data, 1, len, fp), len);
  fclose(fp);
  return path;
}

cJSON *t_read_json_fixture(const char *name) {
  char *path = t_fixture_path(name);
  char *text = rg_read_file(path, NULL);
  if (!text) fail_msg("%s", rg_error_get());
  cJSON *j = cJSON_Parse(text);
  if (!j) fail_msg("%s: not valid JSON", path);
  free(text);
  free(path);
  return j;
}

unsigned long long t_fnv1a64(const char *s) {
  unsigned long long h = 0xcbf29ce484222325ULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ULL;
  }
  return h;
}

static void copy_file(const char *from, const char *to) {
  size_t len;
  char *data = rg_read_file(from, &len);
  if (!data || rg_write_file_atomic(to, data, len) != 0) fail_msg("%s", rg_error_get());
  free(data);
}

char *t_hf_tiny(const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "hf_tiny-%ld/%s", (long)getpid(), name);
  char *dir = t_tmp_path(rel);
  static const char *SIDE[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
  char *done = rg_path_join(dir, SIDE[2]); /* copied last */
  if (!rg_path_exists(done)) {
    snprintf(rel, sizeof rel, "hf_tiny/%s.expected.json", name);
    cJSON *exp = t_read_json_fixture(rel);
    const cJSON *sy = cJSON_GetObjectItem(exp, "synth");
    const cJSON *shard = cJSON_GetObjectItem(sy, "max_shard_size");
    snprintf(rel, sizeof rel, "hf_tiny/%s", name);
    char *fixture = t_fixture_path(rel), *config = rg_path_join(fixture, "config.json");
    char args[2048], *err = NULL;
    snprintf(args, sizeof args, "synth-model --config '%s' --out '%s' --seed %d --dtype %s --std %.17g --norm-std %.17g%s%s",
             config, dir, cJSON_GetObjectItem(sy, "seed")->valueint,
             cJSON_GetObjectItem(sy, "dtype")->valuestring, cJSON_GetObjectItem(sy, "std")->valuedouble,
             cJSON_GetObjectItem(sy, "norm_std")->valuedouble, shard ? " --max-shard-size " : "",
             shard ? shard->valuestring : "");
    if (t_run_cli(args, NULL, &err) != 0) fail_msg("refgeo %s: %s", args, err);
    for (int k = 0; k < 3; k++) {
      char *from = rg_path_join(fixture, SIDE[k]), *to = rg_path_join(dir, SIDE[k]);
      copy_file(from, to);
      free(from);
      free(to);
    }
    free(err);
    free(config);
    free(fixture);
    cJSON_Delete(exp);
  }
  free(done);
  return dir;
}

char *t_h5dump(const char *args, const char *file) {
  char name[64];
  snprintf(name, sizeof name, "h5dump-%d.out", (int)getpid());
  char *out_path = t_tmp_path(name);
  size_t len = strlen(args) + strlen(file) + strlen(out_path) + 64;
  char *cmd = malloc(len);
  assert_non_null(cmd);
  snprintf(cmd, len, "h5dump -w 0 %s '%s' > '%s' 2>&1", args, file, out_path);
  int rc = system(cmd);
  char *out = rg_read_file(out_path, NULL);
  if (rc != 0) fail_msg("%s failed: %s", cmd, out ? out : "");
  assert_non_null(out);
  remove(out_path);
  free(out_path);
  free(cmd);
  return out;
}

float *t_h5dump_floats(const char *file, const char *dset, size_t *n) {
  char name[64];
  snprintf(name, sizeof name, "h5dump-%d.bin", (int)getpid());
  char *bin = t_tmp_path(name);
  size_t len = strlen(dset) + strlen(bin) + 32;
  char *args = malloc(len);
  assert_non_null(args);
  snprintf(args, len, "-d %s -b LE -o '%s'", dset, bin);
  free(t_h5dump(args, file));
  size_t bytes;
  float *v = (float *)rg_read_file(bin, &bytes);
  assert_non_null(v);
  assert_int_equal(bytes % sizeof(float), 0);
  *n = bytes / sizeof(float);
  remove(bin);
  free(bin);
  free(args);
  return v;
}

rg_session *t_session(const rg_model *m, int threads, rg_weight_mode mode, int max_seqs, int max_ctx,
                      const rg_session_opts *opts) {
  rg_backend_opts bo = {.threads = threads};
  rg_weights *w = rg_weights_open(m, &bo, mode);
  rg_session *s = w ? rg_session_new(w, max_seqs, max_ctx, opts) : NULL;
  if (!s) {
    rg_weights_free(w);
    fail_msg("session: %s", rg_error_get());
  }
  return s;
}

void t_session_free(rg_session *s) {
  if (!s) return;
  /* the weights were made for this session alone (t_session) */
  rg_weights *w = (rg_weights *)rg_session_weights(s);
  rg_session_free(s);
  rg_weights_free(w);
}

int t_run_shell(const char *cmd, char **out) {
  char *line = malloc(strlen(cmd) + 32);
  assert_non_null(line);
  sprintf(line, "%s < /dev/null 2>&1", cmd);
  FILE *p = popen(line, "r");
  free(line);
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;)
    if ((n += got) + 1 == cap) {
      buf = realloc(buf, cap *= 2);
      assert_non_null(buf);
    }
  buf[n] = '\0';
  const int status = pclose(p);
  *out = buf;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int t_run_ranks(int np, const char *args, char **out) {
  char cmd[8192];
  if (np > 0)
    snprintf(cmd, sizeof cmd, "%s --oversubscribe -np %d %s %s", t_env("REFGEO_MPIRUN"), np, t_env("REFGEO_BIN"), args);
  else
    snprintf(cmd, sizeof cmd, "%s %s", t_env("REFGEO_BIN"), args);
  return t_run_shell(cmd, out);
}

char *t_fresh_tmp_dir(const char *name) {
  char *d = t_tmp_path(name), cmd[4096];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  assert_int_equal(system(cmd), 0);
  return d;
}

float *t_model_params(const char *dir, size_t *n) {
  rg_model *m = rg_model_load(dir);
  if (!m) fail_msg("%s: %s", dir, rg_error_get());
  rg_weights *w = rg_weights_open(m, &(rg_backend_opts){.threads = 1}, RG_WEIGHTS_F32);
  if (!w) fail_msg("%s: %s", dir, rg_error_get());
  size_t total = 0;
  for (int i = 0; i < rg_weights_count(w); i++) total += (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
  float *out = malloc(total * sizeof *out);
  assert_non_null(out);
  size_t at = 0;
  for (int i = 0; i < rg_weights_count(w); i++) {
    assert_int_equal(rg_weights_download(w, i, out + at), 0);
    at += (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
  }
  rg_weights_free(w);
  rg_model_free(m);
  *n = total;
  return out;
}
