/* fault.c: named kill points for the crash tests (fault.h). */
#include "util/fault.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *env; /* the variable that names the point */
  int sig;         /* what reaching it raises */
  char name[64];
  long at;         /* -1: not read yet; 0: no point set */
  long hits;
} fault;

static fault faults[] = {{"REFGEO_KILL_AT", SIGKILL, "", -1, 0}, {"REFGEO_STOP_AT", SIGSTOP, "", -1, 0}};

static void arm(fault *f) {
  const char *spec = getenv(f->env);
  const char *colon = spec ? strrchr(spec, ':') : NULL;
  f->at = 0;
  if (colon && (size_t)(colon - spec) < sizeof f->name) {
    memcpy(f->name, spec, (size_t)(colon - spec));
    f->name[colon - spec] = '\0';
    f->at = strtol(colon + 1, NULL, 10);
    if (f->at < 0) f->at = 0;
  }
}

void rg_fault_point(const char *name) {
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    fault *f = &faults[i];
    if (f->at < 0) arm(f);
    if (f->at > 0 && strcmp(name, f->name) == 0 && ++f->hits == f->at) raise(f->sig);
  }
}
