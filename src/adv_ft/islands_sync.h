/* islands_sync.h: the shared directory through which islands and their
 * coordinator exchange pseudo-gradients and global states
 * (docs/ARCHITECTURE.md, "Islands sync directory").
 *
 * The transport is a folder that every process can read and write: a local
 * one, or NFS or any filesystem whose rename is atomic. Every file is written
 * as NAME.tmp.<pid> (or a folder as NAME.tmp), fsync'd, renamed into place,
 * and its folder fsync'd, so a reader sees a whole file or none, and a kill
 * at any moment leaves nothing torn under a real name.
 *
 *   SYNC/run.json              the run: {"format": "refgeo-islands 1",
 *                              "run_id": hex, "params": N floats,
 *                              "shape_sha256": hex of the trainable
 *                              parameters' names and sizes, "islands": K,
 *                              "outer_lr", "outer_momentum", "nesterov",
 *                              "compression", "block_size",
 *                              "max_staleness": the outer step's settings}
 *   SYNC/contrib/i<I>-s<S>.msg island I's pseudo-gradient after its inner
 *                              update S (a message, below)
 *   SYNC/global/v<V>/          global version V: theta.f32 and momentum.f32
 *                              (N little-endian float32 each), update.msg
 *                              (the encoded outer update that made V from
 *                              V-1; not in v0), record.json (below) and
 *                              SHA256SUMS (util/manifest.h) of the others
 *   SYNC/archive/v<V>/         the contributions merged into V (hard links
 *                              made, and read, before V is written) and
 *                              V's record.json: what a replay reads
 *   SYNC/dropped/, dropped.log messages refused, with one line each: why
 *   SYNC/done/i<I>             island I sends no more contributions (its
 *                              updates made, or the run ended)
 *   SYNC/final.json            the run has ended: {"version": V (the last
 *                              global version, which every island adopts
 *                              before its last checkpoint), "merged_updates":
 *                              the inner updates merged into versions 1..V}
 *   SYNC/islands_log.csv       one row per outer step (docs/csv-formats.md)
 *
 * A message (contribution or update) is a 120-byte header, little-endian:
 *   0 "RGISLE1\0"; 8 u32 kind (1 contribution, 2 update); 12 u32 encoding
 *   (islands_quant.h); 16 i32 block; 20 i32 island (-1: update); 24 u64
 *   run_id; 32 i64 version (a contribution's base version, an update's new
 *   version); 40 i64 step (the island's inner updates); 48 f64 weight; 56
 *   u64 n (floats); 64 u64 payload bytes; 72 u64 bytes the island fetched
 *   since its last contribution (updates), 80 u64 bytes it fetched as whole
 *   states (recovery); 88 32 bytes: the sha256 of bytes 0..88 and the
 *   payload;
 * then the payload (rg_quant_encode). A reader refuses a message whose
 * magic, kind, encoding, sizes or digest are wrong.
 *
 * record.json of version V: {"version": V, "momentum_started": bool,
 * "contributors": [{"island", "base", "step", "weight", "staleness",
 * "file", "sha256"}...] in merge order (island id, then step), "last_step":
 * [per island the newest step merged up to V, -1 none], "merged_updates":
 * the inner updates merged into versions 1..V}: an (island, step)
 * is merged at most once (islands_coord.h). With the
 * archived messages it is enough to recompute every version bit for bit
 * (rg_isl_replay, islands_coord.h).
 *
 * Ownership: functions borrow what they are given; returned arrays and
 * trees are the caller's.
 */
#ifndef RG_ADV_FT_ISLANDS_SYNC_H
#define RG_ADV_FT_ISLANDS_SYNC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/weights.h"

enum { RG_ISL_HEADER_BYTES = 120, RG_ISL_KEEP_VERSIONS = 4 };
typedef enum { RG_ISL_CONTRIB = 1, RG_ISL_UPDATE = 2 } rg_isl_kind;

typedef struct {
  int kind, encoding, block, island;
  uint64_t run_id;
  long long version, step;
  double weight;
  uint64_t n;
  uint64_t fetched_bytes, recovery_bytes;
  uint64_t bytes;  /* the whole message, header included (set by write and read) */
  char digest[65]; /* its sha256 field as hex (set by write and read) */
} rg_isl_msg;

/* Encodes X[0..h->n) with h's encoding and writes the message to PATH
 * atomically; sets h->bytes and h->digest. 0 or -1 with the error set. */
int rg_isl_msg_write(const char *path, rg_isl_msg *h, const float *x);
/* Reads and checks the message PATH; *X gets its decoded floats (malloc'd;
 * X may be NULL to check only). 0 or -1 with one line naming the file. */
int rg_isl_msg_read(const char *path, rg_isl_msg *h, float **x);

typedef struct {
  uint64_t run_id, n;
  char shape[65];
  int islands;
  /* the settings that decide theta_global's bits and what is merged: the
   * outer SGD's, the update's encoding, the staleness bound (has_settings
   * false: a run.json of an older refgeo, without them) */
  bool has_settings;
  double outer_lr, outer_momentum;
  bool nesterov;
  int encoding, block, max_staleness;
} rg_isl_run;

/* The digest of W's trainable parameters' names and sizes, and their
 * floats. */
void rg_isl_shape(const rg_weights *w, char hex[65], uint64_t *n);
int rg_isl_run_write(const char *sync_dir, const rg_isl_run *r);
/* A new run's id: from the clock and the process id (another run differs). */
uint64_t rg_isl_new_run_id(void);
/* 0; 1 when SYNC has no run.json yet; -1 with the error set (a bad one). */
int rg_isl_run_read(const char *sync_dir, rg_isl_run *r);

/* SYNC/SUB/NAME (SUB may be NULL), malloc'd. */
char *rg_isl_path(const char *sync_dir, const char *sub, const char *name);

/* The newest complete global version, or -1 (none yet). */
long rg_isl_latest(const char *sync_dir);
/* Writes global version V: theta, momentum (N floats each), RECORD, and
 * the update message the caller wrote to UPDATE_TMP (moved in; NULL for
 * v0). 0 or -1 with the error set. */
int rg_isl_version_write(const char *sync_dir, long v, const float *theta, const float *momentum, size_t n,
                         const char *update_tmp, const cJSON *record);
/* Reads FILE ("theta.f32" or "momentum.f32") of version V into X[0..n),
 * checked against the version's SHA256SUMS; *BYTES (may be NULL) gets what
 * was read. 0 or -1 with the error set. */
int rg_isl_version_floats(const char *sync_dir, long v, const char *file, float *x, size_t n, uint64_t *bytes);
/* The sha256 SHA256SUMS lists for FILE of version V. 0 or -1. */
int rg_isl_version_digest(const char *sync_dir, long v, const char *file, char hex[65]);
/* record.json of version V (checked), a new tree, or NULL with the error set. */
cJSON *rg_isl_version_record(const char *sync_dir, long v);
/* The run's end (SYNC/final.json): written once by the coordinator. */
int rg_isl_final_write(const char *sync_dir, long v, long long merged_updates);
/* 1 with *V and *MERGED_UPDATES (may be NULL) set when SYNC/final.json
 * exists; 0 when it does not; -1 with the error set (a bad file). */
int rg_isl_final_read(const char *sync_dir, long *v, long long *merged_updates);

/* Removes the versions older than V - RG_ISL_KEEP_VERSIONS + 1 but v0 (a
 * replay starts from it), and the
 * folders of interrupted writes. 0 or -1. */
int rg_isl_retire(const char *sync_dir, long v);

/* The sha256 of N floats as stored (little-endian float32) in hex. */
void rg_isl_floats_digest(const float *x, size_t n, char hex[65]);

#endif
