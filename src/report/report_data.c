/* report_data.c: loading the CSVs and texts one report is made of (report_data.h). */
#include "report/report_data.h"

#include <stdlib.h>

#include "util/error.h"
#include "util/fileio.h"

void rg_report_data_free(rg_report_data *d) {
  rg_csv_free(d->train_log);
  for (int i = 0; i < d->n_asr; i++) rg_csv_free(d->asr[i]);
  free(d->asr);
  rg_csv_free(d->geometry);
  rg_csv_free(d->carriers);
  rg_csv_free(d->migration);
  rg_csv_free(d->sensitivity);
  rg_csv_free(d->pareto);
  rg_csv_free(d->transfer);
  rg_csv_free(d->probes);
  free(d->verdict);
  free(d->plan_sha256);
  for (int i = 0; i < d->n_refusal_rates; i++) rg_csv_free(d->refusal_rates[i]);
  free(d->refusal_rates);
  if (d->has_published) rg_published_free(&d->published);
  free(d->config);
  free(d->repro);
  rg_provenance_free(&d->provenance);
  *d = (rg_report_data){0};
}

/* DIR/NAME into *OUT when the file is there (*OUT stays NULL when not). */
static int read_optional(const char *dir, const char *name, rg_csv **out) {
  char *path = rg_path_join(dir, name);
  if (!path) return rg_error_set("out of memory");
  int rc = 0;
  if (rg_path_exists(path) && !(*out = rg_csv_read(path))) rc = -1;
  free(path);
  return rc;
}

/* The text of DIR/NAME into *OUT when the file is there. */
static int read_optional_text(const char *dir, const char *name, char **out) {
  char *path = rg_path_join(dir, name);
  if (!path) return rg_error_set("out of memory");
  int rc = rg_path_exists(path) && !(*out = rg_read_file(path, NULL)) ? -1 : 0;
  free(path);
  return rc;
}

/* DIR/NAME, which the user said is there. */
static int read_required(const char *dir, const char *name, const char *flag, rg_csv **out) {
  if (read_optional(dir, name, out) < 0) return -1;
  if (!*out) return rg_error_set("%s: no %s in this %s folder", dir, name, flag);
  return 0;
}

/* asr.csv must also be a consistent curve (asr and Wilson cells that agree
 * with n and successes), as `refgeo repro` reads it. */
static int check_asr_curve(const rg_csv *t) {
  rg_asr_curve c;
  if (rg_asr_curve_read(t->path, &c) < 0) return -1;
  rg_asr_curve_free(&c);
  return 0;
}

static int load(const rg_report_inputs *in, rg_report_data *d) {
  if (!rg_is_dir(in->run_dir)) return rg_error_set("%s: not a run directory", in->run_dir);
  if (read_optional(in->run_dir, "train_log.csv", &d->train_log) < 0) return -1;
  if (in->n_asr > 0 && !(d->asr = calloc((size_t)in->n_asr, sizeof *d->asr))) return rg_error_set("out of memory");
  for (int i = 0; i < in->n_asr; i++) {
    d->n_asr = i + 1;
    if (read_required(in->asr_dirs[i], "asr.csv", "--asr", &d->asr[i]) < 0 || check_asr_curve(d->asr[i]) < 0)
      return -1;
  }
  if (in->geometry_dir) {
    if (read_optional(in->geometry_dir, "geometry.csv", &d->geometry) < 0 ||
        read_optional(in->geometry_dir, "carriers.csv", &d->carriers) < 0 ||
        read_optional(in->geometry_dir, "migration.csv", &d->migration) < 0 ||
        read_optional(in->geometry_dir, "sensitivity.csv", &d->sensitivity) < 0 ||
        read_optional(in->geometry_dir, "pareto.csv", &d->pareto) < 0 ||
        read_optional(in->geometry_dir, "transfer.csv", &d->transfer) < 0 ||
        read_optional(in->geometry_dir, "probes.csv", &d->probes) < 0 ||
        read_optional_text(in->geometry_dir, "verdict.txt", &d->verdict) < 0 ||
        read_optional_text(in->geometry_dir, "plan.sha256", &d->plan_sha256) < 0)
      return -1;
    if (!d->geometry && !d->carriers && !d->migration)
      return rg_error_set("%s: no geometry.csv, carriers.csv or migration.csv in this --geometry folder",
                          in->geometry_dir);
  }
  if (in->n_overrefusal > 0 &&
      !(d->refusal_rates = calloc((size_t)in->n_overrefusal, sizeof *d->refusal_rates)))
    return rg_error_set("out of memory");
  for (int i = 0; i < in->n_overrefusal; i++) {
    d->n_refusal_rates = i + 1;
    if (read_required(in->overrefusal_dirs[i], "refusal_rates.csv", "--overrefusal", &d->refusal_rates[i]) < 0)
      return -1;
  }
  if (in->published) {
    if (rg_published_read(in->published, &d->published) < 0) return -1;
    d->has_published = true;
  }
  if (!d->train_log && d->n_asr == 0 && !in->geometry_dir && in->n_overrefusal == 0)
    return rg_error_set("%s: no CSV to report (no train_log.csv; name analysis outputs with --asr, --geometry or "
                        "--overrefusal)", in->run_dir);
  if (read_optional_text(in->run_dir, "config.ini", &d->config) < 0 ||
      read_optional_text(in->run_dir, "repro.txt", &d->repro) < 0)
    return -1;
  return rg_provenance_collect(&d->provenance, d->config);
}

int rg_report_data_load(rg_report_data *d, const rg_report_inputs *in) {
  *d = (rg_report_data){0};
  if (load(in, d) == 0) return 0;
  rg_report_data_free(d);
  return -1;
}

