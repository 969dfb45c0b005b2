/* test_blas_core: the OpenBLAS kernel set refgeo asks for (backend/cpu/blas_core.h).
 *
 * The choice is checked as a table over OpenBLAS 0.3.21's core names (its
 * driver/others/dynamic.c) and CPU features; then the CLI itself: on a CPU
 * with AVX2, `refgeo info --devices --json` must name kernels with AVX2
 * whatever the library detected (on an Emerald Rapids Xeon, Debian's
 * OpenBLAS detects "Prescott", whose sgemm ran at a fifth of the speed), and
 * an OPENBLAS_CORETYPE the user set is kept, by the CLI and by this program
 * (a machine may set one for every process: this one sets Haswell). */
#include "testlib.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/blas_core.h"

static void test_choice_table(void **state) {
  const rg_cpu_isa sse = {0}, avx2 = {.avx2_fma = true}, avx512 = {.avx2_fma = true, .avx512 = true},
                   bf16 = {.avx2_fma = true, .avx512 = true, .avx512_bf16 = true};
  static const char *const fallbacks[] = {"Prescott", "Core2", "Penryn", "Nehalem", "Sandybridge", "Barcelona", "katmai"};
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
    assert_null(rg_blas_core_for(fallbacks[i], sse)); /* nothing better to ask for */
    assert_string_equal(rg_blas_core_for(fallbacks[i], avx2), "Haswell");
    assert_string_equal(rg_blas_core_for(fallbacks[i], avx512), "SkylakeX");
    assert_string_equal(rg_blas_core_for(fallbacks[i], bf16), "Cooperlake");
  }
  /* a core with AVX2 kernels is the library's informed choice: left alone
   * (Zen on an AVX-512 Zen 4 included), in any case of its name */
  static const char *const recognized[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "HASWELL"};
  for (size_t i = 0; i < sizeof recognized / sizeof recognized[0]; i++) {
    assert_null(rg_blas_core_for(recognized[i], avx2));
    assert_null(rg_blas_core_for(recognized[i], bf16));
  }
  assert_string_equal(rg_blas_core_for(NULL, avx512), "SkylakeX"); /* no name: as a fallback */
}

/* The kernels the CLI's OpenBLAS runs, from info --devices --json. */
static char *cli_blas_kernels(void) {
  char *out = NULL;
  assert_int_equal(t_run_cli("info --devices --json", &out, NULL), 0);
  cJSON *j = cJSON_Parse(out);
  assert_non_null(j);
  const cJSON *k = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0), "blas_kernels");
  assert_true(cJSON_IsString(k));
  char *name = strdup(k->valuestring);
  cJSON_Delete(j);
  free(out);
  return name;
}

static void test_cli_runs_vector_kernels(void **state) {
  /* this test program runs the kernels the CLI runs in the same environment
   * (testlib.c restarts it), the user's OPENBLAS_CORETYPE included, if set */
  char *name = cli_blas_kernels();
  assert_string_equal(rg_blas_core_name(), name);
  free(name);

  /* with none set, vector kernels. CTest sets OMP_WAIT_POLICY, which leaves
   * GOMP_SPINCOUNT alone: the restart must happen for the kernels alone */
  const char *user = getenv("OPENBLAS_CORETYPE");
  char *user_core = user ? strdup(user) : NULL;
  unsetenv("OPENBLAS_CORETYPE");
  name = cli_blas_kernels();
  rg_cpu_isa isa = rg_cpu_isa_detect();
  print_message("cpu avx2+fma %d avx512 %d avx512_bf16 %d; CLI runs OpenBLAS %s kernels\n", isa.avx2_fma, isa.avx512,
                isa.avx512_bf16, name);
  if (rg_blas_core_for(name, isa)) fail_msg("refgeo runs OpenBLAS's %s kernels on a CPU with AVX2", name);
  free(name);

  /* the user's choice wins (a library built for one CPU has no other
   * kernels to choose, and ignores the variable) */
  if (strstr(openblas_get_config(), "DYNAMIC_ARCH")) {
    assert_int_equal(setenv("OPENBLAS_CORETYPE", "Core2", 1), 0);
    name = cli_blas_kernels();
    assert_string_equal(name, "Core2");
    free(name);
  }
  if (user_core) assert_int_equal(setenv("OPENBLAS_CORETYPE", user_core, 1), 0);
  else unsetenv("OPENBLAS_CORETYPE");
  free(user_core);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_choice_table),
      cmocka_unit_test(test_cli_runs_vector_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
