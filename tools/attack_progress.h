/* attack_progress.h: what `refgeo attack` has finished, kept so that a killed
 * run, rerun with the same flags, continues where it stopped.
 *
 * OUT.partial.json (next to --out, written atomically after each behavior):
 *   {"settings": {...the flags that decide a test case...},
 *    "done": [{"behavior_id", "test_case", "steps", "final_loss",
 *              "stop_reason", "seconds"}, ...]}
 * A rerun whose settings differ is refused (its test cases would mix two
 * attacks). The per-behavior log CSV (behavior_id, steps, final_loss,
 * stop_reason, seconds) is rewritten from "done" at the same time.
 *
 * Ownership: the progress owns its JSON; attack_progress_free releases it.
 */
#ifndef REFGEO_ATTACK_PROGRESS_H
#define REFGEO_ATTACK_PROGRESS_H

#include <cJSON.h>
#include <stdbool.h>

#include "harmbench/completions.h"

typedef struct {
  char *path;     /* OUT.partial.json */
  cJSON *root;    /* {"settings", "done"} */
  cJSON *done;    /* borrowed from root */
} attack_progress;

typedef struct {
  const char *behavior_id, *test_case, *stop_reason;
  int steps;
  double final_loss, seconds;
} attack_result;

/* Opens the progress of OUT: the finished behaviors of an earlier run with
 * SETTINGS (taken over), or none. -1 with the error set when the file is
 * unreadable or was made with other settings. */
int attack_progress_open(attack_progress *p, const char *out, cJSON *settings);
void attack_progress_free(attack_progress *p);

/* The finished result of BEHAVIOR_ID, or NULL. */
const cJSON *attack_progress_find(const attack_progress *p, const char *behavior_id);

/* Records R, then writes the progress file and (when LOG_PATH) the
 * per-behavior log. 0 or -1. */
int attack_progress_add(attack_progress *p, const attack_result *r, const char *log_path);

/* The test cases of every finished behavior, in the order they finished
 * (behaviors-file order). 0 or -1. */
int attack_progress_test_cases(const attack_progress *p, rg_completions *out);

/* Removes the progress file (the run is complete). */
int attack_progress_remove(const attack_progress *p);

#endif
