/* backend/registry.c: making a backend by name (backend.h, registry.h). */
#include "backend/registry.h"

#include <stdlib.h>
#include <string.h>

#include "backend/plan.h"
#include "util/error.h"

#if !defined(REFGEO_GPU_CUDA) && !defined(REFGEO_GPU_HIP)
rg_backend *rg_backend_gpu_new(const rg_backend_opts *o) {
  rg_error_set("this build has no GPU backend (CMake REFGEO_CUDA, REFGEO_HIP)");
  return NULL;
}
int rg_gpu_device_count(void) { return 0; }
const char *rg_gpu_backend_name(void) { return NULL; }
int rg_gpu_device_info(int i, char *name, size_t name_len, size_t *bytes) {
  return rg_error_set("this build has no GPU backend");
}
#endif

typedef struct {
  const char *name;
  rg_backend *(*make)(const rg_backend_opts *o);
} backend_entry;

/* Every backend this build has. The plan backends count bytes instead of
 * computing (backend/plan.h); a GPU build adds its own (backend/gpu/gpu.cu),
 * whose names take a device number (":N"). */
static const backend_entry BACKENDS[] = {
    {"cpu", rg_backend_cpu_new},
    {"plan-cpu", rg_backend_plan_cpu_new},
    {"plan-gpu", rg_backend_plan_gpu_new},
#if defined(REFGEO_GPU_CUDA)
    {"cuda", rg_backend_gpu_new},
    {"cuda-tiled", rg_backend_gpu_new},
#elif defined(REFGEO_GPU_HIP)
    {"hip", rg_backend_gpu_new},
#endif
};
enum { N_BACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

/* The entry NAME ("cuda:1": "cuda", device 1) names, or NULL. */
static const backend_entry *entry_of(const char *name) {
  const size_t len = strcspn(name, ":");
  for (int i = 0; i < N_BACKENDS; i++)
    if (strlen(BACKENDS[i].name) == len && strncmp(BACKENDS[i].name, name, len) == 0 &&
        (name[len] == '\0' || (BACKENDS[i].make == rg_backend_gpu_new && name[len + 1] &&
                               strspn(name + len + 1, "0123456789") == strlen(name + len + 1))))
      return &BACKENDS[i];
  return NULL;
}

const char *rg_backend_default_name(void) {
  const char *d = getenv("REFGEO_DEVICE");
  return d && *d ? d : "cpu";
}

int rg_backend_check_device(const char *name) {
  const backend_entry *e = entry_of(name);
  if (e && strncmp(name, "plan-", 5) != 0) return 0;
  char known[128] = "";
  for (int i = 0; i < N_BACKENDS; i++) {
    if (strncmp(BACKENDS[i].name, "plan-", 5) == 0) continue;
    if (known[0]) strncat(known, ", ", sizeof known - strlen(known) - 1);
    strncat(known, BACKENDS[i].name, sizeof known - strlen(known) - 1);
    if (BACKENDS[i].make == rg_backend_gpu_new) strncat(known, "[:N]", sizeof known - strlen(known) - 1);
  }
  return rg_error_set("unknown device '%s' (this build has: %s)", name, known);
}

rg_backend *rg_backend_new(const rg_backend_opts *o) {
  const char *name = o && o->name ? o->name : rg_backend_default_name();
  const backend_entry *e = entry_of(name);
  if (e) {
    /* the constructor gets the name resolved here, so that no backend calls
     * back into the registry for it */
    rg_backend_opts named = o ? *o : (rg_backend_opts){0};
    named.name = name;
    return e->make(&named);
  }
  rg_backend_check_device(name); /* the error: the names this build has */
  return NULL;
}
