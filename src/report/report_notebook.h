/* report_notebook.h: the report as a Jupyter notebook (nbformat 4.5).
 *
 * The notebook says what the HTML page says, in cells a researcher can
 * rerun and change:
 *   - a Markdown cell with the run, its provenance and how to rerun it;
 *   - per figure a Markdown heading and a code cell that loads the run's
 *     CSVs with pandas and redraws the plot with matplotlib; its saved
 *     output is refgeo's own SVG of the plot (image/svg+xml), so the
 *     notebook reads well without being executed;
 *   - the small tables (asr.csv, migration.csv, refusal_rates.csv) and
 *     config.ini as Markdown.
 * Code cells name the CSVs by absolute path, so the notebook runs from any
 * folder on the machine that has the run.
 */
#ifndef RG_REPORT_NOTEBOOK_H
#define RG_REPORT_NOTEBOOK_H

#include "report/report.h"

/* Writes the notebook atomically to OUT_PATH (its folder is created).
 * Errors as rg_report_write. Returns 0 or -1. */
int rg_report_notebook_write(const rg_report_inputs *in, const char *out_path);

#endif
