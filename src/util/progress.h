/* progress.h: a progress bar with rate and time left, for long loops
 * (capture, generation, carrier scoring, utility replies).
 *
 * On a terminal the bar is redrawn in place ("\r") at every tick:
 *   LABEL [#########...............] 45/120  37%  2.3/s  ETA 32s
 * In a log file or a pipe the ticks print nothing and the end prints one
 * line, "LABEL: N done in T (R/s)", so a log gets one line per loop (per
 * stage or per checkpoint) however long it runs. The estimate assumes the
 * items left cost what the items done cost on average.
 *
 * REFGEO_VERBOSITY (set by the CLI's --quiet / --verbose, cli.h): "quiet"
 * writes nothing; "verbose" adds a log line at every tenth of the loop.
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
  int total, done, last_tenth;
  bool verbose; /* REFGEO_VERBOSITY=verbose: a log line per tenth as well */
  bool tty;
  double t0; /* monotonic seconds at start */
} rg_progress;

/* Starts reporting TOTAL items of work to OUT (may be NULL). */
void rg_progress_start(rg_progress *p, FILE *out, const char *label, int total);
/* DONE of the items are finished. */
void rg_progress_tick(rg_progress *p, int done);
/* Prints one line of news (printf-style) that stays: on a terminal above
 * the bar, which is redrawn under it; in a log as a line of its own.
 * Nothing under quiet or without a stream. */
void rg_progress_note(rg_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the line (on a terminal) and prints the total time. */
void rg_progress_end(rg_progress *p);

#endif
