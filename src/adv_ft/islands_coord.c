/* islands_coord.c: the coordinator's polls, outer steps and replay (islands_coord.h). */
#include "adv_ft/islands_coord.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adv_ft/islands_quant.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/json.h"

/* A contribution seen in SYNC/contrib and found sound. */
typedef struct {
  char *name;
  rg_isl_msg h;
  off_t size;
  ino_t ino;
  struct timespec mtime;
} pending;

struct rg_isl_coord {
  char *dir;
  rg_isl_coord_opts o;
  rg_isl_run run;
  long version;
  bool started; /* the momentum holds b_{t-1} (PyTorch's buffer exists) */
  float *theta, *momentum, *mean, *u, *mom_saved;
  double *acc;
  pending *p;
  int n_p, cap_p;
  double since;       /* when the last version was made (or the coordinator started) */
  double first_seen;  /* when the oldest admissible contribution was seen; < 0: none */
  long dropped_total;
  long long *last_step; /* per island: the newest step merged (-1: none), as in the newest version's record */
  long long merged;     /* inner updates merged into versions 1..version (the newest record's merged_updates) */
};

long rg_isl_coord_version(const rg_isl_coord *c) { return c->version; }

/* ------------------------------------------------------------ the log */

static const char LOG_HEADER[] = "outer_step,islands_reporting,contributors,quorum_wait_s,bytes_received,bytes_sent,"
                                 "update_bytes,recovery_bytes,staleness_max,outer_lr,dropped\n";

/* The newest outer step in islands_log.csv (0 when none). */
static long log_last(const char *path) {
  size_t len;
  char *text = rg_path_exists(path) ? rg_read_file(path, &len) : NULL;
  long last = 0;
  for (char *line = text ? strchr(text, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) last = atol(line + 1);
  free(text);
  rg_error_clear();
  return last;
}

/* Appends version V's row, from its record, to islands_log.csv (the file
 * rewritten atomically). */
static int log_append(const rg_isl_coord *c, long v, const cJSON *rec) {
  char *path = rg_isl_path(c->dir, NULL, "islands_log.csv");
  if (!path) return rg_error_set("out of memory");
  size_t len = 0;
  char *old = rg_path_exists(path) ? rg_read_file(path, &len) : strdup(LOG_HEADER);
  if (!old) len = 0, old = strdup(LOG_HEADER);
  if (old && len == 0) len = strlen(old);
  const cJSON *log = cJSON_GetObjectItemCaseSensitive(rec, "log"), *con = cJSON_GetObjectItemCaseSensitive(rec, "contributors");
  char who[1024] = "";
  const cJSON *e;
  int islands = 0; /* distinct islands: one may send several steps into a version */
  for (int i = 0; i < cJSON_GetArraySize(con); i++) {
    const int id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(con, i), "island")->valueint;
    bool earlier = false;
    for (int j = 0; j < i; j++) earlier |= cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(con, j), "island")->valueint == id;
    islands += !earlier;
  }
  cJSON_ArrayForEach(e, con) {
    const size_t at = strlen(who);
    snprintf(who + at, sizeof who - at, "%si%d@v%d", at ? " " : "", cJSON_GetObjectItemCaseSensitive(e, "island")->valueint,
             cJSON_GetObjectItemCaseSensitive(e, "base")->valueint);
  }
#define L(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(log, k))
  char row[1400];
  const int n = snprintf(row, sizeof row, "%ld,%d,%s,%.3f,%.0f,%.0f,%.0f,%.0f,%.0f,%.9g,%.0f\n", v, islands,
                         who, L("quorum_wait_s"), L("bytes_received"), L("bytes_sent"), L("update_bytes"),
                         L("recovery_bytes"), L("staleness_max"), c->o.outer.lr, L("dropped"));
#undef L
  char *text = old ? malloc(len + (size_t)n + 1) : NULL;
  int rc = text ? 0 : rg_error_set("out of memory");
  if (rc == 0) {
    memcpy(text, old, len);
    memcpy(text + len, row, (size_t)n + 1);
    rc = rg_write_file_atomic(path, text, len + (size_t)n);
  }
  free(text), free(old), free(path);
  return rc;
}

/* ------------------------------------------------------------ drops */

static int drop(rg_isl_coord *c, const char *name, const char *why) {
  char *src = rg_isl_path(c->dir, "contrib", name), *dst_dir = rg_isl_path(c->dir, "dropped", NULL);
  char *log = rg_isl_path(c->dir, NULL, "dropped.log"), dst_name[512];
  snprintf(dst_name, sizeof dst_name, "%s.v%ld.%ld", name, c->version, ++c->dropped_total);
  char *dst = dst_dir ? rg_path_join(dst_dir, dst_name) : NULL;
  int rc = src && dst && log ? rg_mkdir_p(dst_dir) : rg_error_set("out of memory");
  if (rc == 0 && rename(src, dst) != 0 && errno != ENOENT) rc = rg_error_set("%s: %s", src, strerror(errno));
  fprintf(stderr, "islands: dropped contrib/%s at version %ld: %s\n", name, c->version, why);
  FILE *fp = rc == 0 ? fopen(log, "a") : NULL;
  if (fp) {
    fprintf(fp, "%ld\tv%ld\tcontrib/%s\t%s\n", (long)time(NULL), c->version, name, why);
    fflush(fp);
    fsync(fileno(fp));
    fclose(fp);
  }
  free(src), free(dst), free(dst_dir), free(log);
  return rc;
}

/* Why message H (sound as a message), the file contrib/NAME, cannot be merged at this version, or NULL. */
static const char *refusal(const rg_isl_coord *c, const char *name, const rg_isl_msg *h, char *why, size_t len) {
  char want[64];
  snprintf(want, sizeof want, "i%d-s%lld.msg", h->island, h->step);
  if (h->kind != RG_ISL_CONTRIB) snprintf(why, len, "an update message where contributions go");
  else if (h->run_id != c->run.run_id)
    snprintf(why, len, "from another run (run_id %016" PRIx64 ", this run's is %016" PRIx64 ")", h->run_id, c->run.run_id);
  else if (h->n != c->run.n) snprintf(why, len, "a pseudo-gradient of %" PRIu64 " floats; the run's parameters have %" PRIu64, h->n, c->run.n);
  else if (h->island < 0 || h->island >= c->o.islands) snprintf(why, len, "island %d, and the run has %d (0..%d)", h->island, c->o.islands, c->o.islands - 1);
  else if (!(h->weight > 0) || !isfinite(h->weight)) snprintf(why, len, "weight %g is not positive", h->weight);
  else if (h->version < 0) snprintf(why, len, "base version %lld is negative", h->version);
  else if (h->version > c->version) snprintf(why, len, "based on version %lld, which this run has not made (it is at %ld)", h->version, c->version);
  else if (c->version - h->version > c->o.max_staleness)
    snprintf(why, len, "staleness %lld (based on version %lld, now %ld) exceeds max_staleness %d", c->version - h->version,
             h->version, c->version, c->o.max_staleness);
  /* a restarted island redoes the updates since its last saved state and
   * sends their step again: merged once already, it would count twice */
  else if (h->step <= c->last_step[h->island])
    snprintf(why, len, "island %d's step %lld is merged already (its newest merged step is %lld)", h->island, h->step,
             c->last_step[h->island]);
  else if (strcmp(name, want) != 0)
    snprintf(why, len, "named %s, and its header says island %d, step %lld (%s)", name, h->island, h->step, want);
  else return NULL;
  return why;
}

/* Why the decoded values D[0..n) of H cannot be merged: a value that is
 * not finite (a NaN or infinite float or bf16, a NaN or infinite int8/int4
 * scale: the encoder refuses these, a crafted message need not), or a
 * weight whose product with the largest value overflows; NULL when sound. */
static const char *not_finite(const rg_isl_msg *h, const float *d, size_t n, char *why, size_t len) {
  float amax = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(d[i])) {
      snprintf(why, len, "element %zu is not finite (%g)", i, (double)d[i]);
      return why;
    }
    amax = fmaxf(amax, fabsf(d[i]));
  }
  if (isfinite(h->weight * (double)amax)) return NULL;
  snprintf(why, len, "weight %g times its largest |value| %g is not finite", h->weight, (double)amax);
  return why;
}

static bool all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return false;
  return true;
}

/* ------------------------------------------------------------ pending set */

static bool is_msg_name(const char *name) {
  const size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".msg") == 0 && name[0] != '.';
}

/* Scans SYNC/contrib: new or changed files are read and checked (the bad
 * dropped), vanished ones forgotten. */
static int scan(rg_isl_coord *c) {
  char *dir = rg_isl_path(c->dir, "contrib", NULL);
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) {
    free(dir);
    return rg_error_set("%s/contrib: %s", c->dir, strerror(errno));
  }
  for (int i = 0; i < c->n_p; i++) c->p[i].h.bytes = 0; /* marks unseen */
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (!is_msg_name(e->d_name)) continue;
    char *path = rg_path_join(dir, e->d_name);
    struct stat st;
    if (!path || stat(path, &st) != 0) {
      free(path);
      continue; /* gone meanwhile */
    }
    int at = -1;
    for (int i = 0; i < c->n_p; i++)
      if (strcmp(c->p[i].name, e->d_name) == 0) at = i;
    if (at >= 0 && c->p[at].size == st.st_size && c->p[at].ino == st.st_ino && c->p[at].mtime.tv_sec == st.st_mtim.tv_sec &&
        c->p[at].mtime.tv_nsec == st.st_mtim.tv_nsec) {
      c->p[at].h.bytes = (uint64_t)st.st_size;
      free(path);
      continue;
    }
    rg_isl_msg h;
    char why[512];
    const char *no = NULL;
    float *vals = NULL;
    if (rg_isl_msg_read(path, &h, &vals) < 0) {
      snprintf(why, sizeof why, "%s", rg_error_get());
      no = why;
    } else {
      no = refusal(c, e->d_name, &h, why, sizeof why);
      if (!no) no = not_finite(&h, vals, (size_t)h.n, why, sizeof why);
    }
    free(vals), free(path);
    if (no) {
      if (at >= 0) c->p[at].h.bytes = 0;
      rc = drop(c, e->d_name, no);
      continue;
    }
    if (at < 0) {
      if (c->n_p == c->cap_p) {
        const int cap = c->cap_p ? 2 * c->cap_p : 16;
        pending *grown = realloc(c->p, (size_t)cap * sizeof *grown);
        if (!grown) {
          rc = rg_error_set("out of memory");
          break;
        }
        c->p = grown, c->cap_p = cap;
      }
      at = c->n_p++;
      c->p[at] = (pending){.name = strdup(e->d_name)};
      if (!c->p[at].name) rc = rg_error_set("out of memory");
    }
    c->p[at].h = h;
    c->p[at].size = st.st_size, c->p[at].ino = st.st_ino, c->p[at].mtime = st.st_mtim;
  }
  closedir(d);
  free(dir);
  int kept = 0; /* forget what is gone (or was dropped) */
  for (int i = 0; i < c->n_p; i++) {
    if (c->p[i].h.bytes) c->p[kept++] = c->p[i];
    else free(c->p[i].name);
  }
  c->n_p = kept;
  return rc;
}

/* Merge order: island id, then its step; never arrival order. */
static int by_island(const void *a, const void *b) {
  const pending *x = a, *y = b;
  if (x->h.island != y->h.island) return x->h.island < y->h.island ? -1 : 1;
  return x->h.step < y->h.step ? -1 : x->h.step > y->h.step;
}

static int n_done(const rg_isl_coord *c) {
  int n = 0;
  for (int i = 0; i < c->o.islands; i++) {
    char name[32];
    snprintf(name, sizeof name, "i%d", i);
    char *p = rg_isl_path(c->dir, "done", name);
    n += p && rg_path_exists(p);
    free(p);
  }
  return n;
}

/* ------------------------------------------------------------ merged steps */

static cJSON *last_step_json(const long long *last, int k) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < k; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)last[i]));
  return a;
}

/* Each island's newest merged step up to version V into LAST[0..k): from
 * V's record (REC), or, for a record without "last_step" (a run of an
 * older refgeo), from the archived records of versions 1..V. 0 or -1. */
static int last_steps(const char *sync_dir, long v, const cJSON *rec, long long *last, int k) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(rec, "last_step"), *e;
  for (int i = 0; i < k; i++) last[i] = -1;
  if (cJSON_IsArray(a)) {
    if (cJSON_GetArraySize(a) != k) return rg_error_set("%s: version %ld's last_step has %d islands, and the run %d", sync_dir, v, cJSON_GetArraySize(a), k);
    int i = 0;
    cJSON_ArrayForEach(e, a) last[i++] = (long long)cJSON_GetNumberValue(e);
    return 0;
  }
  for (long u = 1; u <= v; u++) {
    char name[48];
    snprintf(name, sizeof name, "v%ld/record.json", u);
    char *p = rg_isl_path(sync_dir, "archive", name);
    cJSON *r = p ? rg_json_read_file(p) : NULL;
    free(p);
    if (!r) return rg_error_prefix("%s: the steps merged up to version %ld", sync_dir, v);
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(r, "contributors")) {
      const int i = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "island"));
      const long long st = (long long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "step"));
      if (i >= 0 && i < k && st > last[i]) last[i] = st;
    }
    cJSON_Delete(r);
  }
  return 0;
}

/* ------------------------------------------------------------ the outer step */

/* Encodes U with O's encoding into BUF and decodes it back into U: the
 * update every copy applies. */
static int round_trip(const rg_isl_coord_opts *o, float *u, size_t n) {
  uint8_t *buf = malloc(rg_quant_bytes((rg_quant)o->encoding, n, o->block) + 1);
  if (!buf) return rg_error_set("out of memory");
  const int rc = rg_quant_encode((rg_quant)o->encoding, o->block, u, n, buf);
  if (rc == 0) rg_quant_decode((rg_quant)o->encoding, o->block, buf, n, u);
  free(buf);
  return rc;
}

/* The outer step from the accumulated ACC (TOTAL weight): momentum,
 * update U, the message UM of U written to MSG_PATH (when not NULL), and
 * theta -= the decoded U, the bits every island applies from that message.
 * Shared by the coordinator and the replay. 1 with the error set and
 * nothing changed (MOM restored from MOM_SAVED, N floats of scratch) when
 * the mean or the update is not finite: contributions each finite can
 * still overflow together. */
static int outer_step(const rg_isl_coord_opts *o, float *theta, float *mom, float *mom_saved, bool *started, float *mean,
                      float *u, const double *acc, double total, size_t n, const char *msg_path, rg_isl_msg *um) {
  rg_outer_mean(mean, acc, total, n);
  if (!isfinite(total) || !all_finite(mean, n)) {
    rg_error_set("the mean is not finite");
    return 1;
  }
  memcpy(mom_saved, mom, n * sizeof *mom);
  rg_outer_update(&o->outer, u, mean, mom, !*started, n);
  if (!all_finite(u, n)) {
    memcpy(mom, mom_saved, n * sizeof *mom);
    rg_error_set("the outer update is not finite");
    return 1;
  }
  *started = true;
  if (msg_path && rg_isl_msg_write(msg_path, um, u) < 0) return -1;
  if (round_trip(o, u, n) < 0) return rg_error_prefix("outer update");
  rg_outer_apply(theta, u, n);
  return 0;
}

/* SYNC/archive/v<V>/ (malloc'd). */
static char *archive_dir(const rg_isl_coord *c, long v) {
  char name[32];
  snprintf(name, sizeof name, "v%ld", v);
  return rg_isl_path(c->dir, "archive", name);
}

/* Removes contrib/NAME when it is still the file archived as
 * archive/v<V>/NAME (the same inode: merged into V); a file sent again
 * since under that name is a new contribution and stays. */
static int retire_contrib(const rg_isl_coord *c, long v, const char *name) {
  char *adir = archive_dir(c, v), *src = rg_isl_path(c->dir, "contrib", name), *dst = adir ? rg_path_join(adir, name) : NULL;
  struct stat a, b;
  int rc = src && dst ? 0 : rg_error_set("out of memory");
  if (rc == 0 && stat(src, &a) == 0 && stat(dst, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
      unlink(src) != 0 && errno != ENOENT)
    rc = rg_error_set("%s: %s", src, strerror(errno));
  free(adir), free(src), free(dst);
  return rc;
}

static int step(rg_isl_coord *c) {
  const size_t n = (size_t)c->run.n;
  qsort(c->p, (size_t)c->n_p, sizeof *c->p, by_island);
  memset(c->acc, 0, n * sizeof *c->acc);
  cJSON *rec = cJSON_CreateObject(), *con = cJSON_CreateArray(), *log = cJSON_CreateObject();
  if (!rec || !con || !log) {
    cJSON_Delete(rec), cJSON_Delete(con), cJSON_Delete(log);
    return rg_error_set("out of memory");
  }
  cJSON_AddItemToObject(rec, "contributors", con);
  double total = 0, received = 0, sent = 0, recovery = 0, stale = 0;
  long long covered = 0; /* inner updates the merged contributions hold */
  const long v = c->version + 1;
  long long *next = malloc((size_t)c->o.islands * sizeof *next); /* last_step once V is made */
  if (next) memcpy(next, c->last_step, (size_t)c->o.islands * sizeof *next);
  /* each contribution is hard-linked into archive/v<V>/ first and read
   * from there: the archive holds exactly the bytes merged, whatever an
   * island renames over contrib/ meanwhile (a restarted island sends a
   * step again), and it is complete before version V exists */
  char *adir = archive_dir(c, v);
  int k = 0, rc = adir && next ? 0 : rg_error_set("out of memory"), i = 0;
  if (rc == 0 && rg_is_dir(adir)) rc = rg_remove_flat_dir(adir); /* left by a coordinator killed before V */
  if (rc == 0) rc = rg_mkdir_p(adir);
  for (; rc == 0 && i < c->n_p; i++) {
    char *src = rg_isl_path(c->dir, "contrib", c->p[i].name), *path = rg_path_join(adir, c->p[i].name);
    float *d = NULL;
    rg_isl_msg h;
    char why[512];
    const char *no = NULL;
    bool skip = false;
    if (!src || !path) rc = rg_error_set("out of memory");
    else if (link(src, path) != 0) skip = errno == ENOENT, rc = skip ? 0 : rg_error_set("%s: cannot link into %s: %s", src, adir, strerror(errno));
    else if (rg_isl_msg_read(path, &h, &d) < 0) snprintf(why, sizeof why, "%s", rg_error_get()), no = why;
    /* replaced since the scan (a restarted island sent it again): the next scan checks it anew */
    else skip = strcmp(h.digest, c->p[i].h.digest) != 0;
    if (!skip && !no && !isfinite(total + h.weight))
      snprintf(why, sizeof why, "the pending weights' sum %g + %g is not finite", total, h.weight), no = why;
    if (!skip && !no && h.step <= next[h.island]) /* the scan refuses these; kept exact here */
      snprintf(why, sizeof why, "island %d's step %lld is merged already", h.island, h.step), no = why;
    if (skip || no) unlink(path);
    free(src), free(path);
    if (skip) {
      free(d);
      free(c->p[i].name);
      continue;
    }
    if (rc == 0 && no) {
      free(d);
      rc = drop(c, c->p[i].name, no);
      free(c->p[i].name);
      continue;
    }
    if (rc < 0) break;
    rg_outer_accumulate(c->acc, d, h.weight, n);
    free(d);
    next[h.island] = h.step;
    covered += c->o.inner_steps > 0 ? (h.step - 1) % c->o.inner_steps + 1 : 1;
    total += h.weight;
    received += (double)h.bytes, sent += (double)h.fetched_bytes, recovery += (double)h.recovery_bytes;
    stale = fmax(stale, (double)(c->version - h.version));
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "island", h.island);
    cJSON_AddNumberToObject(e, "base", (double)h.version);
    cJSON_AddNumberToObject(e, "step", (double)h.step);
    cJSON_AddNumberToObject(e, "weight", h.weight);
    cJSON_AddNumberToObject(e, "staleness", (double)(c->version - h.version));
    cJSON_AddStringToObject(e, "file", c->p[i].name);
    cJSON_AddStringToObject(e, "sha256", h.digest);
    cJSON_AddItemToArray(con, e);
    c->p[k++] = c->p[i];
  }
  for (int j = rc < 0 && i < c->n_p ? i : c->n_p; j < c->n_p; j++) free(c->p[j].name); /* a failure: the rest */
  c->n_p = k; /* the merged ones, in merge order; the dropped are gone */
  if (rc == 0 && k == 0) { /* every one failed on the second read: nothing to merge */
    c->first_seen = -1;        /* the deadline counts from the next one seen */
    cJSON_Delete(rec), cJSON_Delete(log);
    rc = rg_remove_flat_dir(adir);
    free(adir), free(next);
    return rc;
  }
  char *upd = rg_isl_path(c->dir, "global", "update.msg.tmp");
  if (rc == 0 && !upd) rc = rg_error_set("out of memory");
  rg_isl_msg um = {.kind = RG_ISL_UPDATE, .encoding = c->o.encoding, .block = c->o.block, .island = -1,
                   .run_id = c->run.run_id, .version = v, .step = 0, .weight = total, .n = c->run.n};
  if (rc == 0) rc = outer_step(&c->o, c->theta, c->momentum, c->mom_saved, &c->started, c->mean, c->u, c->acc, total, n, upd, &um);
  if (rc == 1) { /* finite one by one, not merged: all dropped, nothing made */
    char why[600];
    snprintf(why, sizeof why, "merged with the other pending contributions, %s", rg_error_get());
    rg_error_clear();
    rc = 0;
    for (int j = 0; j < k; j++)
      if (rc == 0) rc = drop(c, c->p[j].name, why);
    for (int j = 0; j < k; j++) free(c->p[j].name);
    c->n_p = 0;
    c->first_seen = -1;
    if (rc == 0) rc = rg_remove_flat_dir(adir);
    cJSON_Delete(rec), cJSON_Delete(log);
    free(upd), free(adir), free(next);
    return rc;
  }
  cJSON_AddNumberToObject(rec, "version", (double)v);
  cJSON_AddBoolToObject(rec, "momentum_started", c->started);
  if (next) cJSON_AddItemToObject(rec, "last_step", last_step_json(next, c->o.islands));
  cJSON_AddNumberToObject(rec, "merged_updates", (double)(c->merged + covered));
  cJSON_AddNumberToObject(log, "quorum_wait_s", rg_now_seconds() - c->since);
  cJSON_AddNumberToObject(log, "bytes_received", received);
  cJSON_AddNumberToObject(log, "bytes_sent", sent);
  cJSON_AddNumberToObject(log, "update_bytes", (double)um.bytes);
  cJSON_AddNumberToObject(log, "recovery_bytes", recovery);
  cJSON_AddNumberToObject(log, "staleness_max", stale);
  cJSON_AddNumberToObject(log, "dropped", (double)c->dropped_total);
  cJSON_AddItemToObject(rec, "log", log);
  char *text = rc == 0 ? cJSON_Print(rec) : NULL, *rp = rc == 0 ? rg_path_join(adir, "record.json") : NULL;
  if (rc == 0) rc = text && rp ? rg_write_file_atomic(rp, text, strlen(text)) : rg_error_set("out of memory");
  if (rc == 0) rc = rg_sync_dir(adir);
  if (rc == 0) { /* archive/v<V>'s entry durable before V exists: a crash must not keep V and lose what made it */
    char *arch = rg_isl_path(c->dir, "archive", NULL);
    rc = arch ? rg_sync_dir(arch) : rg_error_set("out of memory");
    free(arch);
  }
  free(text), free(rp);
  if (rc == 0) rc = rg_isl_version_write(c->dir, v, c->theta, c->momentum, n, upd, rec);
  rg_fault_point("islands-archive"); /* tests: a kill with the version in place, its contributions still in contrib/ */
  if (rc == 0) c->version = v, c->merged += covered, memcpy(c->last_step, next, (size_t)c->o.islands * sizeof *next);
  for (int j = 0; rc == 0 && j < k; j++) rc = retire_contrib(c, v, c->p[j].name);
  if (rc == 0) {
    char *cdir = rg_isl_path(c->dir, "contrib", NULL);
    rc = cdir ? rg_sync_dir(cdir) : rg_error_set("out of memory");
    free(cdir);
  }
  if (rc == 0) rc = rg_isl_retire(c->dir, v);
  if (rc == 0) rc = log_append(c, v, rec);
  for (int j = 0; j < c->n_p; j++) free(c->p[j].name);
  c->n_p = 0;
  c->since = rg_now_seconds();
  c->first_seen = -1;
  cJSON_Delete(rec);
  free(upd), free(adir), free(next);
  return rc;
}

/* Ends the run at the newest version when it is due: run_updates merged,
 * or every island finished with nothing pending. *DONE: it has ended. */
static int end_when_due(rg_isl_coord *c, int finished, bool *done) {
  const bool reached = c->o.run_updates > 0 && c->merged >= c->o.run_updates;
  if (!reached && !(finished == c->o.islands && c->n_p == 0)) return 0;
  *done = true;
  return rg_isl_final_write(c->dir, c->version, c->merged);
}

int rg_isl_coord_poll(rg_isl_coord *c, bool *done) {
  *done = false;
  long final_v;
  const int ended = rg_isl_final_read(c->dir, &final_v, NULL);
  if (ended != 0) return *done = ended == 1, ended < 0 ? -1 : 0; /* a coordinator restarted after the end */
  if (c->o.run_updates > 0 && c->merged >= c->o.run_updates) return end_when_due(c, 0, done); /* killed before final.json */
  if (scan(c) < 0) return -1;
  int islands = 0, seen[4096] = {0};
  for (int i = 0; i < c->n_p; i++) {
    const int id = c->p[i].h.island;
    if (id < 4096 && !seen[id]) seen[id] = 1, islands++;
  }
  const int finished = n_done(c);
  int need = c->o.quorum < c->o.islands - finished ? c->o.quorum : c->o.islands - finished;
  if (need < 1) need = 1;
  const double now = rg_now_seconds();
  if (c->n_p && c->first_seen < 0) c->first_seen = now;
  if (c->n_p && (islands >= need || now - c->first_seen >= c->o.deadline_s)) {
    if (step(c) < 0) return -1;
    return c->o.run_updates > 0 ? end_when_due(c, 0, done) : 0;
  }
  return end_when_due(c, finished, done);
}

int rg_isl_coord_run(rg_isl_coord *c, double poll_s, long max_versions, FILE *log) {
  const long first = c->version;
  for (;;) {
    bool done;
    const long before = c->version;
    if (rg_isl_coord_poll(c, &done) < 0) return -1;
    if (log && c->version != before) fprintf(log, "islands: version %ld\n", c->version);
    if (done || (max_versions > 0 && c->version - first >= max_versions)) return 0;
    if (c->version == before) {
      struct timespec ts = {.tv_sec = (time_t)poll_s, .tv_nsec = (long)((poll_s - floor(poll_s)) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
}

/* ------------------------------------------------------------ open */

static void settings_from(rg_isl_run *r, const rg_isl_coord_opts *o) {
  r->has_settings = true;
  r->outer_lr = o->outer.lr, r->outer_momentum = o->outer.momentum, r->nesterov = o->outer.nesterov;
  r->encoding = o->encoding, r->block = o->block, r->max_staleness = o->max_staleness;
}

/* 0 when O (a config) has run R's settings, else -1 with one line naming the first that differs. */
static int settings_differ(const char *sync_dir, const rg_isl_run *r, const rg_isl_coord_opts *o) {
  char run[64] = "", mine[64] = "";
  const char *key = NULL;
  if (r->outer_lr != o->outer.lr) key = "outer_lr", snprintf(run, 64, "%.17g", r->outer_lr), snprintf(mine, 64, "%.17g", o->outer.lr);
  else if (r->outer_momentum != o->outer.momentum)
    key = "outer_momentum", snprintf(run, 64, "%.17g", r->outer_momentum), snprintf(mine, 64, "%.17g", o->outer.momentum);
  else if (r->nesterov != o->outer.nesterov) key = "nesterov", snprintf(run, 64, "%d", r->nesterov), snprintf(mine, 64, "%d", o->outer.nesterov);
  else if (r->encoding != o->encoding)
    key = "compression", snprintf(run, 64, "%s", rg_quant_name((rg_quant)r->encoding)), snprintf(mine, 64, "%s", rg_quant_name((rg_quant)o->encoding));
  else if (r->block != o->block) key = "block_size", snprintf(run, 64, "%d", r->block), snprintf(mine, 64, "%d", o->block);
  else if (r->max_staleness != o->max_staleness)
    key = "max_staleness", snprintf(run, 64, "%d", r->max_staleness), snprintf(mine, 64, "%d", o->max_staleness);
  if (!key) return 0;
  return rg_error_set("%s/run.json: %s is %s in this run and %s in this config: a run keeps its outer step's settings", sync_dir,
                      key, run, mine);
}

static int read_state(rg_isl_coord *c, long v) {
  const size_t n = (size_t)c->run.n;
  if (rg_isl_version_floats(c->dir, v, "theta.f32", c->theta, n, NULL) < 0 ||
      rg_isl_version_floats(c->dir, v, "momentum.f32", c->momentum, n, NULL) < 0)
    return -1;
  cJSON *rec = rg_isl_version_record(c->dir, v);
  if (!rec) return -1;
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "momentum_started");
  int rc = cJSON_IsBool(st) ? 0 : rg_error_set("%s: version %ld's record.json has no momentum_started", c->dir, v);
  c->started = cJSON_IsTrue(st);
  const cJSON *mu = cJSON_GetObjectItemCaseSensitive(rec, "merged_updates"); /* absent in an older refgeo's records: 0 */
  c->merged = cJSON_IsNumber(mu) ? (long long)mu->valuedouble : 0;
  if (rc == 0) rc = last_steps(c->dir, v, rec, c->last_step, c->o.islands);
  /* a coordinator killed after writing v, before removing what it merged
   * from contrib/: removed now (a file sent again since stays) */
  const cJSON *con = cJSON_GetObjectItemCaseSensitive(rec, "contributors"), *e;
  cJSON_ArrayForEach(e, con) {
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    if (rc == 0 && v > 0 && cJSON_IsString(file) && !strchr(file->valuestring, '/')) rc = retire_contrib(c, v, file->valuestring);
  }
  /* islands_log.csv rows of versions a kill kept from it */
  char *logp = rg_isl_path(c->dir, NULL, "islands_log.csv");
  for (long u = logp ? log_last(logp) + 1 : v + 1; rc == 0 && u <= v; u++) {
    cJSON *r = u == v ? rec : rg_isl_version_record(c->dir, u);
    if (r) rc = log_append(c, u, r);
    rg_error_clear();
    if (r != rec) cJSON_Delete(r);
  }
  free(logp);
  cJSON_Delete(rec);
  return rc;
}

rg_isl_coord *rg_isl_coord_open(const char *sync_dir, const rg_isl_coord_opts *o, const rg_isl_run *init,
                                const float *theta0) {
  if (o->islands < 1 || o->islands > 4096 || o->quorum < 1 || o->quorum > o->islands || o->block < 1 || o->max_staleness < 0 ||
      rg_quant_parse(rg_quant_name((rg_quant)o->encoding)) != o->encoding) {
    rg_error_set("islands: quorum %d must be 1..%d islands, of at most 4096 (block %d, max_staleness %d)", o->quorum,
                 o->islands, o->block, o->max_staleness);
    return NULL;
  }
  rg_isl_coord *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(sync_dir))) {
    free(c);
    rg_error_set("out of memory");
    return NULL;
  }
  c->o = *o;
  c->first_seen = -1;
  c->since = rg_now_seconds();
  int rc = rg_mkdir_p(sync_dir);
  const char *const SUBS[] = {"contrib", "global", "archive", "done"};
  for (int i = 0; rc == 0 && i < 4; i++) {
    char *p = rg_isl_path(sync_dir, SUBS[i], NULL);
    rc = p ? rg_mkdir_p(p) : rg_error_set("out of memory");
    free(p);
  }
  const int have = rc == 0 ? rg_isl_run_read(sync_dir, &c->run) : -1;
  if (have < 0) rc = -1;
  if (rc == 0 && have == 1 && !init) rc = rg_error_set("%s: no run.json (no run to coordinate)", sync_dir);
  if (rc == 0 && have == 0 && init && (init->n != c->run.n || strcmp(init->shape, c->run.shape) != 0))
    rc = rg_error_set("%s: its run is of other trainable parameters (%" PRIu64 " floats, shape %.12s...) than this "
                      "config's (%" PRIu64 ", %.12s...): another model, mode or LoRA",
                      sync_dir, c->run.n, c->run.shape, init->n, init->shape);
  if (rc == 0 && have == 0 && c->run.islands != o->islands)
    rc = rg_error_set("%s: a run of %d islands, and this config has %d", sync_dir, c->run.islands, o->islands);
  if (rc == 0 && have == 0 && c->run.has_settings) rc = settings_differ(sync_dir, &c->run, o);
  if (rc == 0 && have == 1) c->run = *init, settings_from(&c->run, o);
  const size_t n = rc == 0 ? (size_t)c->run.n : 0, m = n ? n : 1;
  if (rc == 0 && (!(c->theta = calloc(m, 4)) || !(c->momentum = calloc(m, 4)) || !(c->mean = calloc(m, 4)) ||
                  !(c->u = calloc(m, 4)) || !(c->mom_saved = calloc(m, 4)) || !(c->acc = calloc(m, 8)) ||
                  !(c->last_step = calloc((size_t)o->islands, sizeof *c->last_step))))
    rc = rg_error_set("islands: out of memory for %zu parameters", n);
  if (rc == 0 && rg_isl_latest(sync_dir) < 0) { /* a new run, or one killed before v0 */
    if (have == 0 && !init) rc = rg_error_set("%s: no version 0", sync_dir);
    if (rc == 0 && theta0) memcpy(c->theta, theta0, n * sizeof *c->theta);
    cJSON *rec = cJSON_CreateObject();
    if (!rec) rc = rg_error_set("out of memory");
    cJSON_AddNumberToObject(rec, "version", 0);
    cJSON_AddBoolToObject(rec, "momentum_started", false);
    cJSON_AddItemToObject(rec, "contributors", cJSON_CreateArray());
    for (int i = 0; rc == 0 && i < o->islands; i++) c->last_step[i] = -1;
    cJSON_AddItemToObject(rec, "last_step", last_step_json(c->last_step, o->islands));
    if (rc == 0) rc = rg_isl_retire(sync_dir, 0);
    if (rc == 0) rc = rg_isl_version_write(sync_dir, 0, c->theta, c->momentum, n, NULL, rec);
    if (rc == 0 && have == 1) rc = rg_isl_run_write(sync_dir, &c->run); /* last: an island waits for it */
    cJSON_Delete(rec);
  }
  if (rc == 0 && have == 1 && rg_isl_latest(sync_dir) >= 0) {
    char *p = rg_isl_path(sync_dir, NULL, "run.json");
    if (p && !rg_path_exists(p)) rc = rg_isl_run_write(sync_dir, &c->run);
    free(p);
  }
  if (rc == 0) {
    c->version = rg_isl_latest(sync_dir);
    rc = read_state(c, c->version);
  }
  if (rc == 0) rc = rg_isl_retire(sync_dir, c->version);
  if (rc < 0) {
    rg_isl_coord_free(c);
    return NULL;
  }
  return c;
}

void rg_isl_coord_free(rg_isl_coord *c) {
  if (!c) return;
  for (int i = 0; i < c->n_p; i++) free(c->p[i].name);
  free(c->p);
  free(c->theta), free(c->momentum), free(c->mean), free(c->u), free(c->mom_saved), free(c->acc);
  free(c->last_step), free(c->dir);
  free(c);
}

/* ------------------------------------------------------------ replay */

int rg_isl_replay(const char *sync_dir, const rg_isl_coord_opts *given, long *checked) {
  rg_isl_run run;
  *checked = 0;
  const int have = rg_isl_run_read(sync_dir, &run);
  if (have != 0) return have < 0 ? -1 : rg_error_set("%s: no run.json", sync_dir);
  rg_isl_coord_opts stored = *given; /* the run's settings where run.json has them */
  if (run.has_settings)
    stored.outer = (rg_outer_hparams){.lr = run.outer_lr, .momentum = run.outer_momentum, .nesterov = run.nesterov},
    stored.encoding = run.encoding, stored.block = run.block, stored.max_staleness = run.max_staleness;
  const rg_isl_coord_opts *o = &stored;
  const long latest = rg_isl_latest(sync_dir);
  if (latest < 0) return rg_error_set("%s: no global version", sync_dir);
  const size_t n = (size_t)run.n, m = n ? n : 1;
  float *theta = calloc(m, 4), *mom = calloc(m, 4), *mean = calloc(m, 4), *u = calloc(m, 4), *saved = calloc(m, 4);
  double *acc = calloc(m, 8);
  long long *last = malloc((size_t)(run.islands > 0 ? run.islands : 1) * sizeof *last);
  bool started = false;
  int rc = theta && mom && mean && u && saved && acc && last ? 0 : rg_error_set("replay: out of memory");
  for (int i = 0; rc == 0 && i < run.islands; i++) last[i] = -1;
  if (rc == 0) rc = rg_isl_version_floats(sync_dir, 0, "theta.f32", theta, n, NULL);
  for (long v = 1; rc == 0 && v <= latest; v++) {
    char name[32];
    snprintf(name, sizeof name, "v%ld", v);
    char *dir = rg_isl_path(sync_dir, "archive", name), *rp = dir ? rg_path_join(dir, "record.json") : NULL;
    cJSON *rec = rp ? rg_json_read_file(rp) : NULL;
    if (!rec) rc = rg_error_prefix("replay of version %ld", v);
    memset(acc, 0, n * sizeof *acc);
    double total = 0;
    const cJSON *e, *con = cJSON_GetObjectItemCaseSensitive(rec, "contributors");
    cJSON_ArrayForEach(e, con) {
      const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file"), *sha = cJSON_GetObjectItemCaseSensitive(e, "sha256");
      char *path = rc == 0 && cJSON_IsString(file) && cJSON_IsString(sha) ? rg_path_join(dir, file->valuestring) : NULL;
      rg_isl_msg h;
      float *d = NULL;
      if (rc == 0 && !path) rc = rg_error_set("%s: a contributor without file and sha256", rp);
      else if (rc == 0 && rg_isl_msg_read(path, &h, &d) < 0) rc = -1;
      else if (rc == 0 && (strcmp(h.digest, sha->valuestring) != 0 || h.n != run.n))
        rc = rg_error_set("%s: not the message version %ld's record lists", path, v);
      else if (rc == 0 && (h.island < 0 || h.island >= run.islands || h.step <= last[h.island]))
        rc = rg_error_set("%s: island %d's step %lld merged again in version %ld (a repeat)", path, h.island, h.step, v);
      if (rc == 0) last[h.island] = h.step;
      if (rc == 0) rg_outer_accumulate(acc, d, h.weight, n), total += h.weight;
      free(d), free(path);
    }
    if (rc == 0 && outer_step(o, theta, mom, saved, &started, mean, u, acc, total, n, NULL, NULL) != 0)
      rc = rg_error_prefix("replay of version %ld", v);
    char kept[65], mine[65];
    if (rc == 0 && rg_isl_version_digest(sync_dir, v, "theta.f32", kept) == 0) {
      rg_isl_floats_digest(theta, n, mine);
      ++*checked;
      if (strcmp(kept, mine) != 0) rc = rg_error_set("replay: version %ld differs from %s/global/v%ld/theta.f32", v, sync_dir, v);
    } else if (rc == 0 && v == latest) {
      rc = -1;
    }
    if (rc == 0) rg_error_clear();
    cJSON_Delete(rec);
    free(rp), free(dir);
  }
  free(theta), free(mom), free(mean), free(u), free(saved), free(acc), free(last);
  return rc;
}
