/* backend_cases.h: the backends every backend test runs on (today the CPU
 * backend with weights in both forms), shared by test_backend.c and
 * test_backend_grad.c. */
#ifndef RG_TEST_BACKEND_CASES_H
#define RG_TEST_BACKEND_CASES_H

#include "model/backend.h"
#include "testlib.h"

typedef struct {
  const char *name, *backend;
  rg_weight_form form;
} backend_case;
static const backend_case BACKENDS[] = {{"cpu/tiled", "cpu", RG_FORM_FILE}, {"cpu/f32", "cpu", RG_FORM_F32}};
enum { N_BACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

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
