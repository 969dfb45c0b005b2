/* islands_sync.c: messages, the run file and global versions in the islands' shared directory (islands_sync.h). */
#include "adv_ft/islands_sync.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adv_ft/islands_quant.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/manifest.h"
#include "util/rng.h"
#include "util/sha256.h"

static const char MAGIC[8] = "RGISLE1";
enum { DIGEST_AT = 88 };

char *rg_isl_path(const char *sync_dir, const char *sub, const char *name) {
  char *dir = sub ? rg_path_join(sync_dir, sub) : strdup(sync_dir);
  char *p = dir && name ? rg_path_join(dir, name) : NULL;
  if (!name) return dir;
  free(dir);
  return p;
}

/* ------------------------------------------------------------ messages */

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void msg_digest(const uint8_t *msg, size_t payload, uint8_t out[32]) {
  rg_sha256 s;
  rg_sha256_init(&s);
  rg_sha256_update(&s, msg, DIGEST_AT);
  rg_sha256_update(&s, msg + RG_ISL_HEADER_BYTES, payload);
  rg_sha256_final(&s, out);
}

int rg_isl_msg_write(const char *path, rg_isl_msg *h, const float *x) {
  const size_t payload = rg_quant_bytes((rg_quant)h->encoding, (size_t)h->n, h->block);
  uint8_t *msg = calloc(1, RG_ISL_HEADER_BYTES + payload);
  if (!msg) return rg_error_set("%s: out of memory", path);
  memcpy(msg, MAGIC, 8);
  put32(msg + 8, (uint32_t)h->kind);
  put32(msg + 12, (uint32_t)h->encoding);
  put32(msg + 16, (uint32_t)h->block);
  put32(msg + 20, (uint32_t)h->island);
  put64(msg + 24, h->run_id);
  put64(msg + 32, (uint64_t)h->version);
  put64(msg + 40, (uint64_t)h->step);
  uint64_t w;
  memcpy(&w, &h->weight, 8);
  put64(msg + 48, w);
  put64(msg + 56, h->n);
  put64(msg + 64, payload);
  put64(msg + 72, h->fetched_bytes);
  put64(msg + 80, h->recovery_bytes);
  int rc = rg_quant_encode((rg_quant)h->encoding, h->block, x, (size_t)h->n, msg + RG_ISL_HEADER_BYTES);
  if (rc < 0) rg_error_prefix("%s", path);
  uint8_t d[32];
  msg_digest(msg, payload, d);
  memcpy(msg + DIGEST_AT, d, 32);
  rg_sha256_hex(d, h->digest);
  h->bytes = RG_ISL_HEADER_BYTES + payload;
  if (rc == 0) rc = rg_write_file_atomic(path, msg, RG_ISL_HEADER_BYTES + payload);
  free(msg);
  if (rc == 0) {
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = '\0';
    rc = dir ? rg_sync_dir(slash ? dir : ".") : rg_error_set("out of memory");
    free(dir);
  }
  return rc;
}

int rg_isl_msg_read(const char *path, rg_isl_msg *h, float **x) {
  size_t len = 0;
  uint8_t *msg = (uint8_t *)rg_read_file(path, &len);
  if (x) *x = NULL;
  if (!msg) return -1;
  int rc = 0;
  if (len < RG_ISL_HEADER_BYTES || memcmp(msg, MAGIC, 8) != 0) {
    rc = rg_error_set("%s: not an islands message (%zu bytes, no RGISLE1 header)", path, len);
    goto out;
  }
  *h = (rg_isl_msg){.kind = (int)get32(msg + 8), .encoding = (int)get32(msg + 12), .block = (int)get32(msg + 16),
                    .island = (int)get32(msg + 20), .run_id = get64(msg + 24), .version = (long long)get64(msg + 32),
                    .step = (long long)get64(msg + 40), .n = get64(msg + 56), .fetched_bytes = get64(msg + 72),
                    .recovery_bytes = get64(msg + 80), .bytes = len};
  const uint64_t w = get64(msg + 48), payload = get64(msg + 64);
  memcpy(&h->weight, &w, 8);
  if (h->kind != RG_ISL_CONTRIB && h->kind != RG_ISL_UPDATE) {
    rc = rg_error_set("%s: message kind %d is not 1 or 2", path, h->kind);
  } else if (h->encoding < 0 || h->encoding > RG_QUANT_INT4 || h->block < 1) {
    rc = rg_error_set("%s: encoding %d, block %d: no such encoding", path, h->encoding, h->block);
  } else if (h->n > 2 * (uint64_t)len || payload != rg_quant_bytes((rg_quant)h->encoding, (size_t)h->n, h->block) ||
             payload != len - RG_ISL_HEADER_BYTES) { /* no encoding takes less than half a byte a float */
    rc = rg_error_set("%s: %" PRIu64 " floats as %s, and the header says %" PRIu64 " payload bytes and the file has %zu",
                      path, h->n, rg_quant_name((rg_quant)h->encoding), payload, len - RG_ISL_HEADER_BYTES);
  } else {
    uint8_t d[32];
    msg_digest(msg, (size_t)payload, d);
    rg_sha256_hex(msg + DIGEST_AT, h->digest);
    if (memcmp(d, msg + DIGEST_AT, 32) != 0) rc = rg_error_set("%s: damaged (its sha256 does not match its bytes)", path);
  }
  if (rc == 0 && x) {
    *x = malloc((h->n ? (size_t)h->n : 1) * sizeof **x);
    if (!*x) rc = rg_error_set("%s: out of memory", path);
    else rg_quant_decode((rg_quant)h->encoding, h->block, msg + RG_ISL_HEADER_BYTES, (size_t)h->n, *x);
  }
out:
  free(msg);
  return rc;
}

/* ------------------------------------------------------------ run file */

void rg_isl_shape(const rg_weights *w, char hex[65], uint64_t *n) {
  rg_sha256 s;
  uint8_t d[32];
  *n = 0;
  rg_sha256_init(&s);
  for (int i = 0; i < rg_weights_count(w); i++) {
    const rg_tensor *t = rg_weights_tensor(w, i);
    char line[320];
    const int len = snprintf(line, sizeof line, "%s %lld\n", t->name, (long long)rg_tensor_nelems(t));
    rg_sha256_update(&s, line, (size_t)len);
    *n += (uint64_t)rg_tensor_nelems(t);
  }
  rg_sha256_final(&s, d);
  rg_sha256_hex(d, hex);
}

uint64_t rg_isl_new_run_id(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return rg_mix64((uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40));
}

int rg_isl_run_write(const char *sync_dir, const rg_isl_run *r) {
  char *path = rg_isl_path(sync_dir, NULL, "run.json"), text[1024], settings[512] = "";
  if (r->has_settings) /* %.17g: the doubles read back exactly */
    snprintf(settings, sizeof settings,
             ", \"outer_lr\": %.17g, \"outer_momentum\": %.17g, \"nesterov\": %s, \"compression\": \"%s\", "
             "\"block_size\": %d, \"max_staleness\": %d",
             r->outer_lr, r->outer_momentum, r->nesterov ? "true" : "false", rg_quant_name((rg_quant)r->encoding), r->block,
             r->max_staleness);
  const int len = snprintf(text, sizeof text,
                           "{\"format\": \"refgeo-islands 1\", \"run_id\": \"%016" PRIx64 "\", \"params\": %" PRIu64
                           ", \"shape_sha256\": \"%s\", \"islands\": %d%s}\n",
                           r->run_id, r->n, r->shape, r->islands, settings);
  int rc = path ? rg_write_file_atomic(path, text, (size_t)len) : rg_error_set("out of memory");
  if (rc == 0) rc = rg_sync_dir(sync_dir);
  free(path);
  return rc;
}

int rg_isl_final_write(const char *sync_dir, long v, long long merged_updates) {
  char *path = rg_isl_path(sync_dir, NULL, "final.json"), text[128];
  const int len = snprintf(text, sizeof text, "{\"version\": %ld, \"merged_updates\": %lld}\n", v, merged_updates);
  int rc = path ? rg_write_file_atomic(path, text, (size_t)len) : rg_error_set("out of memory");
  if (rc == 0) rc = rg_sync_dir(sync_dir);
  free(path);
  return rc;
}

int rg_isl_final_read(const char *sync_dir, long *v, long long *merged_updates) {
  char *path = rg_isl_path(sync_dir, NULL, "final.json");
  if (!path) return rg_error_set("out of memory");
  if (!rg_path_exists(path)) {
    free(path);
    return 0;
  }
  cJSON *j = rg_json_read_file(path);
  const cJSON *jv = cJSON_GetObjectItemCaseSensitive(j, "version"), *jm = cJSON_GetObjectItemCaseSensitive(j, "merged_updates");
  int rc = j ? 1 : -1;
  if (rc == 1 && (!cJSON_IsNumber(jv) || jv->valuedouble < 0 || !cJSON_IsNumber(jm) || jm->valuedouble < 0))
    rc = rg_error_set("%s: not a run's end (version, merged_updates)", path);
  if (rc == 1) {
    *v = (long)jv->valuedouble;
    if (merged_updates) *merged_updates = (long long)jm->valuedouble;
  }
  cJSON_Delete(j);
  free(path);
  return rc;
}

int rg_isl_run_read(const char *sync_dir, rg_isl_run *r) {
  char *path = rg_isl_path(sync_dir, NULL, "run.json");
  if (!path) return rg_error_set("out of memory");
  if (!rg_path_exists(path)) {
    free(path);
    return 1;
  }
  cJSON *j = rg_json_read_file(path);
  int rc = j ? 0 : -1;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format"), *id = cJSON_GetObjectItemCaseSensitive(j, "run_id"),
              *n = cJSON_GetObjectItemCaseSensitive(j, "params"), *sh = cJSON_GetObjectItemCaseSensitive(j, "shape_sha256"),
              *k = cJSON_GetObjectItemCaseSensitive(j, "islands");
  if (rc == 0 && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "refgeo-islands 1") != 0 || !cJSON_IsString(id) ||
                  !cJSON_IsNumber(n) || !cJSON_IsString(sh) || strlen(sh->valuestring) != 64 || !cJSON_IsNumber(k)))
    rc = rg_error_set("%s: not a refgeo-islands 1 run file (format, run_id, params, shape_sha256, islands)", path);
  if (rc == 0) {
    char *end;
    errno = 0;
    r->run_id = strtoull(id->valuestring, &end, 16);
    if (errno || *end) rc = rg_error_set("%s: run_id \"%s\" is not a hex number", path, id->valuestring);
    r->n = (uint64_t)n->valuedouble;
    r->islands = k->valueint;
    memcpy(r->shape, sh->valuestring, 65);
  }
  const cJSON *lr = cJSON_GetObjectItemCaseSensitive(j, "outer_lr"), *mu = cJSON_GetObjectItemCaseSensitive(j, "outer_momentum"),
              *nest = cJSON_GetObjectItemCaseSensitive(j, "nesterov"), *enc = cJSON_GetObjectItemCaseSensitive(j, "compression"),
              *blk = cJSON_GetObjectItemCaseSensitive(j, "block_size"), *st = cJSON_GetObjectItemCaseSensitive(j, "max_staleness");
  r->has_settings = lr || mu || nest || enc || blk || st;
  if (rc == 0 && r->has_settings) {
    if (!cJSON_IsNumber(lr) || !cJSON_IsNumber(mu) || !cJSON_IsBool(nest) || !cJSON_IsString(enc) ||
        rg_quant_parse(enc->valuestring) < 0 || !cJSON_IsNumber(blk) || blk->valueint < 1 || !cJSON_IsNumber(st) ||
        st->valueint < 0)
      rc = rg_error_set("%s: outer_lr, outer_momentum, nesterov, compression, block_size, max_staleness: one missing or bad", path);
    else
      r->outer_lr = lr->valuedouble, r->outer_momentum = mu->valuedouble, r->nesterov = cJSON_IsTrue(nest),
      r->encoding = rg_quant_parse(enc->valuestring), r->block = blk->valueint, r->max_staleness = st->valueint;
  }
  cJSON_Delete(j);
  free(path);
  return rc;
}

/* ------------------------------------------------------------ versions */

static char *version_dir(const char *sync_dir, long v, const char *suffix) {
  char name[64];
  snprintf(name, sizeof name, "v%ld%s", v, suffix);
  return rg_isl_path(sync_dir, "global", name);
}

/* The version V of a folder name "v<V>" (no suffix), or -1. */
static long parse_version(const char *name) {
  if (name[0] != 'v' || name[1] < '0' || name[1] > '9') return -1;
  char *end;
  errno = 0;
  const long v = strtol(name + 1, &end, 10);
  return errno || *end ? -1 : v;
}

long rg_isl_latest(const char *sync_dir) {
  char *dir = rg_isl_path(sync_dir, "global", NULL);
  DIR *d = dir ? opendir(dir) : NULL;
  free(dir);
  long best = -1;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    const long v = parse_version(e->d_name);
    if (v > best) best = v;
  }
  if (d) closedir(d);
  return best;
}

static int write_floats_file(const char *dir, const char *name, const float *x, size_t n, rg_manifest *m) {
  char *p = rg_path_join(dir, name), hex[65];
  int rc = p ? rg_write_file_atomic(p, x, n * sizeof *x) : rg_error_set("out of memory"); /* little-endian hosts only (CMakeLists) */
  rg_isl_floats_digest(x, n, hex);
  if (rc == 0) rc = rg_manifest_set(m, name, hex);
  free(p);
  return rc;
}

void rg_isl_floats_digest(const float *x, size_t n, char hex[65]) {
  uint8_t d[32];
  rg_sha256 s;
  rg_sha256_init(&s);
  rg_sha256_update(&s, x, n * sizeof *x);
  rg_sha256_final(&s, d);
  rg_sha256_hex(d, hex);
}

int rg_isl_version_write(const char *sync_dir, long v, const float *theta, const float *momentum, size_t n,
                         const char *update_tmp, const cJSON *record) {
  char *tmp = version_dir(sync_dir, v, ".tmp"), *final = version_dir(sync_dir, v, ""), *global = rg_isl_path(sync_dir, "global", NULL);
  char *text = cJSON_Print(record);
  rg_manifest m = {0};
  int rc = tmp && final && global && text ? 0 : rg_error_set("out of memory");
  if (rc == 0 && rg_is_dir(tmp)) rc = rg_remove_flat_dir(tmp);
  if (rc == 0) rc = rg_mkdir_p(tmp);
  if (rc == 0) rc = write_floats_file(tmp, "theta.f32", theta, n, &m);
  if (rc == 0) rc = write_floats_file(tmp, "momentum.f32", momentum, n, &m);
  if (rc == 0) {
    char *p = rg_path_join(tmp, "record.json"), hex[65];
    rc = p ? rg_write_file_atomic(p, text, strlen(text)) : rg_error_set("out of memory");
    if (rc == 0) rc = rg_sha256_file(p, hex);
    if (rc == 0) rc = rg_manifest_set(&m, "record.json", hex);
    free(p);
  }
  if (rc == 0 && update_tmp) {
    char *p = rg_path_join(tmp, "update.msg"), hex[65];
    rc = !p ? rg_error_set("out of memory") : rename(update_tmp, p) != 0 ? rg_error_set("%s: %s", update_tmp, strerror(errno)) : 0;
    if (rc == 0) rc = rg_sha256_file(p, hex);
    if (rc == 0) rc = rg_manifest_set(&m, "update.msg", hex);
    free(p);
  }
  if (rc == 0) {
    char *p = rg_path_join(tmp, RG_MANIFEST_NAME);
    rc = p ? rg_manifest_write(&m, p) : rg_error_set("out of memory");
    free(p);
  }
  if (rc == 0) rc = rg_sync_dir(tmp);
  rg_fault_point("islands-version"); /* tests: a kill with the version written, not yet in place */
  if (rc == 0 && rename(tmp, final) != 0) rc = rg_error_set("%s: cannot rename to %s: %s", tmp, final, strerror(errno));
  if (rc == 0) rc = rg_sync_dir(global);
  rg_manifest_free(&m);
  free(text), free(tmp), free(final), free(global);
  return rc;
}

static int version_manifest(const char *sync_dir, long v, rg_manifest *m, char **dir, char **sums) {
  *dir = version_dir(sync_dir, v, "");
  *sums = *dir ? rg_path_join(*dir, RG_MANIFEST_NAME) : NULL;
  if (!*sums) return rg_error_set("out of memory");
  return rg_manifest_read(m, *sums, true);
}

int rg_isl_version_digest(const char *sync_dir, long v, const char *file, char hex[65]) {
  rg_manifest m = {0};
  char *dir = NULL, *sums = NULL;
  int rc = version_manifest(sync_dir, v, &m, &dir, &sums);
  const char *h = rc == 0 ? rg_manifest_get(&m, file) : NULL;
  if (rc == 0 && !h) rc = rg_error_set("%s: no entry for %s", sums, file);
  if (rc == 0) memcpy(hex, h, 65);
  rg_manifest_free(&m);
  free(dir), free(sums);
  return rc;
}

int rg_isl_version_floats(const char *sync_dir, long v, const char *file, float *x, size_t n, uint64_t *bytes) {
  rg_manifest m = {0};
  char *dir = NULL, *sums = NULL, *path = NULL;
  int rc = version_manifest(sync_dir, v, &m, &dir, &sums);
  size_t len = 0;
  char *data = NULL;
  if (rc == 0 && !(path = rg_path_join(dir, file))) rc = rg_error_set("out of memory");
  if (rc == 0 && !(data = rg_read_file(path, &len))) rc = -1;
  if (rc == 0 && len != n * sizeof *x)
    rc = rg_error_set("%s: %zu bytes, and the run's %zu floats need %zu", path, len, n, n * sizeof *x);
  if (rc == 0) {
    char hex[65];
    rg_isl_floats_digest((const float *)(void *)data, n, hex);
    rc = rg_manifest_check_hex(&m, sums, path, file, hex);
  }
  if (rc == 0) memcpy(x, data, len);
  if (rc == 0 && bytes) *bytes += len;
  rg_manifest_free(&m);
  free(data), free(path), free(dir), free(sums);
  return rc;
}

cJSON *rg_isl_version_record(const char *sync_dir, long v) {
  rg_manifest m = {0};
  char *dir = NULL, *sums = NULL;
  cJSON *j = NULL;
  if (version_manifest(sync_dir, v, &m, &dir, &sums) == 0 && rg_manifest_check(&m, sums, dir, "record.json") == 0) {
    char *p = rg_path_join(dir, "record.json");
    j = p ? rg_json_read_file(p) : NULL;
    free(p);
  }
  rg_manifest_free(&m);
  free(dir), free(sums);
  return j;
}

int rg_isl_retire(const char *sync_dir, long v) {
  char *dir = rg_isl_path(sync_dir, "global", NULL);
  DIR *d = dir ? opendir(dir) : NULL;
  int rc = d ? 0 : rg_error_set("%s: %s", dir ? dir : sync_dir, dir ? strerror(errno) : "out of memory");
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    const bool partial = e->d_name[0] == 'v' && len > 4 && (strcmp(e->d_name + len - 4, ".tmp") == 0 || strcmp(e->d_name + len - 4, ".old") == 0);
    const long ver = parse_version(e->d_name);
    if (!partial && (ver <= 0 || ver > v - RG_ISL_KEEP_VERSIONS)) continue; /* v0 stays: a replay starts there */
    char *p = rg_path_join(dir, e->d_name), *old = NULL;
    if (!p) rc = rg_error_set("out of memory");
    if (rc == 0 && !partial) { /* renamed first: a reader never sees a half-deleted version under its name */
      old = malloc(strlen(p) + 5);
      if (!old) rc = rg_error_set("out of memory");
      else sprintf(old, "%s.old", p);
      if (rc == 0 && rename(p, old) != 0) rc = rg_error_set("%s: %s", p, strerror(errno));
    }
    if (rc == 0) rc = rg_remove_flat_dir(old ? old : p);
    free(p), free(old);
  }
  if (d) closedir(d);
  free(dir);
  return rc;
}
