/* clock.c: seconds on the monotonic clock (clock.h). */
#include "util/clock.h"

#include <time.h>

double rg_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
