/* backend/registry.h: the constructors of the backends a build has, which
 * the registry (registry.c) lists by name. Code that wants a backend calls
 * rg_backend_new (backend.h) with a name; these are for the registry, the
 * backends that define them, and benches that time one backend alone. */
#ifndef RG_BACKEND_REGISTRY_H
#define RG_BACKEND_REGISTRY_H

#include "backend/backend.h"

/* The CPU backend (what rg_backend_new makes for "cpu"). */
rg_backend *rg_backend_cpu_new(const rg_backend_opts *opts);
/* The GPU backend of a build with one (REFGEO_GPU_CUDA: "cuda", and
 * "cuda-tiled", which takes the project's own matrix product instead of
 * cuBLAS; REFGEO_GPU_HIP: "hip"), on device N of "NAME:N" (0 without).
 * NULL with the error set, also when the device is not there. In a build
 * without one, it only sets the error. */
rg_backend *rg_backend_gpu_new(const rg_backend_opts *opts);

#endif
