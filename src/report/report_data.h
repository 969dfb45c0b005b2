/* report_data.h: the CSVs and texts one report is made of.
 *
 * Loaded once, then drawn twice: as report.html (report.c) and as a
 * notebook (report_notebook.c). Ownership: the struct owns everything it
 * points to; rg_report_data_free releases it.
 */
#ifndef RG_REPORT_DATA_H
#define RG_REPORT_DATA_H

#include <stdbool.h>

#include "harmbench/asr_curve.h"
#include "report/provenance.h"
#include "report/report.h"
#include "util/csv_table.h"

typedef struct {
  rg_csv *train_log;
  rg_csv **asr; /* one per --asr folder */
  int n_asr;
  rg_csv *geometry, *carriers, *migration;
  rg_csv *sensitivity, *pareto, *transfer, *probes; /* the verdict's reported measures (csv-formats.md) */
  rg_csv **refusal_rates; /* one per --overrefusal folder */
  int n_refusal_rates;
  rg_published_curve published;
  bool has_published;
  char *config; /* config.ini's text, or NULL */
  char *repro;  /* RUN_DIR/repro.txt (`refgeo repro`'s verdict, as `refgeo run` saves it), or NULL */
  char *verdict;     /* the geometry folder's verdict.txt (the carrier verdict in words), or NULL */
  char *plan_sha256; /* its plan.sha256 line, or NULL */
  rg_provenance provenance;
} rg_report_data;

/* Reads every input IN names. Errors (one line naming the file): a run
 * without any CSV to report, a named folder without its CSV, a CSV that does
 * not parse. Returns 0 or -1 (D is then freed). */
int rg_report_data_load(rg_report_data *d, const rg_report_inputs *in);
void rg_report_data_free(rg_report_data *d);

#endif
