/* progress.h: one progress line with an estimated time left, for long loops
 * (carrier scoring, later training updates).
 *
 * On a terminal the line is rewritten in place ("\r") at every tick; in a
 * log file or pipe it is printed as a new line only when another tenth of
 * the work is done, so a log gets about ten lines however long the loop.
 * The estimate assumes the items left cost what the items done cost on
 * average.
 *
 * Ownership: the caller owns the struct and the stream; nothing is
 * allocated.
 */
#ifndef RG_UTIL_PROGRESS_H
#define RG_UTIL_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
  FILE *out;         /* NULL: report nothing */
  const char *label; /* e.g. "step 0: scoring 180 carrier candidates" */
  int total, last_tenth;
  bool tty;
  double t0; /* monotonic seconds at start */
} rg_progress;

/* Starts reporting TOTAL items of work to OUT (may be NULL). */
void rg_progress_start(rg_progress *p, FILE *out, const char *label, int total);
/* DONE of the items are finished. */
void rg_progress_tick(rg_progress *p, int done);
/* Ends the line (on a terminal) and prints the total time. */
void rg_progress_end(rg_progress *p);

#endif
