/* cmd_train: `refgeo train --config RUN.ini --out RUN_DIR [--resume]
 * [--KEY VALUE ...]`
 *
 * R2D2 adversarial fine-tuning (src/adv_ft/trainer.h) configured by an INI
 * file (src/adv_ft/train_config.h; docs/training.md lists every key), any
 * key overridden by a flag of its name ('-' or '_' alike). Without
 * --config the defaults apply and --model is required. Writes RUN_DIR as
 * trainer.h describes; --resume continues a killed run from its newest
 * state, refusing a RUN_DIR of another configuration. One progress line per
 * update goes to stderr. With an [islands] section (sync_dir) the run is
 * one island of a run that `refgeo islands` coordinates (cmd_islands.c).
 *
 * `refgeo train --plan --config RUN.ini [--device cpu|gpu:NG] [--ranks N] [--json]`
 * prints the run's memory plan instead (src/adv_ft/train_plan.h): the
 * bytes the trainer's allocation steps ask for on a counting backend, and
 * whether they fit the device (cpu: this machine's RAM, the default; gpu:NG:
 * N GiB), per rank of --ranks N (mpirun -np N: ZeRO shards over its
 * data-parallel groups), and a closing note with zero 0, 1, 2 and LoRA on
 * one rank. Nothing is written; --out is not needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/train_config.h"
#include "adv_ft/trainer.h"
#include "cli.h"
#include "cli_data.h"
#include "commands.h"
#include "backend/backend.h"
#include "util/error.h"

static const char USAGE[] =
    "--config RUN.ini --out RUN_DIR [--resume] [--KEY VALUE ...] | --plan --config RUN.ini [--device cpu|gpu:NG] "
    "[--ranks N] [--json]";

/* The flags in cli.c's usage format ("  --NAME KIND\tHELP"), every config
 * key as --its-name. */
static int usage(void) {
  printf("usage: refgeo train %s\n\nexample: refgeo train --config data/r2d2-smollm2.ini --out runs/smollm2-r2d2 "
         "--updates 20\n",
         USAGE);
  printf("  --config VALUE\tthe run's INI file\n  --out VALUE\tthe run directory\n");
  printf("  --resume\tcontinue the run in --out from its newest state\n");
  printf("  --plan\tprint the run's memory plan and whether it fits --device; train nothing\n");
  printf("  --device VALUE\tthe device to train on (cpu, the default; cuda[:N], hip[:N] in a GPU build); with --plan:\n"
         "\t\tcpu (this machine's RAM) or gpu:NG (a GPU of N GiB)\n");
  printf("  --ranks N\twith --plan: the ranks mpirun starts (-np), sp per group; ZeRO shards over the groups\n");
  printf("  --json\twith --plan: the plan as one JSON object\n");
  const char *section, *help, *kind, *name;
  for (int i = 0; (name = rg_train_config_key(i, &section, &help, NULL, &kind)) != NULL; i++) {
    printf("  --");
    for (const char *c = name; *c; c++) putchar(*c == '_' ? '-' : *c);
    printf(" %s\t[%s] %s\n", kind, section, help);
  }
  return 0;
}

/* Which of argv's "--NAME VALUE" pairs set config keys: those are applied
 * after the file. */
static bool is_flag(const char *a, const char *name) { return strncmp(a, "--", 2) == 0 && strcmp(a + 2, name) == 0; }

/* Flags of this command that take a value and are not config keys. */
static bool is_own_value_flag(const char *a) {
  return is_flag(a, "config") || is_flag(a, "out") || is_flag(a, "device") || is_flag(a, "ranks");
}
static bool is_own_switch(const char *a) {
  return is_flag(a, "resume") || is_flag(a, "plan") || is_flag(a, "json") || is_flag(a, "quiet") || is_flag(a, "verbose");
}

static int plan(rg_train_config *cfg, const char *device, int ranks, bool json) {
  rg_train_plan p = {0};
  char note[256], compare[2048] = "";
  if (rg_train_plan_device(&p, device) < 0) return -1;
  p.ranks = ranks;
  if (!json) rg_trainer_plan_compare(cfg, &p, compare, sizeof compare);
  if (rg_trainer_plan(cfg, &p, note, sizeof note) < 0) return -1;
  if (note[0] && !json) printf("%s\n", note);
  rg_train_plan_print(&p, stdout, json);
  if (!json) printf("%s", compare);
  return 0;
}

/* Whether FLAG (without "--") names a config key; '-' stands for '_'. */
static bool is_config_key(const char *flag) {
  const char *key;
  for (int k = 0; (key = rg_train_config_key(k, NULL, NULL, NULL, NULL)); k++) {
    size_t i = 0;
    while (key[i] && (flag[i] == key[i] || (flag[i] == '-' && key[i] == '_'))) i++;
    if (!key[i] && !flag[i]) return true;
  }
  return false;
}

int cmd_train(int argc, char **argv) {
  const char *config_path = NULL, *out = NULL, *device = NULL;
  bool resume = false, want_plan = false, json = false;
  int ranks = 0;
  for (int i = 1; i < argc; i++) {
    if (is_flag(argv[i], "help")) return usage();
    if (cli_verbosity_flag(argv[i])) continue;
    if (is_flag(argv[i], "resume")) resume = true;
    if (is_flag(argv[i], "plan")) want_plan = true;
    if (is_flag(argv[i], "json")) json = true;
    if (is_own_value_flag(argv[i])) {
      if (i + 1 >= argc) {
        rg_error_set("%s: missing value", argv[i]);
        return cli_fail();
      }
      if (is_flag(argv[i], "ranks")) {
        char *end;
        const long n = strtol(argv[i + 1], &end, 10);
        if (*end || end == argv[i + 1] || n < 1 || n > 65536) {
          rg_error_set("--ranks: \"%s\" is not a number of ranks from 1 to 65536", argv[i + 1]);
          return cli_fail();
        }
        ranks = (int)n;
      } else {
        *(is_flag(argv[i], "config") ? &config_path : is_flag(argv[i], "out") ? &out : &device) = argv[i + 1];
      }
      i++;
    }
  }
  if (json && !want_plan) {
    rg_error_set("--json goes with --plan (usage: refgeo train %s)", USAGE);
    return cli_fail();
  }
  /* training: --device picks the backend, as in every command */
  if (device && !want_plan && (rg_backend_check_device(device) < 0 || cli_set_device(device) < 0)) {
    rg_error_prefix("--device (to plan for gpu:NG, add --plan)");
    return cli_fail();
  }
  if (want_plan && (out || resume)) {
    rg_error_set("--plan writes nothing: drop --out and --resume (usage: refgeo train %s)", USAGE);
    return cli_fail();
  }
  char *data_dir = cli_data_path("");
  rg_train_config cfg;
  int rc = data_dir && rg_train_config_init(&cfg, data_dir) == 0 ? 0 : -1;
  free(data_dir);
  if (rc < 0) return cli_fail();
  if (config_path) rc = rg_train_config_read(&cfg, config_path);
  /* the flags, over the file */
  for (int i = 1; rc == 0 && i < argc; i++) {
    if (is_own_switch(argv[i])) continue;
    if (is_own_value_flag(argv[i])) {
      i++;
      continue;
    }
    if (strncmp(argv[i], "--", 2) != 0) {
      rc = rg_error_set("unexpected argument \"%s\" (usage: refgeo train %s)", argv[i], USAGE);
      break;
    }
    if (!is_config_key(argv[i] + 2)) {
      rc = rg_error_set("unknown flag '%s' (see refgeo train --help)", argv[i]);
      break;
    }
    if (i + 1 >= argc) {
      rc = rg_error_set("%s: missing value", argv[i]);
      break;
    }
    if (rg_train_config_set(&cfg, argv[i] + 2, argv[i + 1]) != 0) rc = -1; /* the error names the key */
    i++;
  }
  if (rc == 0 && !out && !want_plan) rc = rg_error_set("--out RUN_DIR is required (usage: refgeo train %s)", USAGE);
  if (rc == 0) rc = rg_train_config_check(&cfg);
  if (rc == 0 && cli_check_only()) { /* `refgeo run` checking the [train] keys */
    rg_train_config_free(&cfg);
    return 0;
  }
  if (rc == 0 && ranks && !want_plan) rc = rg_error_set("--ranks goes with --plan (a run takes its ranks from mpirun)");
  if (rc == 0 && want_plan) rc = plan(&cfg, device ? device : "cpu", ranks, json);
  if (want_plan) {
    rg_train_config_free(&cfg);
    return rc == 0 ? 0 : cli_fail();
  }
  rg_trainer *t = rc == 0 ? rg_trainer_open(&cfg, out, resume) : NULL;
  if (!t) {
    rg_train_config_free(&cfg);
    return cli_fail();
  }
  rc = rg_trainer_run(t, cli_log());
  if (rc == 0) fprintf(stderr, "train: %ld updates in %s\n", rg_trainer_step(t), out);
  rg_trainer_free(t);
  return rc == 0 ? 0 : cli_fail();
}
