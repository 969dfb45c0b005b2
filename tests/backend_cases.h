/* backend_cases.h: the backends every backend test runs on (today the CPU
 * backend in both weight modes), shared by test_backend.c and
 * test_backend_grad.c. */
#ifndef RG_TEST_BACKEND_CASES_H
#define RG_TEST_BACKEND_CASES_H

#include "model/backend.h"
#include "testlib.h"

typedef struct {
  const char *name;
  rg_weight_mode mode;
} backend_case;
static const backend_case BACKENDS[] = {{"cpu/tiled", RG_WEIGHTS_TILED}, {"cpu/f32", RG_WEIGHTS_F32}};
enum { N_BACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

static inline rg_backend *new_backend(int i) {
  rg_backend_opts o = {.threads = 2, .weight_mode = BACKENDS[i].mode};
  rg_backend *be = rg_backend_cpu_new(&o);
  assert_non_null(be);
  return be;
}

/* A backend buffer holding v[n]. */
static inline rg_buf *upload(rg_backend *be, const float *v, size_t n) {
  rg_buf *b = rg_buf_new(be, n);
  assert_non_null(b);
  rg_buf_upload(be, b, 0, v, n);
  return b;
}

#endif
