/* cli_series.h: the checkpoint-series flags shared by `refgeo capture`,
 * `geometry` and `asr`, declared once with one help text, and the series
 * they name (model/checkpoints.h). */
#ifndef RG_CLI_SERIES_H
#define RG_CLI_SERIES_H

#include "cli.h"
#include "model/checkpoints.h"

typedef struct {
  const char *model;    /* one model, step 0 (also given as the positional MODEL) */
  const char *run_dir;  /* a Trainer run directory of checkpoint-<step>/ */
  const char *manifest; /* a step,path CSV */
  const char *base;     /* the step-0 model of run_dir / manifest */
} cli_series;

/* The four cli_opt entries that fill a cli_series S, for a command's option
 * table: CLI_SERIES_OPTS(&s), ... */
#define CLI_SERIES_OPTS(S)                                                                                    \
  {"model", CLI_STRING, &(S)->model, "one model (GGUF file or HF directory) as step 0; also MODEL positionally"}, \
      {"run-dir", CLI_STRING, &(S)->run_dir, "fine-tuning run directory with checkpoint-<step>/ subdirectories"},  \
      {"manifest", CLI_STRING, &(S)->manifest, "checkpoint manifest CSV with header step,path"},                  \
      {"base", CLI_STRING, &(S)->base, "the step-0 model of --run-dir / --manifest"}

/* The usage words for these flags. */
#define CLI_SERIES_USAGE "(MODEL | --model PATH | --run-dir DIR [--base PATH] | --manifest CSV [--base PATH])"

/* The series S names: exactly one of --model, --run-dir, --manifest; --base
 * only with the latter two. NULL with the error set. */
rg_checkpoint_series *cli_series_open(const cli_series *s);

#endif
