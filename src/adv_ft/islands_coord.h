/* islands_coord.h: the coordinator of training across islands (`refgeo
 * islands`; docs/training.md, "Islands").
 *
 * It owns the sync directory's global state (islands_sync.h). Each poll it
 * reads the contributions in SYNC/contrib/, refuses the bad ones (another
 * run's, the wrong size, damaged, from an island id >= K, with a weight <= 0,
 * based on a negative version or one it has not made, staler than
 * max_staleness, named otherwise than i<I>-s<S>.msg of its header, or of a
 * step at or below the newest step of its island already merged (a
 * restarted island's repeat; "last_step" of the newest version's record,
 * so a restarted coordinator and the replay know it too), or decoding to a
 * value that is not finite (or whose weight times its largest value is
 * not): each
 * moved to SYNC/dropped/ with a line in dropped.log, never applied), and
 * makes the next version when contributions from `quorum` islands are in
 * (fewer when islands have finished; when the merge of contributions each
 * finite is not, its mean or update overflowing, they are all dropped and
 * no version is made), or when the oldest has waited
 * deadline_s: never waiting for every island. The contributions are merged
 * in (island, step) order whatever their arrival, weighted by what each
 * island sent (its tokens, or its micro-batches), and the outer step of
 * islands_outer.h made; the update is encoded with the run's compression,
 * and the decoded update applied, so that the islands, applying the same
 * message, hold theta_global bit for bit. A late contribution (based on an
 * older version, staleness = current - base <= max_staleness) is applied
 * at the next step against the current state; max_staleness 0 drops every
 * late one.
 *
 * The run ends with SYNC/final.json: every island then adopts its
 * version before its last checkpoint, so that each island's last
 * checkpoint holds the run's final theta_global, whichever island
 * finished first. With run_updates the run ends on the inner updates
 * merged, whichever islands made them: an island killed and restarted
 * costs the run its own lost time, not the time to redo its share (the
 * islands train until the end, up to their `updates`). Contributions that
 * arrive after the end are not merged.
 *
 * Each contribution is hard-linked into SYNC/archive/v<V>/ and read from
 * there (so the archive holds exactly the merged bytes even when a
 * restarted island sends the same step again), the archive's record is
 * written, then version V, and only then are the merged files removed from
 * contrib/ (those still of the archived inode). A coordinator killed at any
 * point and started again resumes from the newest version and removes what
 * that version merged, so nothing is applied twice and nothing
 * half-written is read.
 *
 * Ownership: the coordinator owns its buffers; options are copied.
 */
#ifndef RG_ADV_FT_ISLANDS_COORD_H
#define RG_ADV_FT_ISLANDS_COORD_H

#include <stdbool.h>
#include <stdio.h>

#include "adv_ft/islands_outer.h"
#include "adv_ft/islands_sync.h"

typedef struct {
  int islands, quorum; /* quorum 1..islands */
  double deadline_s;
  rg_outer_hparams outer;
  int encoding, block; /* the outer update's encoding (islands_quant.h) */
  int max_staleness;   /* 0: late contributions dropped */
  int inner_steps;     /* H: a contribution after inner update S covers ((S - 1) mod H) + 1 updates */
  long long run_updates; /* > 0: the run ends once its versions have merged this many inner updates */
} rg_isl_coord_opts;

typedef struct rg_isl_coord rg_isl_coord;

/* Opens SYNC: a new run from INIT and THETA0 (INIT->n floats) when SYNC
 * has no run.json (O's outer step settings stored in it), else the run
 * there (INIT, when given, must have its shape: the same trainable
 * parameters; O the settings run.json holds: one line naming the first
 * that differs). NULL with the error set. */
rg_isl_coord *rg_isl_coord_open(const char *sync_dir, const rg_isl_coord_opts *o, const rg_isl_run *init,
                                const float *theta0);
void rg_isl_coord_free(rg_isl_coord *c);

/* One look at SYNC/contrib: drops the bad, makes a version when one is
 * due, and ends the run (SYNC/final.json, naming the newest version) when
 * every island has finished and nothing is pending, or when run_updates
 * inner updates are merged. *DONE: the run has ended (now or before). 0
 * or -1 with the error set (the sync directory failed). */
int rg_isl_coord_poll(rg_isl_coord *c, bool *done);
/* Polls every POLL_S seconds until done, or until MAX_VERSIONS (> 0) have
 * been made. LOG (may be NULL) gets a line per version. 0 or -1. */
int rg_isl_coord_run(rg_isl_coord *c, double poll_s, long max_versions, FILE *log);
long rg_isl_coord_version(const rg_isl_coord *c);

/* Recomputes every version of SYNC from v0, its records and archived
 * contributions, with the outer step's settings of SYNC/run.json (O's for
 * a run.json without them), and compares each with the version's theta where
 * it is still kept. *CHECKED gets how many were compared (the newest
 * always is). 0 when all match bit for bit; -1 with the error naming the
 * first that does not. */
int rg_isl_replay(const char *sync_dir, const rg_isl_coord_opts *o, long *checked);

#endif
