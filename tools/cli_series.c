/* cli_series.c: the flag rules of cli_series.h; the series itself is
 * model/checkpoints.c's. */
#include "cli_series.h"

#include "util/error.h"

rg_checkpoint_series *cli_series_open(const cli_series *s) {
  if (!!s->model + !!s->run_dir + !!s->manifest != 1) {
    rg_error_set("give exactly one of --model, --run-dir, --manifest (or MODEL for --model)");
    return NULL;
  }
  if (s->model && s->base) {
    rg_error_set("--base: only with --run-dir or --manifest");
    return NULL;
  }
  if (s->model) return rg_checkpoints_single(s->model);
  return s->run_dir ? rg_checkpoints_from_run_dir(s->run_dir, s->base)
                    : rg_checkpoints_from_manifest(s->manifest, s->base);
}
