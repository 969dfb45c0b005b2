/* clock.h: seconds on the monotonic clock, for durations and rates (progress
 * lines, timings in logs and benches). */
#ifndef RG_CLOCK_H
#define RG_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): only differences
 * mean anything; never goes back when the wall clock is set. */
double rg_now_seconds(void);

#endif
