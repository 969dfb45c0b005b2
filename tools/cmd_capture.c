/* cmd_capture: `refgeo capture (MODEL | --model PATH | --run-dir DIR
 * [--base PATH] | --manifest CSV [--base PATH]) --out FILE.h5
 * [--harmful-train P] [--harmless-train P] [--harmful-val P]
 * [--harmless-val P] [--n-train N] [--n-val N] [--seed N] [--sites LIST]
 * [--chat-template NAME] [--float16] [--batch N] [--threads N] [--json]`
 * captures eoi activations of every checkpoint (capture/capture.h) into the
 * file --out (resumed when it exists). Prompt files default to
 * prompts/<split>.json in refgeo's data folder (cli_data.h), so they are
 * found from any directory; any format rg_prompts_load reads works.
 * Progress and tokens/s per checkpoint go to stderr; --json prints a summary
 * of the run ({"out", "steps", "prompts", "sites", "float16"}) on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "cli.h"
#include "cli_data.h"
#include "cli_series.h"
#include "commands.h"
#include "util/error.h"

enum { N_SPLITS = 4, DEFAULT_BATCH = 16 };
static const char *const SPLIT_NAMES[N_SPLITS] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};
static const char *const SPLIT_FLAGS[N_SPLITS] = {"--harmful-train", "--harmless-train", "--harmful-val",
                                                  "--harmless-val"};

static int print_summary(const char *out, const rg_checkpoint_series *series, const rg_capture_split *splits,
                         const char *sites, bool float16) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "out", out);
  cJSON *steps = cJSON_AddArrayToObject(o, "steps");
  for (int i = 0; i < series->n; i++) cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)series->items[i].step));
  cJSON *prompts = cJSON_AddObjectToObject(o, "prompts");
  for (int i = 0; i < N_SPLITS; i++) cJSON_AddNumberToObject(prompts, splits[i].name, splits[i].prompts->n);
  cJSON_AddStringToObject(o, "sites", sites);
  cJSON_AddBoolToObject(o, "float16", float16);
  return cli_print_json(o);
}

int cmd_capture(int argc, char **argv) {
  cli_series cs = {0};
  const char *out = NULL, *files[N_SPLITS] = {0}, *sites_flag = "resid_pre";
  int n_train = -1, n_val = -1, seed = 0;
  bool json = false;
  rg_capture_opts o = {.log = cli_log(), .batch = DEFAULT_BATCH};
  const cli_opt opts[] = {
      CLI_SERIES_OPTS(&cs),
      {"out", CLI_STRING, &out, "output HDF5 file (resumed if it exists)"},
      {"harmful-train", CLI_STRING, &files[0], "prompts (data/prompts/harmful_train.json)"},
      {"harmless-train", CLI_STRING, &files[1], "prompts (data/prompts/harmless_train.json)"},
      {"harmful-val", CLI_STRING, &files[2], "prompts (data/prompts/harmful_val.json)"},
      {"harmless-val", CLI_STRING, &files[3], "prompts (data/prompts/harmless_val.json)"},
      {"n-train", CLI_INT, &n_train, "keep a seeded random subset of N prompts per train split (all)"},
      {"n-val", CLI_INT, &n_val, "keep a seeded random subset of N prompts per val split (all)"},
      {"seed", CLI_INT, &seed, "subset seed (0)"},
      {"sites", CLI_STRING, &sites_flag, "comma-separated hook sites (resid_pre)"},
      {"chat-template", CLI_STRING, &o.chat_template, "chat format name (detected from the model)"},
      {"float16", CLI_BOOL, &o.float16, "store activations as float16"},
      {"batch", CLI_INT, &o.batch, "prompts per prefill (16)"},
      {"threads", CLI_INT, &o.threads, "CPU threads (all)"},
      {"json", CLI_BOOL, &json, "print a summary of the run as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), CLI_SERIES_USAGE " --out FILE.h5 [flags]\n\nexample: refgeo capture --run-dir runs/demo --n-train 32 --n-val 16 --out runs/demo/acts.h5",
                     pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&cs.model, pos, &n_pos) < 0) return cli_fail();
  if (!out) {
    rg_error_set("--out: missing (give the output .h5 file)");
    return cli_fail();
  }
  if (cli_require_positive("batch", o.batch) < 0) return cli_fail();
  if (rg_capture_parse_sites("--sites", sites_flag, &o.sites) < 0) return cli_fail();

  int status = 1;
  rg_prompt_set *sets[N_SPLITS] = {0};
  rg_capture_split splits[N_SPLITS];
  rg_checkpoint_series *series = cli_series_open(&cs);
  if (!series) goto end;
  for (int i = 0; i < N_SPLITS; i++) {
    char name[64];
    snprintf(name, sizeof name, "prompts/%s.json", SPLIT_NAMES[i]);
    char *def = files[i] ? NULL : cli_data_path(name);
    if (!files[i] && !def) goto end;
    sets[i] = rg_prompts_load(files[i] ? files[i] : def);
    free(def);
    if (!sets[i]) {
      if (!files[i]) rg_error_prefix("%s (default)", SPLIT_FLAGS[i]);
      goto end;
    }
    int keep = i < 2 ? n_train : n_val;
    if (keep >= 0 && rg_prompts_subsample(sets[i], keep, (uint64_t)seed) < 0) goto end;
    splits[i] = (rg_capture_split){SPLIT_NAMES[i], sets[i]};
  }
  o.splits = splits;
  o.n_splits = N_SPLITS;
  if (rg_capture_series(series, out, &o) < 0) goto end;
  if (json && print_summary(out, series, splits, sites_flag, o.float16) < 0) goto end;
  status = 0;
end:
  if (status) cli_fail();
  for (int i = 0; i < N_SPLITS; i++) rg_prompts_free(sets[i]);
  rg_checkpoints_free(series);
  return status;
}
