/* train_state.c: saving and reading what `refgeo train --resume` continues from (train_state.h). */
#include "adv_ft/train_state.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/manifest.h"
#include "util/sha256.h"

static char *state_path(const char *run_dir, long step, const char *suffix) {
  char name[64];
  snprintf(name, sizeof name, "state/step-%ld%s", step, suffix);
  return rg_path_join(run_dir, name);
}

static size_t param_len(const rg_weights *w, int i) { return (size_t)rg_tensor_nelems(rg_weights_tensor(w, i)); }

static size_t largest_param(const rg_weights *w) {
  size_t most = 1;
  for (int i = 0; i < rg_weights_count(w); i++)
    if (param_len(w, i) > most) most = param_len(w, i);
  return most;
}

/* Writes the parameters (MOMENTS false) or the moments into PATH. */
static int write_floats(const char *path, const rg_weights *w, const rg_optimizer *o, bool moments) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return rg_error_set("%s: %s", path, strerror(errno));
  const size_t most = largest_param(w);
  float *a = malloc(most * sizeof *a), *b = moments ? malloc(most * sizeof *b) : NULL;
  int rc = a && (!moments || b) ? 0 : rg_error_set("%s: out of memory", path);
  for (int i = 0; rc == 0 && i < rg_weights_count(w); i++) {
    const size_t n = param_len(w, i);
    rc = moments ? rg_optimizer_get_moments(o, i, a, b) : rg_weights_download(w, i, a);
    if (rc == 0 && (fwrite(a, sizeof *a, n, fp) != n || (moments && fwrite(b, sizeof *b, n, fp) != n)))
      rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
  }
  free(a), free(b);
  if (fclose(fp) != 0 && rc == 0) rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
  return rc;
}

/* The sha256 of a file just written, read back on a thread of its own
 * (from the page cache) while the caller writes the next file and waits
 * for the disk (fsync): the digest of a gigabyte state costs about a second
 * of CPU (bench/integrity_cost.sh), which this takes off the save's path.
 * Without a thread the digest is computed on the spot. */
typedef struct {
  const char *path;
  char hex[65];
  int rc;
  char msg[512]; /* the thread's error (errors are per thread) */
  pthread_t thread;
  bool started;
} hash_job;

static void *hash_run(void *arg) {
  hash_job *j = arg;
  j->rc = rg_sha256_file(j->path, j->hex);
  if (j->rc < 0) snprintf(j->msg, sizeof j->msg, "%s", rg_error_get());
  return NULL;
}

static void hash_start(hash_job *j, const char *path) {
  j->path = path;
  j->started = pthread_create(&j->thread, NULL, hash_run, j) == 0;
  if (!j->started) hash_run(j);
}

/* Waits for J (if it was started); 0, or -1 with its error set unless
 * FAILED (the caller's error, set earlier, stands). */
static int hash_finish(hash_job *j, bool failed) {
  if (!j->path) return 0;
  if (j->started) pthread_join(j->thread, NULL);
  j->started = false;
  return j->rc == 0 ? 0 : failed ? -1 : rg_error_set("%s", j->msg);
}

static int write_meta(const char *path, const cJSON *meta, char hex[65]) {
  char *text = cJSON_Print(meta);
  if (!text) return rg_error_set("%s: out of memory", path);
  FILE *fp = fopen(path, "wb");
  int rc = fp && fputs(text, fp) >= 0 ? 0 : rg_error_set("%s: %s", path, strerror(errno));
  if (fp && fclose(fp) != 0 && rc == 0) rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
  rg_sha256 sum;
  uint8_t d[32];
  rg_sha256_init(&sum);
  rg_sha256_update(&sum, text, strlen(text));
  rg_sha256_final(&sum, d);
  rg_sha256_hex(d, hex);
  free(text);
  return rc;
}

/* fsyncs the regular file PATH (a rename onto itself is a no-op). */
static int sync_file(const char *path) { return rg_fsync_rename(path, path); }

/* Retires the folder state/NAME: renamed aside to NAME.old (in one step, so
 * a kill never leaves a half-deleted state under a state's name), then
 * deleted. A NAME.old left by an interrupted retirement goes first. */
static int retire(const char *state_dir, const char *name) {
  char old_name[300];
  snprintf(old_name, sizeof old_name, "%s.old", name);
  char *from = rg_path_join(state_dir, name), *old = rg_path_join(state_dir, old_name);
  int rc = from && old ? 0 : rg_error_set("out of memory");
  if (rc == 0) rc = rg_remove_flat_dir(old);
  if (rc == 0 && rename(from, old) != 0) rc = rg_error_set("%s: cannot rename to %s: %s", from, old, strerror(errno));
  if (rc == 0) rc = rg_sync_dir(state_dir);
  rg_fault_point("state-retire"); /* tests: a kill with a state renamed aside, not yet deleted */
  if (rc == 0) rc = rg_remove_flat_dir(old);
  free(from), free(old);
  return rc;
}

/* A "step-<digits>" name: *step gets the number. */
static bool is_state_name(const char *name, long *step) {
  char *end;
  if (strncmp(name, "step-", 5) != 0 || name[5] < '0' || name[5] > '9') return false;
  *step = strtol(name + 5, &end, 10);
  return *end == '\0';
}

static bool has_suffix(const char *name, const char *suffix) {
  const size_t n = strlen(name), k = strlen(suffix);
  return n > k && strcmp(name + n - k, suffix) == 0;
}

int rg_train_state_tidy(const char *run_dir, long keep) {
  char *dir = rg_path_join(run_dir, "state");
  if (!dir) return rg_error_set("out of memory");
  DIR *d = opendir(dir);
  if (!d) {
    const int rc = errno == ENOENT ? 0 : rg_error_set("%s: cannot list: %s", dir, strerror(errno));
    free(dir);
    return rc;
  }
  /* names first: retiring renames entries of the folder being listed */
  int rc = 0, n = 0, cap = 0;
  char **names = NULL;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    long step;
    const bool state = is_state_name(e->d_name, &step) && step != keep;
    const bool left = strncmp(e->d_name, "step-", 5) == 0 && (has_suffix(e->d_name, ".tmp") || has_suffix(e->d_name, ".old"));
    if (!state && !left) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(names, (size_t)cap * sizeof *grown);
      if (!grown) rc = rg_error_set("out of memory");
      else names = grown;
    }
    if (rc == 0 && !(names[n++] = strdup(e->d_name))) rc = rg_error_set("out of memory");
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    long step;
    if (rc == 0 && is_state_name(names[i], &step)) {
      rc = retire(dir, names[i]);
    } else if (rc == 0) { /* a state never finished, or one whose retirement was cut short */
      char *p = rg_path_join(dir, names[i]);
      rc = p ? rg_remove_flat_dir(p) : rg_error_set("out of memory");
      free(p);
    }
    free(names[i]);
  }
  free(names);
  free(dir);
  return rc;
}

/* Adds the sha256 of every rank's ZeRO shard file in DIR (RANKS of them,
 * written by their ranks before the writer saves) to SUMS. */
static int add_shard_sums(rg_manifest *sums, const char *dir, int ranks) {
  int rc = 0;
  for (int r = 0; rc == 0 && r < ranks; r++) {
    char name[64], hex[65];
    snprintf(name, sizeof name, "zero-%d-of-%d.f32", r, ranks);
    char *path = rg_path_join(dir, name);
    rc = path ? rg_sha256_file(path, hex) : rg_error_set("out of memory");
    if (rc == 0) rc = rg_manifest_set(sums, name, hex);
    free(path);
  }
  return rc;
}

int rg_train_state_save(const char *run_dir, long step, const rg_weights *w, const rg_optimizer *o, const cJSON *meta) {
  char *tmp = state_path(run_dir, step, ".tmp"), *final = state_path(run_dir, step, "");
  char *params = tmp ? rg_path_join(tmp, "params.f32") : NULL, *moments = tmp ? rg_path_join(tmp, "moments.f32") : NULL;
  char *meta_path = tmp ? rg_path_join(tmp, "meta.json") : NULL, *sums_path = tmp ? rg_path_join(tmp, RG_MANIFEST_NAME) : NULL;
  char *state_dir = rg_path_join(run_dir, "state");
  int rc = tmp && final && params && moments && meta_path && sums_path && state_dir ? 0 : rg_error_set("out of memory");
  char meta_hex[65];
  hash_job sum_params = {0}, sum_moments = {0};
  rg_manifest sums = {0};
  const bool sharded = rg_optimizer_zero(o) != NULL; /* the folder is rg_train_state_begin's, with the shards */
  if (rc == 0 && !sharded) rc = rg_remove_flat_dir(tmp);
  if (rc == 0 && !sharded) rc = rg_mkdir_p(tmp);
  if (rc == 0) rc = write_floats(params, w, o, false);
  if (rc == 0) hash_start(&sum_params, params);
  rg_fault_point("state-write"); /* tests: a kill between a state's files */
  if (rc == 0 && !sharded) rc = write_floats(moments, w, o, true);
  if (rc == 0 && !sharded) hash_start(&sum_moments, moments);
  if (rc == 0) rc = write_meta(meta_path, meta, meta_hex);
  if (rc == 0) rc = sync_file(params) || (!sharded && sync_file(moments)) || sync_file(meta_path) ? -1 : 0;
  /* both joined on every path; the first error is the one reported */
  if (hash_finish(&sum_params, rc < 0) < 0) rc = -1;
  if (hash_finish(&sum_moments, rc < 0) < 0) rc = -1;
  /* the checksums last: a state's manifest lists files already on disk
   * (with ZeRO, the ranks' shards, written before this call) */
  if (rc == 0)
    rc = rg_manifest_set(&sums, "params.f32", sum_params.hex) ||
                 (!sharded && rg_manifest_set(&sums, "moments.f32", sum_moments.hex)) ||
                 rg_manifest_set(&sums, "meta.json", meta_hex)
             ? -1
             : 0;
  if (rc == 0 && sharded) rc = add_shard_sums(&sums, tmp, rg_zero_ranks(rg_optimizer_zero(o)));
  if (rc == 0) rc = rg_manifest_write(&sums, sums_path);
  rg_manifest_free(&sums);
  if (rc == 0) rc = rg_sync_dir(tmp);
  /* a state of this step left by a killed run that had got past the
   * rename is replaced: it holds the same step, recomputed */
  if (rc == 0 && rg_is_dir(final)) rc = retire(state_dir, strrchr(final, '/') + 1);
  if (rc == 0 && rename(tmp, final) != 0) rc = rg_error_set("%s: rename failed: %s", final, strerror(errno));
  if (rc == 0) rc = rg_sync_dir(state_dir);
  rg_fault_point("state-rename"); /* tests: a kill with two complete states */
  if (rc == 0) rc = rg_train_state_tidy(run_dir, step);
  free(state_dir), free(tmp), free(final), free(params), free(moments), free(meta_path), free(sums_path);
  return rc < 0 ? rg_error_prefix("saving the training state") : 0;
}

int rg_train_state_begin(const char *run_dir, long step) {
  char *tmp = state_path(run_dir, step, ".tmp");
  int rc = tmp ? 0 : rg_error_set("out of memory");
  if (rc == 0) rc = rg_remove_flat_dir(tmp);
  if (rc == 0) rc = rg_mkdir_p(tmp);
  free(tmp);
  return rc < 0 ? rg_error_prefix("saving the training state") : 0;
}

enum { SHARD_HEADER = 48 };
/* the floats a shard file is written and read in at a time: a host copy
 * of a whole shard would add its size to a rank's peak (the plan's) */
enum { SHARD_PIECE = 1 << 20 };
static const char SHARD_MAGIC[8] = "RGZERO1";

static char *shard_path(const char *run_dir, long step, const char *suffix, int rank, int ranks) {
  char name[96];
  snprintf(name, sizeof name, "state/step-%ld%s/zero-%d-of-%d.f32", step, suffix, rank, ranks);
  return rg_path_join(run_dir, name);
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int rg_train_state_save_shard(const char *run_dir, long step, const rg_optimizer *o, uint64_t run_id) {
  const rg_zero *z = rg_optimizer_zero(o);
  if (!z) return rg_error_set("saving a ZeRO shard: the optimizer is not sharded");
  const size_t n = rg_zero_shard_floats(z);
  char *path = shard_path(run_dir, step, ".tmp", rg_zero_rank(z), rg_zero_ranks(z));
  float *buf = malloc(SHARD_PIECE * sizeof *buf);
  int rc = path && buf ? 0 : rg_error_set("saving a ZeRO shard: out of memory");
  FILE *fp = rc == 0 ? fopen(path, "wb") : NULL;
  if (rc == 0 && !fp) rc = rg_error_set("%s: %s", path, strerror(errno));
  unsigned char head[SHARD_HEADER] = {0};
  memcpy(head, SHARD_MAGIC, 8);
  put_u32(head + 8, (uint32_t)rg_zero_ranks(z));
  put_u32(head + 12, (uint32_t)rg_zero_rank(z));
  put_u64(head + 16, (uint64_t)step);
  put_u64(head + 24, run_id);
  put_u64(head + 32, (uint64_t)n);
  if (rc == 0 && fwrite(head, 1, sizeof head, fp) != sizeof head)
    rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
  for (int which = 0; which < 2; which++) /* m, then v */
    for (size_t at = 0; rc == 0 && at < n; at += SHARD_PIECE) {
      const size_t k = n - at < SHARD_PIECE ? n - at : SHARD_PIECE;
      rc = which == 0 ? rg_optimizer_get_shard(o, at, k, buf, NULL) : rg_optimizer_get_shard(o, at, k, NULL, buf);
      if (rc == 0 && fwrite(buf, sizeof *buf, k, fp) != k) rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
    }
  if (fp && fclose(fp) != 0 && rc == 0) rc = rg_error_set("%s: write failed: %s", path, strerror(errno));
  if (rc == 0) rc = sync_file(path);
  free(path), free(buf);
  return rc;
}

/* The shard file PATH of state STEP against the state's SHA256SUMS (after
 * its header checks, which say more about a shard of another run). */
static int check_shard_sum(const char *run_dir, long step, const char *path) {
  char *dir = state_path(run_dir, step, ""), *sums_path = dir ? rg_path_join(dir, RG_MANIFEST_NAME) : NULL;
  rg_manifest sums = {0};
  int rc = dir && sums_path ? rg_manifest_read(&sums, sums_path, true) : rg_error_set("out of memory");
  if (rc == 0) rc = rg_manifest_check(&sums, sums_path, dir, strrchr(path, '/') + 1);
  rg_manifest_free(&sums);
  free(dir), free(sums_path);
  return rc;
}

int rg_train_state_load_shard(const char *run_dir, long step, rg_optimizer *o, uint64_t run_id) {
  const rg_zero *z = rg_optimizer_zero(o);
  if (!z) return rg_error_set("reading a ZeRO shard: the optimizer is not sharded");
  const size_t n = rg_zero_shard_floats(z);
  char *path = shard_path(run_dir, step, "", rg_zero_rank(z), rg_zero_ranks(z));
  if (!path) return rg_error_set("out of memory");
  FILE *fp = fopen(path, "rb");
  int rc = fp ? 0 : rg_error_set("%s: %s", path, strerror(errno));
  unsigned char head[SHARD_HEADER];
  if (rc == 0 && (fread(head, 1, sizeof head, fp) != sizeof head || memcmp(head, SHARD_MAGIC, 8) != 0))
    rc = rg_error_set("%s: not a refgeo ZeRO shard file", path);
  if (rc == 0 && (get_u32(head + 8) != (uint32_t)rg_zero_ranks(z) || get_u32(head + 12) != (uint32_t)rg_zero_rank(z)))
    rc = rg_error_set("%s: holds the shard of rank %u of %u, not of rank %d of %d", path, get_u32(head + 12),
                      get_u32(head + 8), rg_zero_rank(z), rg_zero_ranks(z));
  if (rc == 0 && (get_u64(head + 24) != run_id || get_u64(head + 16) != (uint64_t)step))
    rc = rg_error_set("%s: from another run or step (run %016llx step %lld; this state: run %016llx step %ld)", path,
                      (unsigned long long)get_u64(head + 24), (long long)get_u64(head + 16),
                      (unsigned long long)run_id, step);
  if (rc == 0 && get_u64(head + 32) != (uint64_t)n)
    rc = rg_error_set("%s: a shard of %llu floats, but this run's is %zu (a state of another model or mode?)", path,
                      (unsigned long long)get_u64(head + 32), n);
  /* the size first, so that a short file sets nothing */
  if (rc == 0 && (fseek(fp, 0, SEEK_END) != 0 || (size_t)ftell(fp) != SHARD_HEADER + 2 * n * sizeof(float)))
    rc = rg_error_set("%s: not %zu floats of m and v each after its header (cut short or too long)", path, n);
  if (rc == 0) rc = check_shard_sum(run_dir, step, path);
  if (rc == 0 && fseek(fp, SHARD_HEADER, SEEK_SET) != 0) rc = rg_error_set("%s: cannot seek", path);
  float *buf = rc == 0 ? malloc(SHARD_PIECE * sizeof *buf) : NULL;
  if (rc == 0 && !buf) rc = rg_error_set("%s: out of memory", path);
  for (int which = 0; which < 2; which++)
    for (size_t at = 0; rc == 0 && at < n; at += SHARD_PIECE) {
      const size_t k = n - at < SHARD_PIECE ? n - at : SHARD_PIECE;
      if (fread(buf, sizeof *buf, k, fp) != k) rc = rg_error_set("%s: short read", path);
      if (rc == 0) rc = which == 0 ? rg_optimizer_set_shard(o, at, k, buf, NULL) : rg_optimizer_set_shard(o, at, k, NULL, buf);
    }
  if (fp) fclose(fp);
  free(path), free(buf);
  return rc;
}

long rg_train_state_latest(const char *run_dir) {
  char *dir = rg_path_join(run_dir, "state");
  DIR *d = dir ? opendir(dir) : NULL;
  free(dir);
  if (!d) return -1;
  long best = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long s;
    if (is_state_name(e->d_name, &s) && s > best) best = s;
  }
  closedir(d);
  return best;
}

/* Reads the parameters or moments from PATH into W or O, checking their
 * digest against SUMS. */
static int read_floats(const char *path, rg_weights *w, rg_optimizer *o, bool moments, const rg_manifest *sums,
                       const char *sums_path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return rg_error_set("%s: %s", path, strerror(errno));
  size_t want = 0;
  for (int i = 0; i < rg_weights_count(w); i++) want += param_len(w, i) * (moments ? 2 : 1);
  int rc = 0;
  if (fseek(fp, 0, SEEK_END) != 0 || (size_t)ftell(fp) != want * sizeof(float))
    rc = rg_error_set("%s: %ld bytes, but this run's %d parameters need %zu (a state of another model or mode?)", path,
                      ftell(fp), rg_weights_count(w), want * sizeof(float));
  rewind(fp);
  const size_t most = largest_param(w);
  float *a = rc == 0 ? malloc(most * sizeof *a) : NULL, *b = rc == 0 && moments ? malloc(most * sizeof *b) : NULL;
  if (rc == 0 && (!a || (moments && !b))) rc = rg_error_set("%s: out of memory", path);
  rg_sha256 sum;
  rg_sha256_init(&sum);
  /* the values go in as they are read; a digest that differs fails the
   * load, and the caller discards the half-restored run */
  for (int i = 0; rc == 0 && i < rg_weights_count(w); i++) {
    const size_t n = param_len(w, i);
    if (fread(a, sizeof *a, n, fp) != n || (moments && fread(b, sizeof *b, n, fp) != n))
      rc = rg_error_set("%s: short read", path);
    if (rc == 0) rg_sha256_update(&sum, a, n * sizeof *a);
    if (rc == 0 && moments) rg_sha256_update(&sum, b, n * sizeof *b);
    if (rc == 0) rc = moments ? rg_optimizer_set_moments(o, i, a, b) : rg_weights_upload(w, i, a);
  }
  free(a), free(b);
  fclose(fp);
  if (rc < 0) return -1;
  uint8_t d[32];
  char hex[65];
  rg_sha256_final(&sum, d);
  rg_sha256_hex(d, hex);
  return rg_manifest_check_hex(sums, sums_path, path, moments ? "moments.f32" : "params.f32", hex);
}

static cJSON *read_meta(const char *path, const rg_manifest *sums, const char *sums_path) {
  size_t len = 0;
  char *text = rg_read_file(path, &len);
  if (!text) return NULL;
  rg_sha256 sum;
  uint8_t d[32];
  char hex[65];
  rg_sha256_init(&sum);
  rg_sha256_update(&sum, text, len);
  rg_sha256_final(&sum, d);
  rg_sha256_hex(d, hex);
  cJSON *root = rg_manifest_check_hex(sums, sums_path, path, "meta.json", hex) == 0 ? rg_json_parse_named(text, len, path) : NULL;
  free(text);
  return root;
}

int rg_train_state_load(const char *run_dir, long step, rg_weights *w, rg_optimizer *o, cJSON **meta) {
  char *dir = state_path(run_dir, step, "");
  char *params = dir ? rg_path_join(dir, "params.f32") : NULL, *moments = dir ? rg_path_join(dir, "moments.f32") : NULL;
  char *meta_path = dir ? rg_path_join(dir, "meta.json") : NULL, *sums_path = dir ? rg_path_join(dir, RG_MANIFEST_NAME) : NULL;
  int rc = dir && params && moments && meta_path && sums_path ? 0 : rg_error_set("out of memory");
  *meta = NULL;
  rg_manifest sums = {0};
  if (rc == 0 && !rg_path_exists(sums_path))
    rc = rg_error_set("%s: missing: the state's checksums are gone (a state of a refgeo before them, or damaged)",
                      sums_path);
  if (rc == 0) rc = rg_manifest_read(&sums, sums_path, true);
  if (rc == 0) rc = read_floats(params, w, o, false, &sums, sums_path);
  /* with ZeRO each rank reads its shard (rg_train_state_load_shard) */
  if (rc == 0 && !rg_optimizer_zero(o)) rc = read_floats(moments, w, o, true, &sums, sums_path);
  if (rc == 0 && !(*meta = read_meta(meta_path, &sums, sums_path))) rc = -1;
  rg_manifest_free(&sums);
  free(dir), free(params), free(moments), free(meta_path), free(sums_path);
  return rc;
}
