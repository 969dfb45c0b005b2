/* test_adamw.c: the AdamW recipe (src/adv_ft/adamw.c and the CPU backend's
 * rg_op_adamw) against torch.optim.AdamW,
 * torch.nn.utils.clip_grad_norm_ and transformers'
 * get_cosine_schedule_with_warmup (tests/fixtures/adamw/adamw.json from
 * tools/reference/make_adamw_fixtures.py, float64).
 *
 * Six steps on two tensors with weight decay, warmup (a step at lr 0),
 * clipping on some steps and not on others. Tolerances: the schedule and the
 * norm are float64 formulas (1e-12 relative); the parameters are float32,
 * so they are compared through their total change since the start, which is
 * a few lr (~1e-2): errors must stay below 1e-4 of it, while a wrong bias
 * correction, decay or clipping moves it by 10% and more.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "adv_ft/adamw.h"
#include "backend/backend.h"
#include "testlib.h"

static double *darr(const cJSON *a, int *n) {
  *n = cJSON_GetArraySize(a);
  double *v = malloc((size_t)*n * sizeof *v);
  for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(a, i)->valuedouble;
  return v;
}

static void test_against_torch(void **state) {
  cJSON *fx = t_read_json_fixture("adamw/adamw.json");
  const double base_lr = cJSON_GetObjectItem(fx, "base_lr")->valuedouble;
  const long warmup = cJSON_GetObjectItem(fx, "warmup")->valueint, total = cJSON_GetObjectItem(fx, "total")->valueint;
  const double max_norm = cJSON_GetObjectItem(fx, "max_norm")->valuedouble;
  rg_adamw_hparams h = rg_adamw_defaults();
  h.weight_decay = cJSON_GetObjectItem(fx, "weight_decay")->valuedouble;

  const cJSON *init = cJSON_GetObjectItem(fx, "init");
  enum { NT = 2 };
  int sizes_i[NT];
  size_t sizes[NT];
  double *p0[NT];
  float *p[NT];
  /* each parameter a writable f32 weight on the CPU backend, with its
   * gradient and moment buffers */
  rg_backend_opts bo = {.threads = 2};
  rg_backend *be = rg_backend_new(&bo);
  assert_non_null(be);
  rg_tensor tensors[NT];
  rg_bweight *param[NT];
  rg_buf *gb[NT], *mb[NT], *vb[NT];
  for (int i = 0; i < NT; i++) {
    p0[i] = darr(cJSON_GetArrayItem(init, i), &sizes_i[i]);
    sizes[i] = (size_t)sizes_i[i];
    p[i] = malloc(sizes[i] * sizeof *p[i]);
    for (size_t k = 0; k < sizes[i]; k++) p[i][k] = (float)p0[i][k];
    tensors[i] = (rg_tensor){.name = "p", .type = RG_F32, .n_dims = 1, .ne = {sizes_i[i], 1, 1, 1},
                             .data = p[i], .nbytes = sizes[i] * sizeof(float)};
    param[i] = rg_backend_weight(be, &tensors[i], RG_FORM_F32);
    assert_non_null(param[i]);
    assert_int_equal(rg_bweight_make_f32(be, param[i]), 0);
    assert_non_null(gb[i] = rg_buf_new(be, sizes[i]));
    assert_non_null(mb[i] = rg_buf_new(be, sizes[i]));
    assert_non_null(vb[i] = rg_buf_new(be, sizes[i]));
  }

  const cJSON *steps = cJSON_GetObjectItem(fx, "steps");
  for (int t = 0; t < cJSON_GetArraySize(steps); t++) {
    const cJSON *st = cJSON_GetArrayItem(steps, t);
    const double lr = rg_lr_cosine(base_lr, t, warmup, total), want_lr = cJSON_GetObjectItem(st, "lr")->valuedouble;
    assert_true(fabs(lr - want_lr) <= 1e-12 * base_lr);
    float *g[NT];
    double ss = 0;
    for (int i = 0; i < NT; i++) {
      int n;
      double *gd = darr(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "grads"), i), &n);
      g[i] = malloc((size_t)n * sizeof *g[i]);
      for (int k = 0; k < n; k++) {
        g[i][k] = (float)gd[k];
        ss += gd[k] * gd[k];
      }
      free(gd);
    }
    const double norm = sqrt(ss), want_norm = cJSON_GetObjectItem(st, "total_norm")->valuedouble;
    assert_true(fabs(norm - want_norm) <= 1e-12 * want_norm);
    const float coef = (float)rg_grad_clip_coef(norm, max_norm);
    const rg_adamw_step as = {.lr = lr, .beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps,
                              .weight_decay = h.weight_decay, .step = t + 1, .grad_scale = coef};
    for (int i = 0; i < NT; i++) {
      rg_buf_upload(be, gb[i], 0, g[i], sizes[i]);
      rg_op_adamw(be, param[i], gb[i], mb[i], vb[i], &as);
      assert_int_equal(rg_bweight_download(be, param[i], p[i]), 0);
    }
    double md = 0, mc = 0;
    for (int i = 0; i < NT; i++) {
      int n;
      double *want = darr(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "params"), i), &n);
      for (int k = 0; k < n; k++) {
        md = fmax(md, fabs(p[i][k] - want[k]));
        mc = fmax(mc, fabs(want[k] - p0[i][k]));
      }
      free(want);
      free(g[i]);
    }
    print_message("step %d: lr %.5f, norm %.3f (coef %.3f), max param err %.2e of a change of %.2e\n", t + 1, lr, norm,
                  coef, md, mc);
    if (mc > 0) assert_true(md <= 1e-4 * mc);
  }
  for (int i = 0; i < NT; i++) {
    rg_bweight_free(be, param[i]);
    rg_buf_free(be, gb[i]), rg_buf_free(be, mb[i]), rg_buf_free(be, vb[i]);
    free(p0[i]), free(p[i]);
  }
  rg_backend_free(be);
  cJSON_Delete(fx);
}

/* The schedule's edges, from transformers' formula by hand. */
static void test_cosine_edges(void **state) {
  assert_true(rg_lr_cosine(2e-5, 0, 0, 100) == 2e-5);             /* no warmup: starts at the base */
  assert_true(fabs(rg_lr_cosine(2e-5, 50, 0, 100) - 1e-5) < 1e-18); /* half way: half */
  assert_true(rg_lr_cosine(2e-5, 100, 0, 100) < 1e-20);            /* the end: zero */
  assert_true(rg_lr_cosine(2e-5, 150, 0, 100) >= 0);               /* past it: clamped at zero */
  assert_true(rg_grad_clip_coef(0.5, 1.0) == 1.0);                 /* below the limit: untouched */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_torch),
      cmocka_unit_test(test_cosine_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
