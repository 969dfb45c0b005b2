/* cmd_islands: `refgeo islands --config RUN.ini [--KEY VALUE ...]
 * [--max-versions N] [--poll-s X] | --replay --config RUN.ini`
 *
 * The coordinator of an R2D2 run across islands (src/adv_ft/islands_coord.h;
 * docs/training.md, "Islands"): the config is the islands' own (their
 * [model] gives the trainable parameters the global state starts from,
 * their [islands] the sync directory, K, the quorum, deadline, outer SGD
 * and compression). Started on an empty sync directory it writes run.json
 * and version 0; started again (after a kill) it resumes from the newest
 * version (refusing a config whose outer step settings differ from those
 * run.json keeps). It runs until the run ends (every island has finished,
 * SYNC/done/, and nothing is pending; or run_updates inner updates are
 * merged), writing SYNC/final.json, or until --max-versions new versions. --replay recomputes
 * every version from the records and archived contributions and checks
 * them bit for bit against the kept ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/islands_coord.h"
#include "adv_ft/islands_quant.h"
#include "adv_ft/train_config.h"
#include "adv_ft/trainer.h"
#include "cli.h"
#include "cli_data.h"
#include "commands.h"
#include "util/clock.h"
#include "util/error.h"

static const char USAGE[] = "--config RUN.ini [--KEY VALUE ...] [--max-versions N] [--poll-s X] [--replay]";

static int usage(void) {
  printf("usage: refgeo islands %s\n\nexample: refgeo islands --config run.ini (the islands' config; each island: "
         "refgeo train --config run.ini --island I --out runs/island-I)\n",
         USAGE);
  printf("  --config VALUE\tthe islands' INI file (train's keys; [islands] sync_dir is required)\n");
  printf("  --max-versions N\tstop after this many new global versions (0: when the run ends)\n");
  printf("  --poll-s X\tseconds between looks at the sync directory (default 0.05)\n");
  printf("  --replay\trecompute every version from its record and archived contributions with the outer settings "
         "in run.json; compare bit for bit\n");
  printf("\nEvery key of refgeo train is also a flag here (--islands, --quorum, ...); its [model] and [islands] keys "
         "matter.\n");
  return 0;
}

static bool is_flag(const char *a, const char *name) { return strncmp(a, "--", 2) == 0 && strcmp(a + 2, name) == 0; }

static int number(const char *flag, const char *v, double lo, double *out) {
  char *end;
  *out = strtod(v, &end);
  return end == v || *end || !(*out >= lo) ? rg_error_set("%s: \"%s\" is not a number >= %g", flag, v, lo) : 0;
}

int cmd_islands(int argc, char **argv) {
  const char *config_path = NULL;
  bool replay = false;
  double max_versions = 0, poll_s = 0.05;
  char *data_dir = cli_data_path("");
  rg_train_config cfg;
  int rc = data_dir && rg_train_config_init(&cfg, data_dir) == 0 ? 0 : -1;
  free(data_dir);
  if (rc < 0) return cli_fail();
  for (int i = 1; i < argc; i++)
    if (is_flag(argv[i], "help")) {
      rg_train_config_free(&cfg);
      return usage();
    } else if (is_flag(argv[i], "config") && i + 1 < argc) {
      config_path = argv[++i];
    }
  if (config_path) rc = rg_train_config_read(&cfg, config_path);
  for (int i = 1; rc == 0 && i < argc; i++) {
    if (cli_verbosity_flag(argv[i])) continue;
    if (is_flag(argv[i], "replay")) {
      replay = true;
      continue;
    }
    if (strncmp(argv[i], "--", 2) != 0) {
      rc = rg_error_set("unexpected argument \"%s\" (usage: refgeo islands %s)", argv[i], USAGE);
      break;
    }
    if (i + 1 >= argc) {
      rc = rg_error_set("%s: missing value", argv[i]);
      break;
    }
    const char *v = argv[++i];
    if (is_flag(argv[i - 1], "config")) continue;
    if (is_flag(argv[i - 1], "max-versions")) rc = number("--max-versions", v, 0, &max_versions);
    else if (is_flag(argv[i - 1], "poll-s")) rc = number("--poll-s", v, 0.001, &poll_s);
    else {
      const int set = rg_train_config_set(&cfg, argv[i - 1] + 2, v);
      if (set == 1) rc = rg_error_set("unknown flag '%s' (see refgeo islands --help)", argv[i - 1]);
      else if (set < 0) rc = -1;
    }
  }
  if (rc == 0 && !config_path) rc = rg_error_set("--config RUN.ini is required (usage: refgeo islands %s)", USAGE);
  if (rc == 0) rc = rg_train_config_check(&cfg);
  if (rc == 0 && !cfg.sync_dir[0]) rc = rg_error_set("%s: sync_dir ([islands]) is empty: no islands to coordinate", config_path);
  rg_isl_coord_opts o = {.islands = cfg.islands,
                         .quorum = cfg.quorum ? cfg.quorum : (cfg.islands + 1) / 2,
                         .deadline_s = cfg.deadline_s,
                         .outer = {.lr = cfg.outer_lr, .momentum = cfg.outer_momentum, .nesterov = cfg.nesterov != 0},
                         .encoding = rc == 0 ? rg_quant_parse(cfg.compression) : 0,
                         .block = cfg.block_size,
                         .max_staleness = cfg.max_staleness,
                         .inner_steps = cfg.inner_steps,
                         .run_updates = cfg.run_updates};
  if (rc == 0 && replay) {
    long checked = 0;
    rc = rg_isl_replay(cfg.sync_dir, &o, &checked);
    if (rc == 0) printf("replay: %ld versions compared bit for bit with %s: the same\n", checked, cfg.sync_dir);
    rg_train_config_free(&cfg);
    return rc == 0 ? 0 : cli_fail();
  }
  rg_isl_run init = {.islands = cfg.islands};
  float *theta0 = NULL;
  if (rc == 0) rc = rg_trainer_initial_params(&cfg, init.shape, &init.n, &theta0);
  if (rc == 0) init.run_id = rg_isl_new_run_id();
  rg_isl_coord *c = rc == 0 ? rg_isl_coord_open(cfg.sync_dir, &o, &init, theta0) : NULL;
  free(theta0);
  if (c) {
    fprintf(stderr, "islands: %s at version %ld, %d islands, quorum %d, deadline %.0f s, %s\n", cfg.sync_dir,
            rg_isl_coord_version(c), o.islands, o.quorum, o.deadline_s, cfg.compression);
    rc = rg_isl_coord_run(c, poll_s, (long)max_versions, cli_log());
    long final_v;
    long long merged = 0;
    if (rc == 0 && rg_isl_final_read(cfg.sync_dir, &final_v, &merged) == 1)
      fprintf(stderr, "islands: the run ended at version %ld, %lld inner updates merged\n", final_v, merged);
    else if (rc == 0)
      fprintf(stderr, "islands: stopped at version %ld (--max-versions)\n", rg_isl_coord_version(c));
  }
  rg_isl_coord_free(c);
  rg_train_config_free(&cfg);
  return c && rc == 0 ? 0 : cli_fail();
}
