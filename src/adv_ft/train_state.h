/* train_state.h: what `refgeo train --resume` continues from.
 *
 * RUN_DIR/state/step-<S>/ holds, after S optimizer updates:
 *   params.f32    every trainable parameter (rg_weights order: the full
 *                 model, or the LoRA adapters) as little-endian float32,
 *                 concatenated;
 *   moments.f32   per parameter, AdamW's m then v, float32, concatenated;
 *   meta.json     {"step": S, "optimizer_steps", "rng": "<u64 hex>",
 *                  "utility_cursor", "pool": [...] (pool.h), "log": [[...]]
 *                  (the train_log.csv rows so far, each value a string in
 *                  %.17g, which round-trips every double), and for an
 *                  island "islands_run" (its run's id, hex) and
 *                  "islands_version" (the global version it was based on)};
 *   SHA256SUMS    the sha256 of the files above (and of the ZeRO shards
 *                 below), written after them (util/manifest.h); a load
 *                 checks each file against it and refuses one that
 *                 differs, naming the file.
 * With ZeRO (zero.h) moments.f32 is not written; instead each data-parallel
 * rank r of W writes its shard of the moments:
 *   zero-<r>-of-<W>.f32  a 48-byte header: "RGZERO1" and a NUL, then
 *                 little-endian u32 W, u32 r, i64 S, u64 the run's id (meta's
 *                 zero_run), u64 n (the shard's floats), u64 0; then m and
 *                 v of the shard (n float32 each);
 * and meta.json adds "zero" (the stage), "zero_ranks" (W) and "zero_run".
 * A resume reads its own rank's file and refuses a state of another W or
 * stage, a missing file, one of another run or step, or one whose sha256
 * is not SHA256SUMS's.
 * It is written as step-<S>.tmp/ (a stale one is removed first), fsync'd,
 * and renamed to step-<S>/; only then are older step-* folders retired:
 * each is renamed to step-<K>.old/ in one step and then deleted. So a kill
 * at any moment leaves at least one complete state (or none before the
 * first) and never a half-deleted one under a state's name; .tmp and .old
 * folders are never read, and rg_train_state_tidy removes them.
 *
 * Ownership: the functions borrow what they are given; *meta from
 * rg_train_state_load is the caller's.
 */
#ifndef RG_ADV_FT_TRAIN_STATE_H
#define RG_ADV_FT_TRAIN_STATE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "adv_ft/optimizer.h"
#include "engine/weights.h"

/* Writes the state of step STEP (W's parameters, O's moments, META).
 * Returns 0 or -1 with the error set. */
int rg_train_state_save(const char *run_dir, long step, const rg_weights *w, const rg_optimizer *o, const cJSON *meta);

/* ZeRO: rank 0 makes the state's step-<S>.tmp/ folder, new and empty,
 * before every rank writes its shard into it (rg_train_state_save_shard)
 * and rank 0 ends it (rg_train_state_save, which then neither empties the
 * folder nor writes moments.f32). 0 or -1 with the error set. */
int rg_train_state_begin(const char *run_dir, long step);
int rg_train_state_save_shard(const char *run_dir, long step, const rg_optimizer *o, uint64_t run_id);
/* This rank's shard of state STEP into O, checked against RUN_ID and the
 * step. 0 or -1 with the error set naming the file. */
int rg_train_state_load_shard(const char *run_dir, long step, rg_optimizer *o, uint64_t run_id);

/* The step of the newest complete state in RUN_DIR, or -1 when there is
 * none. */
long rg_train_state_latest(const char *run_dir);

/* Retires every state/step-* folder but step-KEEP (the state just written
 * or resumed from; -1 when there is none) and removes the step-*.tmp and
 * step-*.old folders of interrupted saves and retirements. Returns 0 or -1
 * with the error set. */
int rg_train_state_tidy(const char *run_dir, long keep);

/* Loads state STEP into W and O and *meta (a new tree). The files must have
 * exactly the sizes W's parameters need and the digests in the state's
 * SHA256SUMS. Returns 0 or -1 with the error set naming the file. */
int rg_train_state_load(const char *run_dir, long step, rg_weights *w, rg_optimizer *o, cJSON **meta);

#endif
