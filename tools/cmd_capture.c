/* cmd_capture: `refgeo capture (--model PATH | --run-dir DIR [--base PATH] |
 * --manifest CSV [--base PATH]) --out FILE.h5 [--harmful-train P]
 * [--harmless-train P] [--harmful-val P] [--harmless-val P] [--n-train N]
 * [--n-val N] [--seed N] [--sites LIST] [--chat-template NAME] [--float16]
 * [--batch N] [--threads N]` captures eoi activations of every checkpoint
 * (capture/capture.h). Prompt files default to prompts/<split>.json in
 * refgeo's data folder (cli_data.h), so they are found from any directory;
 * any format rg_prompts_load reads works.
 * Progress and tokens/s per checkpoint go to stderr. Rerunning resumes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "cli.h"
#include "cli_data.h"
#include "commands.h"
#include "util/error.h"

enum { N_SPLITS = 4 };
static const char *const SPLIT_NAMES[N_SPLITS] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};
static const char *const SPLIT_FLAGS[N_SPLITS] = {"--harmful-train", "--harmless-train", "--harmful-val",
                                                  "--harmless-val"};

int cmd_capture(int argc, char **argv) {
  const char *model = NULL, *run_dir = NULL, *manifest = NULL, *base = NULL, *out = NULL;
  const char *files[N_SPLITS] = {0}, *sites_flag = "resid_pre";
  int n_train = -1, n_val = -1, seed = 0;
  rg_capture_opts o = {.log = stderr};
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "one model (GGUF file or HF directory), captured as step 0"},
      {"run-dir", CLI_STRING, &run_dir, "fine-tuning run directory with checkpoint-<step> subdirectories"},
      {"manifest", CLI_STRING, &manifest, "CSV with header step,path"},
      {"base", CLI_STRING, &base, "base model (step 0) for --run-dir / --manifest"},
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
  };
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(--model PATH | --run-dir DIR | --manifest CSV) --out FILE.h5 [flags]", NULL, 0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (!out) {
    rg_error_set("--out: missing (give the output .h5 file)");
    return cli_fail();
  }
  if (o.batch < 0) {
    rg_error_set("--batch: %d is negative", o.batch);
    return cli_fail();
  }
  if (rg_capture_parse_sites("--sites", sites_flag, &o.sites) < 0) return cli_fail();

  int status = 1;
  rg_prompt_set *sets[N_SPLITS] = {0};
  rg_capture_split splits[N_SPLITS];
  rg_checkpoint_series *series = rg_checkpoints_from_flags("capture", model, run_dir, manifest, base);
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
  status = 0;
end:
  if (status) cli_fail();
  for (int i = 0; i < N_SPLITS; i++) rg_prompts_free(sets[i]);
  rg_checkpoints_free(series);
  return status;
}
