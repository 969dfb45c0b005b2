/* bench_sha256: seconds and MB/s of refgeo's SHA-256 (util/sha256.h) over
 * files, as the run directory's checksums read them: what checking a
 * training state or a checkpoint adds to a run (bench/integrity_cost.sh).
 *
 *   bench_sha256 FILE... [--repeats R]
 *
 * Each file is read once first (into the page cache, as a state just
 * written or a checkpoint a stage is about to load), then hashed R times
 * (3); prints per file the median seconds and MB/s, and the total. Seconds
 * are this process's CPU time (CLOCK_PROCESS_CPUTIME_ID): on a shared
 * machine the wall clock also counts the other jobs' turns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/error.h"
#include "util/sha256.h"

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int repeats = 3;
  double total_s = 0, total_mb = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
      continue;
    }
    struct stat st;
    char hex[65];
    if (stat(argv[i], &st) != 0 || rg_sha256_file(argv[i], hex) < 0) { /* the untimed read */
      fprintf(stderr, "bench_sha256: %s: cannot read\n", argv[i]);
      return 1;
    }
    double t[16];
    const int r = repeats < 1 ? 1 : repeats > 16 ? 16 : repeats;
    for (int k = 0; k < r; k++) {
      const double t0 = cpu_seconds();
      if (rg_sha256_file(argv[i], hex) < 0) return fprintf(stderr, "bench_sha256: %s\n", rg_error_get()), 1;
      t[k] = cpu_seconds() - t0;
    }
    qsort(t, (size_t)r, sizeof t[0], by_value);
    const double s = t[r / 2], mb = (double)st.st_size / 1e6;
    printf("%-60s %10.1f MB %8.3f s %8.1f MB/s\n", argv[i], mb, s, mb / s);
    total_s += s, total_mb += mb;
  }
  printf("total %.1f MB in %.3f s (%.1f MB/s)\n", total_mb, total_s, total_s > 0 ? total_mb / total_s : 0);
  return 0;
}
