/* test_islands_sync: the islands' coordinator on a synthetic run (no model):
 * messages written by the library as islands write them, polled in this
 * process (src/adv_ft/islands_coord.h, islands_sync.h).
 *
 *  - messages: one read back as written; a byte of its payload changed, the
 *    file cut short, or a foreign file: refused with one line naming it;
 *  - bad contributions (another run's id, 49 floats for a run of 50, a
 *    changed byte, island 5 of 2, a weight of 0, a base version the run has
 *    not made, a negative base, LLONG_MIN among them): each moved to dropped/ with a line in dropped.log and never
 *    applied: theta stays version 0's, and the version after the good ones
 *    equals theta0 - weighted mean of the good pseudo-gradients computed
 *    here in double (lr 1, momentum 0, f32: the same one rounding to float
 *    of the mean, then of the difference: equal bit for bit);
 *  - a quorum of 2: one island is not enough until deadline_s has passed;
 *  - staleness: with max_staleness 1 a pseudo-gradient one version behind is
 *    merged, two behind dropped; with 0 one behind is dropped;
 *  - merge order: the same contributions arriving in the opposite order
 *    give the same theta bit for bit (merged by island id);
 *  - replay: every version recomputed from the archive equals the kept one;
 *    an archived message changed makes the replay fail naming it;
 *  - a repeat: a restarted island's step sent again after the first copy
 *    was merged is dropped (also by a restarted coordinator), a file named
 *    for another (island, step) than its header's is dropped, and every
 *    (island, step) appears once in the archive's records;
 *  - non-finite: a NaN f32 value, a bf16 infinity, a NaN int8 scale, a
 *    weight that overflows with the values, each in a message with a
 *    valid sha256: dropped, and the good ones make the version; two finite
 *    contributions whose merge overflows: both dropped, the run goes on;
 *  - the outer step's settings (outer_lr, outer_momentum, nesterov,
 *    compression, block_size, max_staleness) are in run.json: a
 *    coordinator restarted with another refuses naming it; the replay
 *    uses the stored ones whatever it is given;
 *  - a quorum larger than K, or of 0: refused with one line.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adv_ft/islands_coord.h"
#include "adv_ft/islands_quant.h"
#include "adv_ft/islands_sync.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

enum { N = 50 };
static float g_theta0[N];

static rg_isl_coord_opts opts(int max_staleness, double deadline) {
  return (rg_isl_coord_opts){.islands = 2, .quorum = 2, .deadline_s = deadline, .outer = {.lr = 1, .momentum = 0},
                             .encoding = RG_QUANT_F32, .block = 32, .max_staleness = max_staleness};
}

static rg_isl_coord *open_run(const char *name, const rg_isl_coord_opts *o, uint64_t *run_id) {
  char *dir = t_fresh_tmp_dir(name);
  rg_isl_run run = {.run_id = 0x1234abcd5678ef00ull, .n = N, .islands = 2};
  memset(run.shape, 'a', 64);
  rg_isl_coord *c = rg_isl_coord_open(dir, o, &run, g_theta0);
  if (!c) fail_msg("%s", rg_error_get());
  *run_id = run.run_id;
  free(dir);
  return c;
}

static char *sync_path(const char *name, const char *sub, const char *file) {
  char *dir = t_tmp_path(name), *p = rg_isl_path(dir, sub, file);
  free(dir);
  return p;
}

/* Island ISLAND's pseudo-gradient D (n floats) based on BASE, as it writes it. */
static void contribute(const char *name, const char *file, int island, uint64_t run, long base, double w, const float *d, uint64_t n) {
  char *p = sync_path(name, "contrib", file);
  long long step = base + 1; /* i<I>-s<S>.msg: step S, as an island names it */
  int named;
  if (sscanf(file, "i%d-s%lld.msg", &named, &step) != 2) step = base + 1;
  rg_isl_msg h = {.kind = RG_ISL_CONTRIB, .encoding = RG_QUANT_F32, .block = 32, .island = island, .run_id = run,
                  .version = base, .step = step, .weight = w, .n = n};
  assert_int_equal(rg_isl_msg_write(p, &h, d), 0);
  free(p);
}

static void delta(float *d, int seed) {
  for (int i = 0; i < N; i++) d[i] = (float)(0.01 * sin(seed * 7.0 + i));
}

static void poll(rg_isl_coord *c) {
  bool done;
  assert_int_equal(rg_isl_coord_poll(c, &done), 0);
}

static void read_theta(const char *name, long v, float *x) {
  char *dir = t_tmp_path(name);
  assert_int_equal(rg_isl_version_floats(dir, v, "theta.f32", x, N, NULL), 0);
  free(dir);
}

static int count_lines(const char *path) {
  size_t len;
  char *t = rg_read_file(path, &len);
  int n = 0;
  for (size_t i = 0; t && i < len; i++) n += t[i] == '\n';
  free(t);
  return n;
}

/* Every (island, step) in the archive's records of NAME is merged once. */
static void assert_steps_unique(const char *name) {
  char *dir = t_tmp_path(name);
  const long latest = rg_isl_latest(dir);
  long long seen[256][2];
  int n = 0;
  for (long v = 1; v <= latest; v++) {
    char sub[64];
    snprintf(sub, sizeof sub, "v%ld/record.json", v);
    char *p = rg_isl_path(dir, "archive", sub);
    cJSON *rec = rg_json_read_file(p);
    if (!rec) fail_msg("%s", rg_error_get());
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(rec, "contributors")) {
      const long long i = (long long)cJSON_GetObjectItem(e, "island")->valuedouble, s = (long long)cJSON_GetObjectItem(e, "step")->valuedouble;
      for (int j = 0; j < n; j++)
        if (seen[j][0] == i && seen[j][1] == s) fail_msg("island %lld's step %lld is merged twice (again in version %ld)", i, s, v);
      assert_true(n < 256);
      seen[n][0] = i, seen[n][1] = s, n++;
    }
    cJSON_Delete(rec);
    free(p);
  }
  free(dir);
}

static void test_messages(void **state) {
  (void)state;
  float d[N], *back = NULL;
  delta(d, 1);
  char *dir = t_fresh_tmp_dir("isl_msg");
  assert_int_equal(rg_mkdir_p(dir), 0);
  char *p = rg_path_join(dir, "m.msg");
  rg_isl_msg h = {.kind = RG_ISL_CONTRIB, .encoding = RG_QUANT_INT4, .block = 16, .island = 1, .run_id = 7, .version = 3,
                  .step = 40, .weight = 812, .n = N, .fetched_bytes = 5, .recovery_bytes = 9},
             r;
  assert_int_equal(rg_isl_msg_write(p, &h, d), 0);
  assert_int_equal(h.bytes, RG_ISL_HEADER_BYTES + rg_quant_bytes(RG_QUANT_INT4, N, 16));
  assert_int_equal(rg_isl_msg_read(p, &r, &back), 0);
  assert_int_equal(r.island, 1), assert_int_equal(r.version, 3), assert_int_equal(r.step, 40);
  assert_true(r.weight == 812), assert_int_equal(r.fetched_bytes, 5), assert_int_equal(r.recovery_bytes, 9);
  assert_string_equal(r.digest, h.digest);
  free(back);
  size_t len;
  unsigned char *raw = (unsigned char *)rg_read_file(p, &len);
  raw[len - 3] ^= 0x10;
  assert_int_equal(rg_write_file_atomic(p, raw, len), 0);
  assert_int_equal(rg_isl_msg_read(p, &r, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "damaged"));
  assert_null(strchr(rg_error_get(), '\n'));
  assert_int_equal(rg_write_file_atomic(p, raw, len - 5), 0);
  assert_int_equal(rg_isl_msg_read(p, &r, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "payload bytes and the file has"));
  assert_int_equal(rg_write_file_atomic(p, "hello", 5), 0);
  assert_int_equal(rg_isl_msg_read(p, &r, NULL), -1);
  assert_non_null(strstr(rg_error_get(), "not an islands message"));
  free(raw), free(p), free(dir);
}

static void test_drops(void **state) {
  (void)state;
  const char *name = "isl_drops";
  uint64_t run;
  rg_isl_coord_opts o = opts(1, 1e9);
  rg_isl_coord *c = open_run(name, &o, &run);
  float d0[N], d1[N], th[N];
  delta(d0, 1), delta(d1, 2);
  contribute(name, "i0-s1.msg", 0, run, 0, 30, d0, N);
  contribute(name, "other-run.msg", 1, run + 1, 0, 30, d1, N);
  contribute(name, "shape.msg", 1, run, 0, 30, d1, N - 1);
  contribute(name, "island5.msg", 5, run, 0, 30, d1, N);
  contribute(name, "weight0.msg", 1, run, 0, 0, d1, N);
  contribute(name, "future.msg", 1, run, 3, 30, d1, N);
  contribute(name, "negative.msg", 1, run, -1, 30, d1, N); /* base -1: staleness 1 passed */
  contribute(name, "llmin.msg", 1, run, LLONG_MIN, 30, d1, N); /* version - base overflowed */
  contribute(name, "corrupt.msg", 1, run, 0, 30, d1, N);
  char *cp = sync_path(name, "contrib", "corrupt.msg");
  size_t len;
  char *raw = rg_read_file(cp, &len);
  raw[RG_ISL_HEADER_BYTES + 7] ^= 1;
  assert_int_equal(rg_write_file_atomic(cp, raw, len), 0);
  free(raw), free(cp);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 0); /* island 0 alone: no quorum of 2 */
  char *log = sync_path(name, NULL, "dropped.log");
  assert_int_equal(count_lines(log), 8);
  size_t n;
  char *text = rg_read_file(log, &n);
  print_message("%s", text);
  assert_non_null(strstr(text, "another run")), assert_non_null(strstr(text, "49 floats"));
  assert_non_null(strstr(text, "damaged")), assert_non_null(strstr(text, "island 5, and the run has 2"));
  assert_non_null(strstr(text, "weight 0 is not positive")), assert_non_null(strstr(text, "has not made"));
  assert_non_null(strstr(text, "negative.msg\tbase version -1 is negative"));
  assert_non_null(strstr(text, "llmin.msg\tbase version -9223372036854775808 is negative"));
  free(text);
  contribute(name, "i1-s1.msg", 1, run, 0, 10, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1);
  read_theta(name, 1, th);
  for (int i = 0; i < N; i++) {
    const float mean = (float)((30.0 * d0[i] + 10.0 * d1[i]) / 40.0), want = g_theta0[i] - mean;
    if (th[i] != want) fail_msg("element %d: %.9g, want %.9g", i, th[i], want);
  }
  assert_int_equal(count_lines(log), 8);
  free(log);
  rg_isl_coord_free(c);
}

static void test_deadline(void **state) {
  (void)state;
  const char *name = "isl_deadline";
  uint64_t run;
  rg_isl_coord_opts o = opts(1, 0.3);
  rg_isl_coord *c = open_run(name, &o, &run);
  float d0[N];
  delta(d0, 1);
  contribute(name, "i0-s1.msg", 0, run, 0, 1, d0, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 0);
  usleep(400000);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1); /* one island after the deadline */
  rg_isl_coord_free(c);
}

static void test_staleness(void **state) {
  (void)state;
  for (int max = 0; max <= 1; max++) {
    char name[32];
    snprintf(name, sizeof name, "isl_stale_%d", max);
    uint64_t run;
    rg_isl_coord_opts o = opts(max, 1e9);
    rg_isl_coord *c = open_run(name, &o, &run);
    float d[N];
    delta(d, 3);
    /* v1 and v2 from both islands */
    for (int v = 0; v < 2; v++) {
      char f[32];
      for (int i = 0; i < 2; i++) snprintf(f, sizeof f, "i%d-s%d.msg", i, v + 1), contribute(name, f, i, run, v, 1, d, N);
      poll(c);
    }
    assert_int_equal(rg_isl_coord_version(c), 2);
    contribute(name, "i0-s9.msg", 0, run, 1, 1, d, N); /* one behind */
    contribute(name, "i1-s9.msg", 1, run, 0, 1, d, N); /* two behind: dropped either way */
    poll(c);
    char *log = sync_path(name, NULL, "dropped.log");
    assert_int_equal(count_lines(log), max == 1 ? 1 : 2);
    free(log);
    contribute(name, "i1-s10.msg", 1, run, 2, 1, d, N);
    poll(c);
    assert_int_equal(rg_isl_coord_version(c), max == 1 ? 3 : 2); /* max 0: only island 1 is in */
    if (max == 1) {
      char *dir = t_tmp_path(name);
      cJSON *rec = rg_isl_version_record(dir, 3);
      free(dir);
      const cJSON *con = cJSON_GetObjectItem(rec, "contributors");
      assert_int_equal(cJSON_GetArraySize(con), 2);
      assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(con, 0), "staleness")->valueint, 1);
      cJSON_Delete(rec);
    }
    rg_isl_coord_free(c);
  }
}

static void test_order_and_replay(void **state) {
  (void)state;
  float a[N], b[N];
  for (int k = 0; k < 2; k++) {
    char name[32];
    snprintf(name, sizeof name, "isl_order_%d", k);
    uint64_t run;
    rg_isl_coord_opts o = opts(1, 1e9);
    o.outer = (rg_outer_hparams){.lr = 0.7, .momentum = 0.9, .nesterov = true};
    o.encoding = RG_QUANT_INT4;
    rg_isl_coord *c = open_run(name, &o, &run);
    for (int v = 0; v < 6; v++) {
      float d[2][N];
      delta(d[0], 10 + v), delta(d[1], 20 + v);
      for (int j = 0; j < 2; j++) {
        const int i = k ? 1 - j : j; /* the second run: island 1's file first */
        char f[32];
        snprintf(f, sizeof f, "i%d-s%d.msg", i, v + 1);
        contribute(name, f, i, run, v, 100 + 10 * i, d[i], N);
        if (j == 0) poll(c);
      }
      poll(c);
    }
    assert_int_equal(rg_isl_coord_version(c), 6);
    assert_steps_unique(name);
    read_theta(name, 6, k ? b : a);
    rg_isl_coord_free(c);
    long checked = 0;
    char *dir = t_tmp_path(name);
    assert_int_equal(rg_isl_replay(dir, &o, &checked), 0);
    assert_int_equal(checked, RG_ISL_KEEP_VERSIONS); /* v3..v6 kept; v1, v2 retired */
    if (k == 1) { /* an archived message changed: the replay names it */
      char *p = sync_path(name, "archive", "v4/i0-s4.msg");
      size_t len;
      char *raw = rg_read_file(p, &len);
      raw[RG_ISL_HEADER_BYTES + 1] ^= 4;
      assert_int_equal(rg_write_file_atomic(p, raw, len), 0);
      assert_int_equal(rg_isl_replay(dir, &o, &checked), -1);
      assert_non_null(strstr(rg_error_get(), "i0-s4.msg"));
      free(raw), free(p);
    }
    free(dir);
  }
  assert_memory_equal(a, b, sizeof a);
}

/* A restarted island sends a step again after the first copy was merged
 * (killed between its contribution and its state): the copy is dropped,
 * by a coordinator that was restarted too; a file whose name is not its
 * header's (island, step) is dropped. */
static void test_repeat(void **state) {
  (void)state;
  const char *name = "isl_repeat";
  uint64_t run;
  rg_isl_coord_opts o = opts(1, 1e9);
  rg_isl_coord *c = open_run(name, &o, &run);
  float d0[N], d1[N], th[N];
  delta(d0, 1), delta(d1, 2);
  contribute(name, "i0-s1.msg", 0, run, 0, 1, d1, N);
  contribute(name, "i0-s2.msg", 0, run, 0, 1, d0, N);
  contribute(name, "i1-s2.msg", 1, run, 0, 1, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1);
  char *csv = sync_path(name, NULL, "islands_log.csv");
  size_t clen;
  char *rows = rg_read_file(csv, &clen);
  print_message("%s", rows);
  assert_non_null(strstr(rows, "\n1,2,i0@v0 i0@v0 i1@v0,")); /* 2 islands reporting, 3 contributions */
  free(rows), free(csv);
  contribute(name, "i1-s2.msg", 1, run, 1, 1, d1, N); /* the restarted island 1's step 2, again */
  contribute(name, "i1-s7.msg", 1, run, 1, 1, d1, N);
  char *p7 = sync_path(name, "contrib", "i1-s7.msg"), *p3 = sync_path(name, "contrib", "i1-s3.msg");
  assert_int_equal(rename(p7, p3), 0); /* header: step 7 */
  free(p7), free(p3);
  contribute(name, "i0-s4.msg", 0, run, 1, 1, d0, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1); /* island 1's repeat does not make the quorum */
  char *log = sync_path(name, NULL, "dropped.log");
  size_t len;
  char *text = rg_read_file(log, &len);
  print_message("%s", text);
  assert_int_equal(count_lines(log), 2);
  assert_non_null(strstr(text, "i1-s2.msg\tisland 1's step 2 is merged already"));
  assert_non_null(strstr(text, "i1-s3.msg\tnamed i1-s3.msg, and its header says island 1, step 7"));
  free(text);
  rg_isl_coord_free(c); /* the coordinator restarted: it knows what was merged */
  char *sync = t_tmp_path(name);
  c = rg_isl_coord_open(sync, &o, NULL, NULL);
  free(sync);
  assert_non_null(c);
  contribute(name, "i1-s2.msg", 1, run, 1, 1, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1);
  assert_int_equal(count_lines(log), 3);
  contribute(name, "i1-s4.msg", 1, run, 1, 1, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 2);
  read_theta(name, 1, th);
  float want[N];
  for (int i = 0; i < N; i++) want[i] = th[i] - (float)((1.0 * d0[i] + 1.0 * d1[i]) / 2.0);
  read_theta(name, 2, th);
  assert_memory_equal(th, want, sizeof th);
  assert_steps_unique(name);
  long checked;
  char *dir = t_tmp_path(name);
  assert_int_equal(rg_isl_replay(dir, &o, &checked), 0);
  free(dir), free(log);
  rg_isl_coord_free(c);
}

/* Island ISLAND's message FILE (step from its name, base 0) of D with
 * ENCODING and weight W, then payload bytes AT.. set to BYTES and the
 * sha256 computed anew: a well-formed message of values the encoder
 * refuses (the digest guards against damage, not against a sender). */
static void craft(const char *name, const char *file, int island, uint64_t run, int encoding, double w, const float *d,
                  size_t at, const void *bytes, size_t len) {
  char *p = sync_path(name, "contrib", file);
  long long step;
  int named;
  assert_int_equal(sscanf(file, "i%d-s%lld.msg", &named, &step), 2);
  rg_isl_msg h = {.kind = RG_ISL_CONTRIB, .encoding = encoding, .block = 32, .island = island, .run_id = run,
                  .version = 0, .step = step, .weight = w, .n = N};
  assert_int_equal(rg_isl_msg_write(p, &h, d), 0);
  size_t size;
  uint8_t *raw = (uint8_t *)rg_read_file(p, &size);
  memcpy(raw + RG_ISL_HEADER_BYTES + at, bytes, len);
  rg_sha256 sh;
  rg_sha256_init(&sh);
  rg_sha256_update(&sh, raw, 88);
  rg_sha256_update(&sh, raw + RG_ISL_HEADER_BYTES, size - RG_ISL_HEADER_BYTES);
  rg_sha256_final(&sh, raw + 88);
  assert_int_equal(rg_write_file_atomic(p, raw, size), 0);
  rg_isl_msg back;
  assert_int_equal(rg_isl_msg_read(p, &back, NULL), 0); /* sound as a message */
  free(raw), free(p);
}

/* Non-finite values (a NaN float, a bf16 infinity, a NaN block scale) or a
 * weight whose product with the values overflows are dropped at the scan;
 * contributions each finite whose merge overflows are dropped together;
 * the coordinator carries on (before: the NaN reached the encoder, the
 * poll failed, and the file stayed to fail every restart). */
static void test_nonfinite(void **state) {
  (void)state;
  const char *name = "isl_nonfinite";
  uint64_t run;
  rg_isl_coord_opts o = opts(1, 1e9);
  rg_isl_coord *c = open_run(name, &o, &run);
  float d0[N], d1[N], th[N];
  delta(d0, 1), delta(d1, 2);
  const float nan = NAN;
  const uint8_t inf_bf16[2] = {0x80, 0x7f};
  craft(name, "i0-s1.msg", 0, run, RG_QUANT_F32, 1, d0, 4 * 3, &nan, 4);
  craft(name, "i0-s2.msg", 0, run, RG_QUANT_BF16, 1, d0, 2 * 5, inf_bf16, 2);
  craft(name, "i0-s3.msg", 0, run, RG_QUANT_INT8, 1, d0, 0, &nan, 4); /* block 0's scale */
  float big[N];
  memcpy(big, d0, sizeof big);
  big[7] = 1e10f;
  craft(name, "i0-s4.msg", 0, run, RG_QUANT_F32, 1e300, big, 0, big, 4); /* 1e300 * 1e10 overflows */
  contribute(name, "i0-s5.msg", 0, run, 0, 1, d0, N);
  contribute(name, "i1-s5.msg", 1, run, 0, 1, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1);
  char *log = sync_path(name, NULL, "dropped.log");
  size_t len;
  char *text = rg_read_file(log, &len);
  print_message("%s", text);
  assert_int_equal(count_lines(log), 4);
  assert_non_null(strstr(text, "i0-s1.msg\telement 3 is not finite"));
  assert_non_null(strstr(text, "i0-s2.msg\telement 5 is not finite"));
  assert_non_null(strstr(text, "i0-s3.msg\telement 0 is not finite"));
  assert_non_null(strstr(text, "i0-s4.msg\tweight 1e+300 times its largest |value| 1e+10 is not finite"));
  free(text);
  read_theta(name, 1, th);
  for (int i = 0; i < N; i++) {
    const float want = g_theta0[i] - (float)((1.0 * d0[i] + 1.0 * d1[i]) / 2.0);
    if (th[i] != want) fail_msg("element %d: %.9g, want %.9g", i, th[i], want);
  }
  /* each 1e300 * 1e8 = 1e308 is finite; their sum is not */
  big[7] = 1e8f;
  contribute(name, "i0-s6.msg", 0, run, 1, 1e300, big, N);
  contribute(name, "i1-s6.msg", 1, run, 1, 1e300, big, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 1);
  text = rg_read_file(log, &len);
  assert_int_equal(count_lines(log), 6);
  assert_non_null(strstr(text, "i1-s6.msg\tmerged with the other pending contributions, the mean is not finite"));
  free(text);
  contribute(name, "i0-s7.msg", 0, run, 1, 1, d0, N);
  contribute(name, "i1-s7.msg", 1, run, 1, 1, d1, N);
  poll(c);
  assert_int_equal(rg_isl_coord_version(c), 2);
  long checked;
  char *dir = t_tmp_path(name);
  assert_int_equal(rg_isl_replay(dir, &o, &checked), 0);
  free(dir), free(log);
  rg_isl_coord_free(c);
}

/* The outer step's settings are the run's (run.json): a coordinator
 * restarted with others refuses with one line naming the key, and the
 * replay uses the stored ones whatever it is given. */
static void test_run_settings(void **state) {
  (void)state;
  const char *name = "isl_settings";
  uint64_t run;
  rg_isl_coord_opts o = opts(1, 1e9);
  o.outer = (rg_outer_hparams){.lr = 0.7, .momentum = 0.9, .nesterov = true};
  o.encoding = RG_QUANT_INT8;
  rg_isl_coord *c = open_run(name, &o, &run);
  for (int v = 0; v < 2; v++) {
    float d[N];
    char f[32];
    for (int i = 0; i < 2; i++) delta(d, 3 * v + i), snprintf(f, sizeof f, "i%d-s%d.msg", i, v + 1), contribute(name, f, i, run, v, 1, d, N);
    poll(c);
  }
  assert_int_equal(rg_isl_coord_version(c), 2);
  rg_isl_coord_free(c);
  char *dir = t_tmp_path(name);
  const struct {
    const char *key;
    rg_isl_coord_opts o;
  } other[] = {{"outer_lr", o}, {"outer_momentum", o}, {"nesterov", o}, {"compression", o}, {"block_size", o}, {"max_staleness", o}};
  rg_isl_coord_opts bad[6];
  for (int k = 0; k < 6; k++) bad[k] = other[k].o;
  bad[0].outer.lr = 0.5, bad[1].outer.momentum = 0.8, bad[2].outer.nesterov = false, bad[3].encoding = RG_QUANT_INT4;
  bad[4].block = 16, bad[5].max_staleness = 2;
  for (int k = 0; k < 6; k++) {
    assert_null(rg_isl_coord_open(dir, &bad[k], NULL, NULL));
    print_message("%s\n", rg_error_get());
    assert_non_null(strstr(rg_error_get(), other[k].key));
    assert_null(strchr(rg_error_get(), '\n'));
  }
  c = rg_isl_coord_open(dir, &o, NULL, NULL); /* the run's own settings: resumes */
  assert_non_null(c);
  assert_int_equal(rg_isl_coord_version(c), 2);
  rg_isl_coord_free(c);
  long checked;
  for (int k = 0; k < 6; k++) assert_int_equal(rg_isl_replay(dir, &bad[k], &checked), 0);
  assert_int_equal(checked, 2);
  free(dir);
}

static void test_bad_quorum(void **state) {
  (void)state;
  for (int q = 0; q <= 3; q += 3) {
    rg_isl_coord_opts o = opts(1, 1);
    o.quorum = q;
    char *dir = t_fresh_tmp_dir("isl_quorum");
    rg_isl_run r = {.run_id = 1, .n = N, .islands = 2};
    memset(r.shape, 'a', 64);
    assert_null(rg_isl_coord_open(dir, &o, &r, g_theta0));
    assert_non_null(strstr(rg_error_get(), "quorum"));
    free(dir);
  }
}

int main(void) {
  for (int i = 0; i < N; i++) g_theta0[i] = (float)cos(i * 0.37);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_messages), cmocka_unit_test(test_drops),
                                     cmocka_unit_test(test_deadline), cmocka_unit_test(test_staleness),
                                     cmocka_unit_test(test_order_and_replay), cmocka_unit_test(test_repeat), cmocka_unit_test(test_nonfinite),
                                     cmocka_unit_test(test_run_settings),
                                     cmocka_unit_test(test_bad_quorum)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
