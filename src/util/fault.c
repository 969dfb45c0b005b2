/* fault.c: named kill points for the crash tests (fault.h). */
#include "util/fault.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static char target[64];
static long target_hit = -1; /* -1: not read yet; 0: no kill point set */
static long hits;

void rg_fault_point(const char *name) {
  if (target_hit < 0) {
    const char *spec = getenv("REFGEO_KILL_AT");
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    target_hit = 0;
    if (colon && (size_t)(colon - spec) < sizeof target) {
      memcpy(target, spec, (size_t)(colon - spec));
      target[colon - spec] = '\0';
      target_hit = strtol(colon + 1, NULL, 10);
      if (target_hit < 0) target_hit = 0;
    }
  }
  if (target_hit > 0 && strcmp(name, target) == 0 && ++hits == target_hit) raise(SIGKILL);
}
