/* bench_util.h: the timing helpers the bench_* programs share. */
#ifndef RG_BENCH_UTIL_H
#define RG_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

#include "util/clock.h"

static inline double bench_now_s(void) { return rg_now_seconds(); }

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[n] (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
