/* attack_dump.h: `refgeo attack --dump-steps FILE.jsonl`, what every GCG
 * step of the attack saw and chose, one JSON object per line, so that a
 * user can check the gradient, the sampling and the filter against their
 * own implementation:
 *
 *   {"behavior_id", "step" (1, 2, ...: the --log CSV's),
 *    "suffix": [ids the step started from], "loss": its loss,
 *    "top_k": [[ids] per suffix position: its top-k of -gradient, best
 *              first] (null when the candidates were not sampled from it),
 *    "candidates": [[[position, id], ...] per candidate: where it differs
 *                   from "suffix" (HarmBench's candidates: one position,
 *                   or none when the drawn token is the current one)],
 *    "losses": [per candidate; null where not evaluated (the filter
 *               removed it)],
 *    "removed": HarmBench's count of the filter's removals (0 when it
 *               removed every candidate and so kept all, or is off),
 *    "verified": [0/1 per candidate] (--screen only: 1 where the loss is
 *                float32's, 0 where it is the 8-bit screen's),
 *    "chosen": the index of the candidate that became the suffix,
 *    "chosen_loss"}
 *
 * At HarmBench's settings (20 positions, top-k 256, width 512) a line is
 * about 60 KB. The file holds the behaviors this invocation attacked (a
 * resumed run's earlier behaviors are not in it) and is written to a
 * temporary file renamed into place when the attack ends.
 */
#ifndef REFGEO_ATTACK_DUMP_H
#define REFGEO_ATTACK_DUMP_H

#include "adv_ft/gcg.h"
#include "util/fileio.h"

typedef struct {
  rg_atomic_file file;
  const char *behavior_id; /* the behavior under attack: set before each rg_gcg_run */
} attack_dump;

/* 0, or -1 with the error set naming PATH. */
int attack_dump_open(attack_dump *d, const char *path);
/* rg_gcg_opts.on_step with USER an attack_dump: writes the step's line.
 * 0, or -1 with the error set. */
int attack_dump_step(void *user, const rg_gcg_step_view *v);
/* Renames the file into place: 0, or -1 with the error set. */
int attack_dump_close(attack_dump *d);
/* Discards it (an error path). */
void attack_dump_abort(attack_dump *d);

#endif
