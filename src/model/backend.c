/* backend.c: making a backend by name (backend.h). */
#include "model/backend.h"

#include <string.h>

#include "model/backend_plan.h"
#include "util/error.h"

typedef struct {
  const char *name;
  rg_backend *(*make)(const rg_backend_opts *o);
} backend_entry;

/* Every backend this build has; a GPU build adds its entries here. The
 * plan backends count bytes instead of computing (backend_plan.h). */
static const backend_entry BACKENDS[] = {
    {"cpu", rg_backend_cpu_new}, {"plan-cpu", rg_backend_plan_cpu_new}, {"plan-gpu", rg_backend_plan_gpu_new}};
enum { N_BACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

rg_backend *rg_backend_new(const rg_backend_opts *o) {
  const char *name = o && o->name ? o->name : "cpu";
  for (int i = 0; i < N_BACKENDS; i++)
    if (strcmp(BACKENDS[i].name, name) == 0) return BACKENDS[i].make(o);
  char known[128] = "";
  for (int i = 0; i < N_BACKENDS; i++) {
    if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
    strncat(known, BACKENDS[i].name, sizeof known - strlen(known) - 1);
  }
  rg_error_set("backend '%s' is not in this build (known: %s)", name, known);
  return NULL;
}
