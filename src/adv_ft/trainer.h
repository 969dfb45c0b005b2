/* trainer.h: R2D2 adversarial fine-tuning (HarmBench's recipe; the
 * project's R2D2 notes, sections 1.1-1.10; docs/training.md) on refgeo's
 * engine.
 *
 * A run trains one model for cfg.updates optimizer updates. Each update is
 * cfg.grad_accum micro-batches; each micro-batch
 *   1. (at the last micro-batch of every reset_every-th update) resets a
 *      fraction of the test-case pool (pool.h);
 *   2. takes cases_per_step pool entries in a random order and runs
 *      gcg_steps GCG steps on each (adv_ft/gcg.h), on the current weights,
 *      towards its away target, warm-started from its stored suffix;
 *   3. runs one forward and backward pass over a batch of, per chosen
 *      entry, an away example (its test case + away target) and a toward
 *      example (the same test case + the refusal + EOS), plus
 *      utility_per_step utility examples; the loss is
 *      w_utility utility + w_away away + w_toward toward (r2d2_loss.h),
 *      divided by grad_accum, as accelerate averages micro-batches;
 * then clips (when cfg.clip > 0) and takes one AdamW step at the
 * schedule's learning rate. A step is one update.
 *
 * RUN_DIR receives config.ini (every key, resolved), checkpoint-<s>/ for
 * each save step (Hugging Face directories, hf_write.h; checkpoint-0 is the
 * base model), train_log.csv (one row per update, rewritten atomically),
 * utility.jsonl (the generated utility examples) and state/ (train_state.h).
 *
 * With [islands] sync_dir (docs/training.md, "Islands") the run is one
 * island of a run across islands: every inner_steps updates it publishes
 * its pseudo-gradient, saves its state (only there: mid-interval states
 * would lack theta_global) and continues from the next global version
 * (islands_member.h); island_data = shard makes island i train the
 * micro-batches k = i mod islands of one stream, each scaled by
 * islands / grad_accum (the mean over its own share).
 *
 * Ownership: the trainer copies nothing from CFG but takes ownership of it
 * (its strings are freed with the trainer).
 */
#ifndef RG_ADV_FT_TRAINER_H
#define RG_ADV_FT_TRAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "adv_ft/train_config.h"
#include "adv_ft/train_plan.h"

typedef struct rg_trainer rg_trainer;

/* Opens a run: a new RUN_DIR (it must not hold a run yet), or with RESUME
 * an existing one whose config.ini equals CFG in every key but threads,
 * continued from its newest state. On success the trainer owns *CFG (zeroed
 * for the caller). NULL with the error set. */
rg_trainer *rg_trainer_open(rg_train_config *cfg, const char *run_dir, bool resume);
void rg_trainer_free(rg_trainer *t);

/* Trains up to cfg.updates, writing checkpoints, the log and states.
 * PROGRESS (may be NULL) gets one line per update. Returns 0, or -1 with the
 * error set. */
int rg_trainer_run(rg_trainer *t, FILE *progress);

/* The memory plan of a run of CFG (train_plan.h) into PLAN, whose device
 * fields rg_train_plan_device has set: the allocation steps of
 * rg_trainer_open on a plan backend; no run dir, no utility data, nothing
 * written. With recompute = auto, the plan of the policy the run would
 * choose (the least recompute that fits the device per rank), and NOTE
 * (NOTE_LEN bytes) says which and why; otherwise NOTE is "". Takes
 * ownership of *CFG (zeroed) as rg_trainer_open does. Returns 0 or -1
 * with the error set (with auto: nothing fits). */
int rg_trainer_plan(rg_train_config *cfg, rg_train_plan *plan, char *note, size_t note_len);

/* The closing note of a plan: CFG (borrowed) planned on DEVICE's device
 * and ranks (rg_train_plan device fields and ranks) with zero = 0, 1 and
 * 2, and in LoRA mode on one rank, one line each with the total per rank
 * and whether it fits (and by how much), into NOTE. */
void rg_trainer_plan_compare(const rg_train_config *cfg, const rg_train_plan *device, char *note, size_t note_len);

/* The trainable parameters a run of CFG (borrowed) starts from, as one
 * float32 array in rg_weights order (*THETA, malloc'd; *N floats), and the
 * digest of their names and sizes (islands_sync.h rg_isl_shape): what the
 * islands' coordinator starts the global state from. 0 or -1 with the
 * error set. */
int rg_trainer_initial_params(const rg_train_config *cfg, char shape[65], uint64_t *n, float **theta);

/* Updates done so far. */
long rg_trainer_step(const rg_trainer *t);

#endif
