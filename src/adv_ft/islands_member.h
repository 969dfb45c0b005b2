/* islands_member.h: an island's side of training across islands
 * (docs/training.md, "Islands"): the trainer (trainer.h) calls it every
 * inner_steps updates.
 *
 * An island keeps theta_global of the version it last adopted (host
 * float32, the trainable parameters in rg_weights order). At an outer
 * boundary it publishes Delta = theta_global - theta_island (encoded,
 * islands_quant.h) as SYNC/contrib/i<I>-s<S>.msg, waits for a version newer
 * than its base, and adopts it: it applies the update messages of the
 * versions in between to its theta_global (a few bytes per parameter) and
 * checks the result against the version's SHA256SUMS entry for theta.f32;
 * when an update is gone (retired) or the digest differs, it reads the
 * whole theta.f32 instead (recovery bytes). Then theta_global goes into the
 * weights, and inner training continues from it (its AdamW moments, pool
 * and random state are its own and carry on).
 * Bytes fetched are counted and reported in the island's next contribution
 * (its header), so the coordinator's islands_log.csv has every byte.
 *
 * Ownership: the member owns its buffers; the weights are borrowed per call.
 */
#ifndef RG_ADV_FT_ISLANDS_MEMBER_H
#define RG_ADV_FT_ISLANDS_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/weights.h"

typedef struct rg_isl_member rg_isl_member;

/* Island ISLAND of the run in SYNC, for W's trainable parameters, sending
 * with ENCODING in blocks of BLOCK: waits up to WAIT_S for SYNC/run.json
 * (the coordinator writes it) and checks that its run has W's parameters
 * and ISLAND is below its islands. NULL with the error set. */
rg_isl_member *rg_isl_member_open(const char *sync_dir, int island, int encoding, int block, const rg_weights *w,
                                  double wait_s);
void rg_isl_member_free(rg_isl_member *m);

uint64_t rg_isl_member_run_id(const rg_isl_member *m);
long rg_isl_member_version(const rg_isl_member *m);

/* The newest global version, waiting up to WAIT_S for one newer than
 * AFTER (-1: any), or AFTER itself when its record shows this island's
 * last published step merged already (a restarted island sent it again:
 * the coordinator drops that copy, and no newer version may come); the
 * run's final version once the run has ended (none comes after it). -1
 * with the error set when none comes. */
long rg_isl_member_wait(const rg_isl_member *m, long after, double wait_s);

/* 1 with *V the run's final version when the run has ended
 * (SYNC/final.json), 0 when it has not, -1 with the error set. */
int rg_isl_member_ended(const rg_isl_member *m, long *v);

/* Waits up to WAIT_S for the run's end (every island has finished, or the
 * run's updates are merged): 1 with *V its final version, 0 when it has not
 * ended by then, -1 with the error set (a bad final.json). */
int rg_isl_member_wait_end(const rg_isl_member *m, double wait_s, long *v);

/* Reads version V whole into theta_global and W (a start or a restart;
 * RECOVERY: its bytes count as recovery). 0 or -1. */
int rg_isl_member_join(rg_isl_member *m, rg_weights *w, long v, bool recovery);

/* Publishes W's pseudo-gradient after inner update STEP with WEIGHT. 0 or -1. */
int rg_isl_member_publish(rg_isl_member *m, const rg_weights *w, long step, double weight);

/* Moves theta_global to version V (>= the current one) and sets W to it:
 * from its update messages, else V read whole. 0 or -1 (V is gone: never
 * another version, which the ranks of an island must choose together). */
int rg_isl_member_adopt(rg_isl_member *m, rg_weights *w, long v);

/* Marks this island finished (SYNC/done/i<I>): it sends no more
 * contributions. 0 or -1. */
int rg_isl_member_finish(const rg_isl_member *m);

#endif
