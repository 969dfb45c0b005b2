/* cmd_geometry: `refgeo geometry --acts FILE.h5 (MODEL | --model PATH |
 * --run-dir DIR [--base PATH] | --manifest CSV [--base PATH]) --out DIR
 * [--kl-max X] [--induce-min X] [--layer-frac F | --no-layer-cap]
 * [--early F --late F] [--refusal-tokens ID,ID] [--layers A:B] [--max-val N]
 * [--threads N] [--json]`
 * computes refusal directions, their drift, AUROC and spectra, scores and
 * selects the carriers of every checkpoint (geometry/pipeline.h) and writes
 * into the directory --out geometry.csv, carriers.csv and migration.csv
 * (docs/csv-formats.md) and directions.h5. --json prints {"acts", "out",
 * "steps", "files"} on stdout.
 * The model is needed for the refusal scores (the default refusal token is
 * that of "I" in its tokenizer; --refusal-tokens names others).
 * --layer-frac F keeps candidates with layer < floor(F * L) (RD: 0.8).
 * --layers A:B restricts the scored candidates to layers A..B-1 (speed; the
 * geometry rows still cover every layer). Progress goes to stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_series.h"
#include "commands.h"
#include "geometry/pipeline.h"
#include "util/error.h"

enum { MAX_REFUSAL = 16 };

static int parse_refusal(const char *list, int32_t *ids, int *n) {
  *n = 0;
  const char *p = list;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ','))
      return rg_error_set("--refusal-tokens: '%s' is not a comma-separated list of token ids", list);
    if (*n == MAX_REFUSAL) return rg_error_set("--refusal-tokens: more than %d ids", MAX_REFUSAL);
    ids[(*n)++] = (int32_t)v;
    p = *end ? end + 1 : end;
  }
  return *n ? 0 : rg_error_set("--refusal-tokens: no ids");
}

static int parse_layers(const char *spec, int *lo, int *hi) {
  char *end;
  long a = strtol(spec, &end, 10);
  if (end == spec || *end != ':') return rg_error_set("--layers: '%s' is not A:B", spec);
  const char *q = end + 1;
  long b = strtol(q, &end, 10);
  if (end == q || *end || a < 0 || b <= a || b > 1 << 20)
    return rg_error_set("--layers: '%s' is not A:B with 0 <= A < B", spec);
  *lo = (int)a;
  *hi = (int)b;
  return 0;
}

static int print_summary(const char *acts, const char *out, const rg_checkpoint_series *s) {
  static const char *const FILES[] = {"geometry.csv", "carriers.csv", "migration.csv", "directions.h5"};
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "acts", acts);
  cJSON_AddStringToObject(o, "out", out);
  cJSON *steps = cJSON_AddArrayToObject(o, "steps");
  for (int i = 0; i < s->n; i++) cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)s->items[i].step));
  cJSON *files = cJSON_AddArrayToObject(o, "files");
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) cJSON_AddItemToArray(files, cJSON_CreateString(FILES[i]));
  return cli_print_json(o);
}

int cmd_geometry(int argc, char **argv) {
  cli_series cs = {0};
  const char *acts = NULL, *out = NULL, *refusal = NULL, *layers = NULL;
  bool json = false;
  rg_geometry_opts o = rg_geometry_opts_default();
  double layer_frac = NAN; /* unset: keep RD's prune_frac 0.2 exactly */
  bool no_cap = false;
  o.log = cli_log();
  const cli_opt opts[] = {
      {"acts", CLI_STRING, &acts, "activation file written by refgeo capture"},
      CLI_SERIES_OPTS(&cs),
      {"out", CLI_STRING, &out, "output directory (created) for the CSV tables and directions.h5"},
      {"kl-max", CLI_FLOAT, &o.rules.kl_max, "admissible if KL <= X (0.1)"},
      {"induce-min", CLI_FLOAT, &o.rules.induce_min, "admissible if induce >= X (0)"},
      {"layer-frac", CLI_FLOAT, &layer_frac, "admissible if layer < floor(F * L) (0.8)"},
      {"no-layer-cap", CLI_BOOL, &no_cap, "no layer cap"},
      {"early", CLI_FLOAT, &o.depth.early_below, "label early if depth < F (0.3333)"},
      {"late", CLI_FLOAT, &o.depth.late_from, "label late if depth >= F (0.6667)"},
      {"refusal-tokens", CLI_STRING, &refusal, "refusal token ids (default: the token of \"I\")"},
      {"layers", CLI_STRING, &layers, "score candidates of layers A..B-1 only (all)"},
      {"max-val", CLI_INT, &o.max_val, "use the first N val prompts per class (all)"},
      {"threads", CLI_INT, &o.threads, "CPU threads (all)"},
      {"json", CLI_BOOL, &json, "print a summary of the run as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "--acts FILE.h5 " CLI_SERIES_USAGE " --out DIR [flags]\n\nexample: refgeo geometry --acts runs/demo/acts.h5 --run-dir runs/demo --max-val 8 --out runs/demo/geometry", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&cs.model, pos, &n_pos) < 0) return cli_fail();
  if (!acts || !out) {
    rg_error_set("--acts and --out are required");
    return cli_fail();
  }
  if (o.max_val < 0) { /* 0 is the library's "all" */
    rg_error_set("--max-val: %d is negative", o.max_val);
    return cli_fail();
  }
  if (!isnan(layer_frac) && !(layer_frac > 0 && layer_frac <= 1)) {
    rg_error_set("--layer-frac: %g is not in (0, 1]", layer_frac);
    return cli_fail();
  }
  if (!(o.depth.early_below >= 0 && o.depth.early_below <= o.depth.late_from && o.depth.late_from <= 1)) {
    rg_error_set("--early/--late: need 0 <= early <= late <= 1 (got %g, %g)", o.depth.early_below, o.depth.late_from);
    return cli_fail();
  }
  if (!isnan(layer_frac)) o.rules.prune_frac = 1.0 - layer_frac;
  o.rules.layer_cap = !no_cap;
  int32_t ids[MAX_REFUSAL];
  if (refusal) {
    if (parse_refusal(refusal, ids, &o.n_refusal) < 0) return cli_fail();
    o.refusal_ids = ids;
  }
  if (layers && parse_layers(layers, &o.layer_lo, &o.layer_hi) < 0) return cli_fail();
  rg_checkpoint_series *s = cli_series_open(&cs);
  if (!s) return cli_fail();
  rc = rg_geometry_run(acts, s, out, &o);
  if (rc == 0 && json) rc = print_summary(acts, out, s);
  rg_checkpoints_free(s);
  return rc < 0 ? cli_fail() : 0;
}
