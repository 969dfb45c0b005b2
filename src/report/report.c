#include "report/report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/asr_curve.h"
#include "report/report_html.h"
#include "report/report_series.h"
#include "report/svg_plot.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"

/* Tables longer than this are cut on the page (geometry.csv has a row per
 * step, layer and position: thousands for a 7B run). */
enum { MAX_TABLE_ROWS = 200 };

typedef struct {
  rg_csv *train_log;
  rg_csv **asr; /* one per --asr folder */
  int n_asr;
  rg_csv *geometry, *carriers, *migration, *refusal_rates;
  rg_published_curve published;
  bool has_published;
  char *config; /* config.ini's text, or NULL */
} report_data;

static void data_free(report_data *d) {
  rg_csv_free(d->train_log);
  for (int i = 0; i < d->n_asr; i++) rg_csv_free(d->asr[i]);
  free(d->asr);
  rg_csv_free(d->geometry);
  rg_csv_free(d->carriers);
  rg_csv_free(d->migration);
  rg_csv_free(d->refusal_rates);
  if (d->has_published) rg_published_free(&d->published);
  free(d->config);
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

static int load(const rg_report_inputs *in, report_data *d) {
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
        read_optional(in->geometry_dir, "migration.csv", &d->migration) < 0)
      return -1;
    if (!d->geometry && !d->carriers && !d->migration)
      return rg_error_set("%s: no geometry.csv, carriers.csv or migration.csv in this --geometry folder",
                          in->geometry_dir);
  }
  if (in->overrefusal_dir &&
      read_required(in->overrefusal_dir, "refusal_rates.csv", "--overrefusal", &d->refusal_rates) < 0)
    return -1;
  if (in->published) {
    if (rg_published_read(in->published, &d->published) < 0) return -1;
    d->has_published = true;
  }
  if (!d->train_log && d->n_asr == 0 && !in->geometry_dir && !in->overrefusal_dir)
    return rg_error_set("%s: no CSV to report (no train_log.csv; name analysis outputs with --asr, --geometry or "
                        "--overrefusal)", in->run_dir);
  char *config_path = rg_path_join(in->run_dir, "config.ini");
  if (!config_path) return rg_error_set("out of memory");
  int rc = rg_path_exists(config_path) && !(d->config = rg_read_file(config_path, NULL)) ? -1 : 0;
  free(config_path);
  return rc;
}

static int write_plot(FILE *fp, const char *id, const char *title, const char *x_label, const char *y_label,
                      const rg_series_set *set, const rg_svg_hband *hbands, int n_hbands, bool y_from_zero) {
  rg_svg_plot p = {.id = id, .title = title, .x_label = x_label, .y_label = y_label, .series = set->items,
                   .n_series = set->n, .hbands = hbands, .n_hbands = n_hbands, .y_from_zero = y_from_zero};
  return rg_svg_plot_write(fp, &p);
}

/* The published points (with a step and an ASR) as one dashed series per
 * attack and method. */
static int add_published(rg_series_set *set, const rg_published_curve *c) {
  double *x = malloc((c->n + 1) * sizeof *x), *y = malloc((c->n + 1) * sizeof *y);
  int rc = x && y ? 0 : rg_error_set("out of memory");
  for (size_t i = 0; i < c->n && rc == 0; i++) {
    const rg_published_point *p = &c->items[i];
    size_t first = 0;
    while (first < i && (strcmp(c->items[first].attack, p->attack) != 0 ||
                         strcmp(c->items[first].method, p->method) != 0))
      first++;
    if (first < i) continue; /* this attack and method were drawn with an earlier row */
    size_t n = 0;
    for (size_t j = i; j < c->n; j++) {
      const rg_published_point *q = &c->items[j];
      if (!q->has_step || !q->has_asr || strcmp(q->attack, p->attack) != 0 || strcmp(q->method, p->method) != 0)
        continue;
      x[n] = (double)q->step, y[n] = q->asr, n++;
    }
    if (n == 0) continue;
    char name[256];
    snprintf(name, sizeof name, "published: %s (%s)", p->attack, p->method);
    rc = rg_series_add(set, name, n, x, y, true);
  }
  free(x);
  free(y);
  return rc;
}

static int plot_asr(FILE *fp, const report_data *d, const rg_report_inputs *in) {
  static const char *const by[] = {"attack", "classifier"};
  rg_series_set set = {0};
  int rc = 0;
  for (int i = 0; i < d->n_asr && rc == 0; i++) {
    char prefix[512] = "";
    if (d->n_asr > 1) snprintf(prefix, sizeof prefix, "%s: ", in->asr_dirs[i]); /* tell the folders apart */
    rc = rg_series_from_csv(&set, d->asr[i], "step", "asr", "wilson95_lo", "wilson95_hi", by, 2, prefix);
  }
  if (rc == 0 && d->has_published) rc = add_published(&set, &d->published);
  if (rc == 0)
    rc = write_plot(fp, "plot-asr", "Attack success rate (band: Wilson 95%)", "training step", "ASR", &set, NULL, 0,
                    true);
  rg_series_set_free(&set);
  return rc;
}

static int plot_overrefusal(FILE *fp, const rg_csv *t) {
  static const char *const by[] = {"attack", "classifier", "group_column", "group"};
  rg_series_set set = {0};
  int rc = rg_series_from_csv(&set, t, "step", "refusal_rate", "wilson95_lo", "wilson95_hi", by, 4, "");
  if (rc == 0)
    rc = write_plot(fp, "plot-overrefusal", "Refusal rate per prompt group (band: Wilson 95%)", "training step",
                    "refusal rate", &set, NULL, 0, true);
  rg_series_set_free(&set);
  return rc;
}

/* The number of layers L of the model, from a row whose carrier exists:
 * rel_depth = l* / L (csv-formats.md). 0 when no row tells. */
static int n_layers_of(const rg_csv *mig) {
  int lc = rg_csv_col(mig, "best_layer"), rc = rg_csv_col(mig, "rel_depth");
  if (lc < 0 || rc < 0) return 0;
  for (size_t r = 0; r < mig->n_rows; r++) {
    double l, rel;
    if (rg_csv_number(mig, r, lc, &l) < 0 || rg_csv_number(mig, r, rc, &rel) < 0) return -1;
    if (isfinite(l) && isfinite(rel) && rel > 0) return (int)lround(l / rel);
  }
  return 0;
}

static int plot_carrier_layer(FILE *fp, const rg_csv *mig) {
  int n_layers = n_layers_of(mig);
  if (n_layers < 0) return -1;
  /* migration.csv's default labels: early below L/3, late from 2L/3
   * (csv-formats.md; a run with other thresholds still gets these bands). */
  double L = n_layers;
  rg_svg_hband bands[] = {{0, L / 3, "early"}, {L / 3, 2 * L / 3, "middle"}, {2 * L / 3, L, "late"}};
  rg_series_set set = {0};
  int rc = rg_series_from_csv(&set, mig, "step", "best_layer", NULL, NULL, NULL, 0, "best carrier layer l*");
  if (rc == 0)
    rc = write_plot(fp, "plot-carrier-layer", "Migration: the selected carrier's layer", "training step", "layer",
                    &set, bands, n_layers > 0 ? 3 : 0, true);
  rg_series_set_free(&set);
  return rc;
}

/* Plots the columns COLS of T (those it has) against step; nothing when it
 * has none of them. */
static int plot_columns(FILE *fp, const rg_csv *t, const char *const *cols, int n_cols, const char *id,
                        const char *title, const char *y_label) {
  rg_series_set set = {0};
  int rc = 0;
  for (int k = 0; k < n_cols && rc == 0; k++)
    if (rg_csv_col(t, cols[k]) >= 0) rc = rg_series_from_csv(&set, t, "step", cols[k], NULL, NULL, NULL, 0, cols[k]);
  if (rc == 0 && set.n > 0) rc = write_plot(fp, id, title, "training step", y_label, &set, NULL, 0, true);
  rg_series_set_free(&set);
  return rc;
}

static int write_page(FILE *fp, const report_data *d, const rg_report_inputs *in) {
  char title[1024];
  snprintf(title, sizeof title, "refgeo report: %s", in->run_dir);
  rg_html_begin(fp, title);
  if (d->n_asr > 0 || d->has_published) {
    rg_html_section(fp, "asr", "Attack success rate");
    if (plot_asr(fp, d, in) < 0) return -1;
  }
  if (d->refusal_rates) {
    rg_html_section(fp, "overrefusal", "Over-refusal");
    if (plot_overrefusal(fp, d->refusal_rates) < 0) return -1;
  }
  if (d->migration) {
    static const char *const spectrum[] = {"erank_sigma", "erank_sigma2", "pr"};
    rg_html_section(fp, "migration", "Carrier migration and spectrum");
    if (plot_carrier_layer(fp, d->migration) < 0 ||
        plot_columns(fp, d->migration, spectrum, 3, "plot-spectrum",
                     "Effective rank (p \u221d \u03c3, p \u221d \u03c3\u00b2) and participation ratio of the carrier matrix",
                     "rank") < 0)
      return -1;
  }
  if (d->train_log) {
    static const char *const losses[] = {"loss_total", "loss_utility", "loss_away", "loss_toward"};
    rg_html_section(fp, "training", "Training losses");
    if (plot_columns(fp, d->train_log, losses, 4, "plot-losses", "R2D2 losses per optimizer update",
                     "loss (nats)") < 0)
      return -1;
  }
  rg_html_section(fp, "tables", "Tables");
  const rg_csv *tables[] = {d->migration, d->refusal_rates, d->train_log, d->carriers, d->geometry};
  for (int i = 0; i < d->n_asr; i++) rg_html_csv_table(fp, d->asr[i], MAX_TABLE_ROWS);
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (tables[i]) rg_html_csv_table(fp, tables[i], MAX_TABLE_ROWS);
  if (d->config) {
    rg_html_section(fp, "config", "config.ini");
    rg_html_pre(fp, d->config);
  }
  rg_html_end(fp);
  return 0;
}

int rg_report_write(const rg_report_inputs *in, const char *out_path) {
  report_data d = {0};
  int rc = load(in, &d);
  if (rc == 0) {
    rg_atomic_file f;
    rc = rg_atomic_open(&f, out_path);
    if (rc == 0 && write_page(f.fp, &d, in) < 0) {
      rg_atomic_abort(&f);
      rc = -1;
    } else if (rc == 0) {
      rc = rg_atomic_commit(&f);
    }
  }
  data_free(&d);
  return rc;
}
