/* islands_member.c: an island's contributions and adoptions of global versions (islands_member.h). */
#include "adv_ft/islands_member.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adv_ft/islands_outer.h"
#include "adv_ft/islands_sync.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/fileio.h"

struct rg_isl_member {
  char *dir;
  int island, encoding, block;
  rg_isl_run run;
  long version;   /* of theta */
  float *theta;   /* theta_global of that version */
  float *scratch; /* theta_island, then Delta */
  uint64_t fetched, recovery; /* bytes since the last contribution */
  long sent;                  /* the step of the last contribution (-1: none) */
};

uint64_t rg_isl_member_run_id(const rg_isl_member *m) { return m->run.run_id; }
long rg_isl_member_version(const rg_isl_member *m) { return m->version; }

static void pause_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
  nanosleep(&ts, NULL);
}

rg_isl_member *rg_isl_member_open(const char *sync_dir, int island, int encoding, int block, const rg_weights *w,
                                  double wait_s) {
  rg_isl_member *m = calloc(1, sizeof *m);
  if (!m || !(m->dir = strdup(sync_dir))) {
    free(m);
    rg_error_set("out of memory");
    return NULL;
  }
  *m = (rg_isl_member){.dir = m->dir, .island = island, .encoding = encoding, .block = block, .version = -1, .sent = -1};
  const double t0 = rg_now_seconds();
  int have;
  while ((have = rg_isl_run_read(sync_dir, &m->run)) == 1 && rg_now_seconds() - t0 < wait_s) pause_s(0.2);
  int rc = have < 0 ? -1 : have == 1 ? rg_error_set("%s: no run.json after %.0f s: start `refgeo islands` on it", sync_dir, wait_s) : 0;
  char shape[65];
  uint64_t n;
  rg_isl_shape(w, shape, &n);
  if (rc == 0 && (n != m->run.n || strcmp(shape, m->run.shape) != 0))
    rc = rg_error_set("%s: its run trains other parameters (%" PRIu64 " floats, shape %.12s...) than this island's "
                      "(%" PRIu64 ", %.12s...): another model, mode or LoRA",
                      sync_dir, m->run.n, m->run.shape, n, shape);
  if (rc == 0 && island >= m->run.islands)
    rc = rg_error_set("%s: island %d, and its run has %d islands", sync_dir, island, m->run.islands);
  const size_t len = (size_t)(n ? n : 1);
  if (rc == 0 && (!(m->theta = malloc(len * sizeof *m->theta)) || !(m->scratch = malloc(len * sizeof *m->scratch))))
    rc = rg_error_set("islands: out of memory for %zu parameters", len);
  if (rc < 0) {
    rg_isl_member_free(m);
    return NULL;
  }
  return m;
}

void rg_isl_member_free(rg_isl_member *m) {
  if (!m) return;
  free(m->theta), free(m->scratch), free(m->dir);
  free(m);
}

/* Whether version V's record has this island's step m->sent merged: the
 * coordinator then drops the contribution just sent as a repeat (a
 * restart redid those updates), and no version waits for it. */
static bool sent_merged(const rg_isl_member *m, long v) {
  cJSON *rec = m->sent >= 0 ? rg_isl_version_record(m->dir, v) : NULL;
  const cJSON *last = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rec, "last_step"), m->island);
  const bool merged = cJSON_IsNumber(last) && last->valuedouble >= (double)m->sent;
  cJSON_Delete(rec);
  rg_error_clear();
  return merged;
}

int rg_isl_member_ended(const rg_isl_member *m, long *v) { return rg_isl_final_read(m->dir, v, NULL); }

int rg_isl_member_wait_end(const rg_isl_member *m, double wait_s, long *v) {
  const double t0 = rg_now_seconds();
  for (;;) {
    const int ended = rg_isl_member_ended(m, v);
    if (ended != 0 || rg_now_seconds() - t0 >= wait_s) return ended;
    pause_s(0.05);
  }
}

long rg_isl_member_wait(const rg_isl_member *m, long after, double wait_s) {
  const double t0 = rg_now_seconds();
  for (long checked = -1;;) {
    long final_v;
    const int ended = rg_isl_member_ended(m, &final_v);
    if (ended != 0) return ended < 0 ? -1 : final_v;
    const long v = rg_isl_latest(m->dir);
    if (v > after) return v;
    if (v == after && v != checked && (checked = v, sent_merged(m, v))) return v;
    if (rg_now_seconds() - t0 >= wait_s) {
      rg_error_set("%s: no global version after %ld in %.0f s (is `refgeo islands` running on it?)", m->dir, after, wait_s);
      return -1;
    }
    pause_s(0.05);
  }
}

/* W's parameters into X, or X into W's parameters. */
static int params_io(rg_weights *w, float *x, bool upload) {
  size_t at = 0;
  for (int i = 0; i < rg_weights_count(w); i++) {
    const int rc = upload ? rg_weights_upload(w, i, x + at) : rg_weights_download(w, i, x + at);
    if (rc < 0) return rg_error_prefix("islands: parameter %s", rg_weights_tensor(w, i)->name);
    at += (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
  }
  return 0;
}

int rg_isl_member_join(rg_isl_member *m, rg_weights *w, long v, bool recovery) {
  uint64_t bytes = 0;
  if (rg_isl_version_floats(m->dir, v, "theta.f32", m->theta, (size_t)m->run.n, &bytes) < 0) return -1;
  if (recovery) m->recovery += bytes;
  m->version = v;
  return params_io(w, m->theta, true);
}

int rg_isl_member_publish(rg_isl_member *m, const rg_weights *w, long step, double weight) {
  const size_t n = (size_t)m->run.n;
  if (params_io((rg_weights *)w, m->scratch, false) < 0) return -1;
  for (size_t i = 0; i < n; i++) m->scratch[i] = m->theta[i] - m->scratch[i];
  char name[64];
  snprintf(name, sizeof name, "i%d-s%ld.msg", m->island, step);
  char *path = rg_isl_path(m->dir, "contrib", name);
  rg_isl_msg h = {.kind = RG_ISL_CONTRIB, .encoding = m->encoding, .block = m->block, .island = m->island,
                  .run_id = m->run.run_id, .version = m->version, .step = step, .weight = weight, .n = m->run.n,
                  .fetched_bytes = m->fetched, .recovery_bytes = m->recovery};
  const int rc = path ? rg_isl_msg_write(path, &h, m->scratch) : rg_error_set("out of memory");
  free(path);
  if (rc == 0) m->fetched = m->recovery = 0, m->sent = step;
  rg_fault_point("islands-published"); /* tests: a kill with the contribution out, the state not yet saved */
  return rc;
}

/* The update messages of versions m->version+1 .. V applied to theta; 0
 * when theta is then version V bit for bit, else -1 (theta is then
 * stale: the caller reads V whole). */
static int apply_updates(rg_isl_member *m, long v) {
  uint64_t bytes = 0;
  for (long u = m->version + 1; u <= v; u++) {
    char name[64];
    snprintf(name, sizeof name, "v%ld", u);
    char *dir = rg_isl_path(m->dir, "global", name), *path = dir ? rg_path_join(dir, "update.msg") : NULL;
    rg_isl_msg h;
    float *d = NULL;
    int rc = path ? rg_isl_msg_read(path, &h, &d) : rg_error_set("out of memory");
    if (rc == 0 && (h.kind != RG_ISL_UPDATE || h.run_id != m->run.run_id || h.version != u || h.n != m->run.n))
      rc = rg_error_set("%s: not this run's update to version %ld", path, u);
    if (rc == 0) rg_outer_apply(m->theta, d, (size_t)m->run.n), bytes += h.bytes;
    free(d), free(path), free(dir);
    if (rc < 0) return -1;
  }
  char want[65], have[65];
  if (rg_isl_version_digest(m->dir, v, "theta.f32", want) < 0) return -1;
  rg_isl_floats_digest(m->theta, (size_t)m->run.n, have);
  if (strcmp(want, have) != 0) return rg_error_set("%s: version %ld from its updates differs from its theta.f32", m->dir, v);
  m->fetched += bytes;
  return 0;
}

int rg_isl_member_adopt(rg_isl_member *m, rg_weights *w, long v) {
  if (apply_updates(m, v) == 0) {
    m->version = v;
    return params_io(w, m->theta, true);
  }
  /* an update retired meanwhile, or damaged: the whole state */
  fprintf(stderr, "islands: island %d reads version %ld whole (%s)\n", m->island, v, rg_error_get());
  rg_error_clear();
  return rg_isl_member_join(m, w, v, true); /* V itself retired meanwhile: the caller picks a newer one for all ranks */
}

int rg_isl_member_finish(const rg_isl_member *m) {
  char name[32];
  snprintf(name, sizeof name, "i%d", m->island);
  char *dir = rg_isl_path(m->dir, "done", NULL), *path = dir ? rg_path_join(dir, name) : NULL;
  int rc = path ? rg_mkdir_p(dir) : rg_error_set("out of memory");
  if (rc == 0) rc = rg_write_file_atomic(path, "done\n", 5);
  if (rc == 0) rc = rg_sync_dir(dir);
  free(dir), free(path);
  return rc;
}
