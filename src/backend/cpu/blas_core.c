/* blas_core.c: OpenBLAS's kernel set for this CPU (see blas_core.h). */
#include "backend/cpu/blas_core.h"

#include <cblas.h>
#include <stdlib.h>
#include <strings.h>

rg_cpu_isa rg_cpu_isa_detect(void) {
  /* libgcc's __builtin_cpu_supports also checks xgetbv: a feature the OS does
   * not save across context switches reads as absent. */
  rg_cpu_isa isa = {0};
  isa.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  isa.avx512 = isa.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  isa.avx512_bf16 = isa.avx512 && __builtin_cpu_supports("avx512bf16");
  return isa;
}

/* OpenBLAS 0.3.21's x86-64 cores with AVX2 kernels (its driver/others/
 * dynamic.c; later releases add SapphireRapids). Zen runs the Haswell ones. */
static bool core_has_avx2(const char *core) {
  static const char *const with_avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  for (size_t i = 0; i < sizeof with_avx2 / sizeof with_avx2[0]; i++)
    if (strcasecmp(core, with_avx2[i]) == 0) return true;
  return false;
}

const char *rg_blas_core_for(const char *detected, rg_cpu_isa isa) {
  if (!isa.avx2_fma || (detected && core_has_avx2(detected))) return NULL;
  if (isa.avx512_bf16) return "Cooperlake";
  if (isa.avx512) return "SkylakeX";
  return "Haswell";
}

const char *rg_blas_core_name(void) { return openblas_get_corename(); }

bool rg_blas_core_select(void) {
  const char *set = getenv("OPENBLAS_CORETYPE");
  if (set && *set) return false;
  const char *core = rg_blas_core_for(rg_blas_core_name(), rg_cpu_isa_detect());
  return core && setenv("OPENBLAS_CORETYPE", core, 1) == 0;
}
