/* blas_core.h: which of OpenBLAS's kernel sets ("cores") to ask for when the
 * library's own CPU detection fell back to a generic one.
 *
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels by CPU model
 * number when it loads. A CPU newer than the library, or one whose model a
 * hypervisor hides, gets the SSE3 "Prescott" kernels whatever its vector
 * units: on an Emerald Rapids Xeon (family 6, model 207) that made sgemm
 * 52 GFLOP/s on 2 threads against 234 with the Cooperlake kernels, and
 * refgeo's prefill 0.17x torch's. The library reads OPENBLAS_CORETYPE once, as
 * it loads, so the CLI and the test programs restart themselves with it set
 * (cli_runtime_env, tests/testlib.c). */
#ifndef RG_BLAS_CORE_H
#define RG_BLAS_CORE_H

#include <stdbool.h>

/* The vector features of a CPU that decide the kernel set. */
typedef struct {
  bool avx2_fma;    /* AVX2 and FMA: OpenBLAS's Haswell kernels */
  bool avx512;      /* AVX-512 F, CD, BW, DQ and VL: its SkylakeX kernels */
  bool avx512_bf16; /* AVX-512 BF16 too: its Cooperlake kernels */
} rg_cpu_isa;

/* This CPU's features, as the OS enables them (cpuid and xgetbv). */
rg_cpu_isa rg_cpu_isa_detect(void);

/* The OPENBLAS_CORETYPE value that gives a CPU with `isa` the kernels it can
 * run, when OpenBLAS chose `detected` (openblas_get_corename(), any case)
 * without AVX2 kernels; NULL when `detected` already has them (a core the
 * library recognized, which is left alone) or the CPU has no AVX2. The
 * returned string is static. */
const char *rg_blas_core_for(const char *detected, rg_cpu_isa isa);

/* Sets OPENBLAS_CORETYPE to rg_blas_core_for(the loaded library's core,
 * this CPU) when that is not NULL and the user set no OPENBLAS_CORETYPE.
 * Returns true when it set it: the library reads it only as it loads, so
 * the caller restarts the process (execv) for it to take effect. */
bool rg_blas_core_select(void);

/* The kernel set the loaded OpenBLAS runs ("Cooperlake", "Haswell", ...). */
const char *rg_blas_core_name(void);

#endif
