/* cmd_geometry: `refgeo geometry --acts FILE.h5 (MODEL | --model PATH |
 * --run-dir DIR [--base PATH] | --manifest CSV [--base PATH]) --out DIR
 * [--plan-file INI] [plan flags] [--start-over] [--refusal-substrings FILE]
 * [--threads N] [--json]`
 * computes refusal directions, their drift, AUROC and spectra, scores and
 * selects the carriers of every checkpoint and decides whether the carrier
 * migrates (geometry/pipeline.h, docs/geometry-verdict.md). It writes into
 * --out the plan (plan.ini, plan.sha256), geometry.csv, carriers.csv,
 * migration.csv, sensitivity.csv, pareto.csv, prompt_scores.csv, probes.csv,
 * transfer.csv (docs/csv-formats.md), directions.h5, verdict.json and verdict.txt.
 * --json prints {"acts", "out", "steps", "files"} on stdout.
 * The plan (verdict_plan.h) starts from its defaults, takes an INI file's
 * [verdict] section (--plan-file), then the flags below; a directory scored
 * under another plan is refused unless --start-over.
 * --layer-frac F keeps candidates with layer < floor(F * L) (RD: 0.8).
 * --layers A:B restricts the scored candidates to layers A..B-1 (speed; the
 * geometry rows still cover every layer). Progress goes to stderr. */
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_data.h"
#include "cli_series.h"
#include "commands.h"
#include "geometry/pipeline.h"
#include "util/fileio.h"
#include "util/error.h"

/* The plan's flags: each sets the plan key of the same name. Unset values
 * are NULL, NaN or INT_MIN. */
typedef struct {
  const char *flag, *key;
  cli_kind type;
  const char *help;
} plan_flag;

static const plan_flag PLAN_FLAGS[] = {
    {"refusal-score", "refusal_score", CLI_STRING,
     "tokens (first-token log-odds, refusal_direction's; the default) or sequence (log p(refusal string) - "
     "log p(compliance string))"},
    {"refusal-string", "refusal_string", CLI_STRING,
     "sequence: the refusal text, or auto (the run's toward target, else each checkpoint's most common refusal "
     "opening; the default)"},
    {"compliance-string", "compliance_string", CLI_STRING, "sequence: the compliance text (\"Sure, here's\")"},
    {"refusal-tokens", "refusal_tokens", CLI_STRING,
     "refusal score tokens: auto (fitted to each checkpoint's refusals), rd (the token of \"I\", the default) or "
     "ids A,B"},
    {"auto-coverage", "auto_coverage", CLI_FLOAT, "auto: share of refusals the tokens must open (0.9)"},
    {"reply-tokens", "reply_tokens", CLI_INT, "new tokens of the judged greedy replies (32)"},
    {"n-min", "n_min", CLI_INT, "prompts the filter must keep in every split, else the step is not scored (8)"},
    {"kl-max", "kl_max", CLI_FLOAT, "admissible if KL <= X, the KL budget (0.1)"},
    {"induce-rule", "induce_rule", CLI_STRING, "rd (induce >= --induce-min) or normalized (gap share >= --induce-frac-min)"},
    {"induce-min", "induce_min", CLI_FLOAT, "rd rule: admissible if induce >= X (0)"},
    {"induce-frac-min", "induce_frac_min", CLI_FLOAT, "normalized rule: admissible if the gap share >= X (0.5)"},
    {"early", "early", CLI_FLOAT, "band early if depth < F (0.3333)"},
    {"late", "late", CLI_FLOAT, "band late if depth >= F (0.6667)"},
    {"max-val", "max_val", CLI_INT, "score the first N kept val prompts per class (all)"},
    {"layers", "layers", CLI_STRING, "score candidates of layers A..B-1 only (all)"},
    {"null-size", "null_size", CLI_INT, "random unit directions of the null (16; 0: no null)"},
    {"bootstrap", "bootstrap", CLI_INT, "bootstrap resamples of the val prompts (1000; 0: none)"},
    {"score-auroc-min", "score_auroc_min", CLI_FLOAT, "call the refusal score valid at this AUROC or above (0.9)"},
    {"seed", "seed", CLI_INT, "seed of the null directions and the bootstrap (42)"},
};
enum { N_PLAN_FLAGS = (int)(sizeof PLAN_FLAGS / sizeof PLAN_FLAGS[0]) };

typedef struct {
  const char *s[N_PLAN_FLAGS];
  double d[N_PLAN_FLAGS];
  int i[N_PLAN_FLAGS];
} plan_values;

/* Flag I's value as the plan reads it, or NULL when it was not given. */
static const char *plan_value(const plan_values *v, int i, char *buf, size_t len) {
  switch (PLAN_FLAGS[i].type) {
    case CLI_FLOAT:
      if (isnan(v->d[i])) return NULL;
      snprintf(buf, len, "%.17g", v->d[i]);
      return buf;
    case CLI_INT:
      if (v->i[i] == INT_MIN) return NULL;
      snprintf(buf, len, "%d", v->i[i]);
      return buf;
    default:
      return v->s[i];
  }
}

static int print_summary(const char *acts, const char *out, const rg_checkpoint_series *s) {
  static const char *const FILES[] = {"plan.ini",          "plan.sha256", "geometry.csv",  "carriers.csv",
                                      "migration.csv",     "sensitivity.csv", "pareto.csv", "prompt_scores.csv",
                                      "probes.csv", "transfer.csv", "directions.h5", "verdict.json", "verdict.txt"};
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "acts", acts);
  cJSON_AddStringToObject(o, "out", out);
  cJSON *steps = cJSON_AddArrayToObject(o, "steps");
  for (int i = 0; i < s->n; i++) cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)s->items[i].step));
  cJSON *files = cJSON_AddArrayToObject(o, "files");
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) cJSON_AddItemToArray(files, cJSON_CreateString(FILES[i]));
  return cli_print_json(o);
}

/* The R2D2 toward target of RUN_DIR's training config (config.ini, which
 * the trainer writes with every key): [loss] refusal_target when w_toward
 * is not 0. */
typedef struct {
  char target[512];
  double w_toward;
} toward_keys;

static int toward_key(void *user, const char *section, const char *name, const char *value) {
  toward_keys *k = user;
  if (strcmp(section, "loss") != 0) return 1;
  if (strcmp(name, "refusal_target") == 0) snprintf(k->target, sizeof k->target, "%s", value);
  if (strcmp(name, "w_toward") == 0) k->w_toward = atof(value);
  return 1;
}

/* The run's toward target into K->target ("" when RUN_DIR has no training
 * config or trains without a toward loss). Returns 0 or -1 (unreadable). */
static int run_toward_target(const char *run_dir, toward_keys *k) {
  *k = (toward_keys){.w_toward = 1};
  if (!run_dir) return 0;
  char *path = rg_path_join(run_dir, "config.ini");
  int rc = 0;
  if (path && rg_path_exists(path)) {
    int line = ini_parse(path, toward_key, k);
    if (line != 0) rc = rg_error_set("%s: %s", path, line < 0 ? "cannot be read" : "does not parse as INI");
  }
  if (rc == 0 && k->w_toward == 0) k->target[0] = '\0';
  free(path);
  return rc;
}

/* The plan: defaults, then --plan-file's [verdict], then the flags. */
static int build_plan(rg_verdict_plan *p, const char *plan_file, const plan_values *values, double layer_frac,
                      bool no_filter, bool no_cap, bool transfer_layers) {
  if (plan_file && rg_verdict_plan_read(p, plan_file) < 0) return -1;
  for (int i = 0; i < N_PLAN_FLAGS; i++) {
    char where[64], buf[64];
    const char *v = plan_value(values, i, buf, sizeof buf);
    snprintf(where, sizeof where, "--%s", PLAN_FLAGS[i].flag);
    if (v && rg_verdict_plan_set(p, PLAN_FLAGS[i].key, v, where) < 0) return -1;
  }
  if (!isnan(layer_frac)) { /* unset keeps RD's prune_frac 0.2 exactly */
    if (!(layer_frac > 0 && layer_frac <= 1)) return rg_error_set("--layer-frac: %g is not in (0, 1]", layer_frac);
    p->rules.prune_frac = 1.0 - layer_frac;
  }
  if (no_filter) p->prompt_filter = false;
  if (no_cap) p->rules.layer_cap = false;
  if (transfer_layers) p->transfer_layers = true;
  return rg_verdict_plan_check(p);
}

int cmd_geometry(int argc, char **argv) {
  cli_series cs = {0};
  const char *acts = NULL, *out = NULL, *plan_file = NULL, *substrings = NULL;
  double layer_frac = NAN;
  plan_values values = {0};
  for (int i = 0; i < N_PLAN_FLAGS; i++) values.d[i] = NAN, values.i[i] = INT_MIN;
  bool json = false, no_filter = false, no_cap = false, transfer_layers = false;
  rg_geometry_opts o = rg_geometry_opts_default();
  o.log = cli_log();
  cli_opt opts[N_PLAN_FLAGS + 16];
  int n_opts = 0;
  opts[n_opts++] = (cli_opt){"acts", CLI_STRING, &acts, "activation file written by refgeo capture"};
  const cli_opt series_opts[] = {CLI_SERIES_OPTS(&cs)};
  for (size_t i = 0; i < sizeof series_opts / sizeof series_opts[0]; i++) opts[n_opts++] = series_opts[i];
  opts[n_opts++] = (cli_opt){"out", CLI_STRING, &out, "output directory (created) for the tables and verdict"};
  opts[n_opts++] = (cli_opt){"plan-file", CLI_STRING, &plan_file, "INI file whose [verdict] section sets the plan"};
  for (int i = 0; i < N_PLAN_FLAGS; i++) {
    void *dst = PLAN_FLAGS[i].type == CLI_FLOAT ? (void *)&values.d[i]
                : PLAN_FLAGS[i].type == CLI_INT ? (void *)&values.i[i]
                                                : (void *)&values.s[i];
    opts[n_opts++] = (cli_opt){PLAN_FLAGS[i].flag, PLAN_FLAGS[i].type, dst, PLAN_FLAGS[i].help};
  }
  opts[n_opts++] = (cli_opt){"no-prompt-filter", CLI_BOOL, &no_filter, "score every prompt (RD filters them)"};
  opts[n_opts++] = (cli_opt){"layer-frac", CLI_FLOAT, &layer_frac, "admissible if layer < floor(F * L) (0.8)"};
  opts[n_opts++] = (cli_opt){"no-layer-cap", CLI_BOOL, &no_cap, "no layer cap"};
  opts[n_opts++] = (cli_opt){"transfer-layers", CLI_BOOL, &transfer_layers,
                             "transfer.csv also scores each step's best direction of every layer in every step's model"};
  opts[n_opts++] = (cli_opt){"start-over", CLI_BOOL, &o.start_over, "replace results scored under another plan"};
  opts[n_opts++] = (cli_opt){"refusal-substrings", CLI_STRING, &substrings,
                             "HarmBench refusal_substrings.json, the judge of replies (data/harmbench/)"};
  opts[n_opts++] = (cli_opt){"threads", CLI_INT, &o.threads, "CPU threads (all)"};
  opts[n_opts++] = (cli_opt){"json", CLI_BOOL, &json, "print a summary of the run as JSON"};
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, n_opts,
                     "--acts FILE.h5 " CLI_SERIES_USAGE " --out DIR [flags]\n\nexample: refgeo geometry --acts "
                     "runs/demo/acts.h5 --run-dir runs/demo --refusal-tokens auto --max-val 8 --out runs/demo/geometry",
                     pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&cs.model, pos, &n_pos) < 0) return cli_fail();
  if (!acts || !out) {
    rg_error_set("--acts and --out are required");
    return cli_fail();
  }
  if (build_plan(&o.plan, plan_file, &values, layer_frac, no_filter, no_cap, transfer_layers) < 0) return cli_fail();
  toward_keys toward;
  if (run_toward_target(cs.run_dir, &toward) < 0) return cli_fail();
  o.toward_target = toward.target[0] ? toward.target : NULL;
  char *default_substrings = substrings ? NULL : cli_data_path("harmbench/refusal_substrings.json");
  o.refusal_substrings = substrings ? substrings : default_substrings;
  rg_checkpoint_series *s = o.refusal_substrings ? cli_series_open(&cs) : NULL;
  if (!s) {
    free(default_substrings);
    return cli_fail();
  }
  rc = rg_geometry_run(acts, s, out, &o);
  if (rc == 0 && json) rc = print_summary(acts, out, s);
  rg_checkpoints_free(s);
  free(default_substrings);
  return rc < 0 ? cli_fail() : 0;
}
