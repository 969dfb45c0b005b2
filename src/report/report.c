/* report.c: `refgeo report`, one self-contained report.html for a run (report.h). */
#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#include "report/report_data.h"
#include "report/report_figures.h"
#include "report/report_html.h"
#include "report/svg_plot.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"

/* Tables longer than this are cut on the page (geometry.csv has a row per
 * step, layer and position: thousands for a 7B run). */
enum { MAX_TABLE_ROWS = 200 };

static void write_provenance(FILE *fp, const rg_provenance *p) {
  rg_html_section(fp, "provenance", "Provenance");
  fputs("<table class=\"provenance\">\n<tr><th>refgeo</th><td>", fp);
  rg_xml_escape(fp, p->version);
  fputs("</td></tr>\n<tr><th>report written (UTC)</th><td>", fp);
  rg_xml_escape(fp, p->date_utc);
  fputs("</td></tr>\n", fp);
  if (p->model) {
    fputs("<tr><th>model</th><td>", fp);
    rg_xml_escape(fp, p->model);
    fputs("</td></tr>\n<tr><th>sha256</th><td><pre>", fp);
    rg_xml_escape(fp, p->model_sha256 ? p->model_sha256 : p->model_note);
    fputs("</pre></td></tr>\n", fp);
  }
  fputs("</table>\n", fp);
}

static void write_page(FILE *fp, const rg_report_data *d, const rg_figures *figs, const rg_report_inputs *in) {
  char title[1024];
  snprintf(title, sizeof title, "refgeo report: %s", in->run_dir);
  rg_html_begin(fp, title);
  if (d->verdict) { /* the answer first: the carrier verdict and Lan et al.'s claims */
    rg_html_section(fp, "verdict", "Does the refusal carrier migrate?");
    rg_html_pre_class(fp, "verdict", d->verdict);
    if (d->plan_sha256) {
      char note[256];
      snprintf(note, sizeof note, "Decided under the analysis plan pinned before scoring (geometry/plan.ini): sha256 %.64s",
               d->plan_sha256);
      rg_html_note(fp, note);
    }
  }
  for (int i = 0; i < figs->n; i++) {
    const rg_figure *fig = &figs->items[i];
    if (i == 0 || strcmp(fig->section_id, figs->items[i - 1].section_id) != 0)
      rg_html_section(fp, fig->section_id, fig->section_title);
    fputs(fig->svg, fp);
  }
  if (d->repro) {
    rg_html_section(fp, "repro", "Reproduction verdict (refgeo repro)");
    rg_html_pre(fp, d->repro);
  }
  rg_html_section(fp, "tables", "Tables");
  const rg_csv *tables[] = {d->migration, d->sensitivity, d->transfer, d->pareto,
                            d->train_log,  d->probes,      d->carriers, d->geometry};
  for (int i = 0; i < d->n_asr; i++) rg_html_csv_table(fp, d->asr[i], MAX_TABLE_ROWS);
  for (int i = 0; i < d->n_refusal_rates; i++) rg_html_csv_table(fp, d->refusal_rates[i], MAX_TABLE_ROWS);
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (tables[i]) rg_html_csv_table(fp, tables[i], MAX_TABLE_ROWS);
  write_provenance(fp, &d->provenance);
  if (d->config) {
    rg_html_section(fp, "config", "config.ini");
    rg_html_pre(fp, d->config);
  }
  rg_html_end(fp);
}

int rg_report_write(const rg_report_inputs *in, const char *out_path) {
  rg_report_data d;
  if (rg_report_data_load(&d, in) < 0) return -1;
  rg_figures figs;
  int rc = rg_figures_build(&figs, &d, in);
  if (rc == 0) {
    rg_atomic_file f;
    rc = rg_atomic_open(&f, out_path);
    if (rc == 0) {
      write_page(f.fp, &d, &figs, in);
      rc = rg_atomic_commit(&f); /* a failed write shows as an error on flush */
    }
    rg_figures_free(&figs);
  }
  rg_report_data_free(&d);
  return rc;
}
