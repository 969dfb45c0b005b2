/* bench_state_save: seconds to save and to load a training state
 * (adv_ft/train_state.h) of a model's full parameters: what the run
 * directory's checksums add to it (bench/integrity_cost.sh).
 *
 *   bench_state_save --model PATH --out DIR [--repeats R] [--threads N]
 *
 * Saves state 1..R into DIR (each save retires the one before, as in a
 * run), then loads state R back (resume's read and check). Prints each
 * save's wall and CPU seconds (this process, all threads) and the load's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "adv_ft/optimizer.h"
#include "adv_ft/train_state.h"
#include "bench_util.h"
#include "cli.h"
#include "engine/backward.h"
#include "model/model.h"
#include "util/error.h"

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  cli_runtime_env(argv);
  const char *model = NULL, *out = NULL;
  int repeats = 3, threads = 2;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"out", CLI_STRING, &out, "run directory to write state/ into"},
      {"repeats", CLI_INT, &repeats, "saves (3)"},
      {"threads", CLI_INT, &threads, "threads (2)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH --out DIR [flags]", pos, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (!model || !out || repeats < 1) {
    rg_error_set("bench_state_save: need --model, --out and --repeats >= 1");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  rg_backend_opts bo = {.threads = threads};
  rg_session_opts so = {.max_batch_tokens = 16, .max_logit_rows = 16, .train = true};
  rg_weights *w = m ? rg_weights_open(m, &bo, RG_WEIGHTS_AUTO) : NULL;
  if (w && rg_weights_make_trainable(w) < 0) rg_weights_free(w), w = NULL;
  rg_session *s = w ? rg_session_new(w, 1, 16, &so) : NULL;
  rg_grads *g = s ? rg_grads_new(s) : NULL;
  rg_adamw_hparams h = rg_adamw_defaults();
  rg_optimizer *o = g ? rg_optimizer_new(w, g, &h) : NULL;
  cJSON *meta = cJSON_CreateObject();
  int status = 1;
  if (!o || !meta) {
    cli_fail();
    goto end;
  }
  for (int r = 1; r <= repeats; r++) {
    cJSON_DeleteItemFromObject(meta, "step");
    cJSON_AddNumberToObject(meta, "step", r);
    const double t0 = bench_now_s(), c0 = cpu_s();
    if (rg_train_state_save(out, r, w, o, meta) < 0) {
      cli_fail();
      goto end;
    }
    printf("save %d: %.3f s wall, %.3f s CPU\n", r, bench_now_s() - t0, cpu_s() - c0);
  }
  cJSON *back = NULL;
  const double t0 = bench_now_s(), c0 = cpu_s();
  if (rg_train_state_load(out, repeats, w, o, &back) < 0) {
    cli_fail();
    goto end;
  }
  printf("load %d: %.3f s wall, %.3f s CPU\n", repeats, bench_now_s() - t0, cpu_s() - c0);
  cJSON_Delete(back);
  status = 0;
end:
  cJSON_Delete(meta);
  rg_optimizer_free(o);
  rg_grads_free(g);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  return status;
}
