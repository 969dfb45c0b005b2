/* backend_cases.h: the backends every backend test runs on, shared by
 * test_backend.c and test_backend_grad.c. By default the CPU backend with
 * weights in both forms; with REFGEO_TEST_BACKEND=NAME (CTest's
 * test_backend_cuda, ..._hip: tests/CMakeLists.txt) the GPU backend NAME
 * in both forms instead. The program exits 77 (CTest: skipped) saying why
 * when there is no GPU to start it on (no device, or no GPU build), and
 * fails when a GPU is there but the backend does not start. */
#ifndef RG_TEST_BACKEND_CASES_H
#define RG_TEST_BACKEND_CASES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testlib.h"
#include "util/error.h"

typedef struct {
  const char *name, *backend;
  rg_weight_form form;
  /* Error allowed where a product reads a weight in this form, relative to
   * the largest reference value (0: the test's own tolerance). A GPU keeps
   * a bf16 file's matrices in bf16, and cuBLAS then rounds the activations
   * to bf16 too: each product term is off by up to 2^-8 of itself, and the
   * sums of the tests' random terms by about 2^-9 of the largest value; 2e-2
   * allows 10x that, while a wrong index or a missing term is off by O(1). */
  double weight_tol;
} backend_case;

enum { MAX_BACKENDS = 2 };
static backend_case BACKENDS[MAX_BACKENDS];
static int N_BACKENDS;
static char backend_names[MAX_BACKENDS][64];

/* Fills BACKENDS (call first in main). */
static inline void select_backends(void) {
  const char *gpu = getenv("REFGEO_TEST_BACKEND");
  if (!gpu || !*gpu) {
    BACKENDS[0] = (backend_case){"cpu/tiled", "cpu", RG_FORM_FILE, 0};
    BACKENDS[1] = (backend_case){"cpu/f32", "cpu", RG_FORM_F32, 0};
    N_BACKENDS = 2;
    return;
  }
  rg_backend_opts o = {.name = gpu};
  rg_backend *be = rg_backend_new(&o);
  if (!be) {
    /* skipped only where there is no GPU to run on; a GPU whose backend
     * does not start (no cuBLAS, a bad build) is a failure */
    const bool absent = rg_gpu_device_count() == 0;
    printf("%s: backend %s: %s\n", absent ? "SKIPPED" : "FAILED", gpu, rg_error_get());
    exit(absent ? 77 : 1);
  }
  rg_backend_free(be);
  snprintf(backend_names[0], sizeof backend_names[0], "%s/file", gpu);
  snprintf(backend_names[1], sizeof backend_names[1], "%s/f32", gpu);
  BACKENDS[0] = (backend_case){backend_names[0], gpu, RG_FORM_FILE, 2e-2};
  BACKENDS[1] = (backend_case){backend_names[1], gpu, RG_FORM_F32, 0};
  N_BACKENDS = 2;
}

/* The tolerance of a product through case I's weights, TOL being the test's. */
static inline double weight_tol(int i, double tol) { return BACKENDS[i].weight_tol > tol ? BACKENDS[i].weight_tol : tol; }

static inline bool on_cpu(void) { return strcmp(BACKENDS[0].backend, "cpu") == 0; }

static inline rg_backend *new_backend(int i) {
  rg_backend_opts o = {.name = BACKENDS[i].backend, .threads = 2};
  rg_backend *be = rg_backend_new(&o);
  assert_non_null(be);
  return be;
}

/* Tensor T prepared in backend case I's weight form. */
static inline rg_bweight *case_weight(rg_backend *be, int i, const rg_tensor *t) {
  return rg_backend_weight(be, t, BACKENDS[i].form);
}

/* A backend buffer holding v[n]. */
static inline rg_buf *upload(rg_backend *be, const float *v, size_t n) {
  rg_buf *b = rg_buf_new(be, n);
  assert_non_null(b);
  rg_buf_upload(be, b, 0, v, n);
  return b;
}

/* A batch's metadata on the backend (ids may be NULL). */
static inline rg_batch *upload_batch(rg_backend *be, const int32_t *ids, const int *seq, const int *pos, int n) {
  rg_batch *b = rg_batch_new(be, n);
  assert_non_null(b);
  rg_batch_set(be, b, ids, seq, pos, n);
  return b;
}

#endif
