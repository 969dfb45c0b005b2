/* pool.h: R2D2's persistent pool of test cases (HarmBench 8e1604d,
 * adversarial_training/alignment-handbook/scripts/adv_training_utils.py,
 * "ATU": initialize_test_case_dicts 105-168, reset_test_case_dicts 170-207).
 *
 * An entry is a behavior, one of its away targets, and an adversarial
 * suffix that GCG keeps optimizing across updates (warm-started from where
 * the last micro-batch left it). Decisions against HarmBench's code (the
 * project's R2D2 notes, section 1.9; docs/training.md says why):
 *   - behaviors are drawn from the set's eligible ones (not contextual) at
 *     initialization and at resets alike (quirk f: HarmBench resets from the
 *     unfiltered list, dropping the context of what it draws);
 *   - every entry draws its own suffix length n in [15, 20] and target
 *     (quirk e: HarmBench re-seeds per entry, so all share them);
 *   - the initial suffix "! ! ... !" (n marks) is tokenized without BOS
 *     (quirk c);
 *   - a reset re-initializes max(1, floor(fraction * size)) distinct entries
 *     (HarmBench: int(0.2 * 8) = 1), each with a new behavior (distinct
 *     behaviors at initialization, any at reset, as HarmBench).
 * Draws use refgeo's splitmix64 stream passed in by the caller, so a run
 * replays exactly from a saved state, but not numpy's draws.
 *
 * Ownership: the pool borrows the data set (it must outlive the pool) and
 * owns its entries' suffixes.
 */
#ifndef RG_ADV_FT_POOL_H
#define RG_ADV_FT_POOL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "adv_ft/r2d2_data.h"
#include "adv_ft/test_case.h"
#include "model/model.h"

typedef struct {
  int behavior;     /* index into the data set's items */
  int target;       /* index into that behavior's targets */
  int32_t *suffix;  /* n_suffix ids */
  int n_suffix;
  double loss;      /* GCG's target loss after its last step; NAN before */
} rg_pool_entry;

typedef struct {
  const rg_r2d2_data *data;
  int n;
  rg_pool_entry *items;
} rg_pool;

/* N entries on N distinct eligible behaviors (N <= the eligible count).
 * Returns 0, or -1 with the error set. */
int rg_pool_init(rg_pool *p, const rg_model *m, const rg_r2d2_data *d, int n, uint64_t *rng);
void rg_pool_free(rg_pool *p);

/* Re-initializes max(1, floor(fraction * n)) distinct random entries (none
 * when fraction <= 0). Returns the number reset, or -1 with the error set. */
/* Whether every test case the pool can draw fits MAX_CASE_TOKENS: each
 * eligible behavior with each of its away targets, and with the toward
 * target REFUSAL (and EOS), in frame F with the longest initial suffix
 * (GCG swaps suffix tokens but keeps their count, so a case never grows).
 * Returns 0, or -1 with one line naming the behavior, its length and the
 * cap. */
int rg_pool_check_lengths(const rg_model *m, const rg_test_case_frame *f, const rg_r2d2_data *d, const char *refusal,
                          int max_case_tokens);

int rg_pool_reset(rg_pool *p, const rg_model *m, double fraction, uint64_t *rng);

/* The pool as JSON ([{"behavior_id", "target", "suffix": [ids], "loss"}]),
 * a new tree or NULL; and back, checking ids against the data set and the
 * model's vocabulary. Returns 0, or -1 with the error set naming WHAT. */
cJSON *rg_pool_to_json(const rg_pool *p);
int rg_pool_from_json(rg_pool *p, const rg_model *m, const rg_r2d2_data *d, const cJSON *j, const char *what);

/* A uniform draw in [0, n) from the stream (n >= 1). */
int rg_pool_draw(uint64_t *rng, int n);

/* A partial Fisher-Yates shuffle: items[0..k) become k distinct random
 * items of items[0..n), in random order (k <= n). */
void rg_pool_pick(uint64_t *rng, int *items, int n, int k);

#endif
