/* report.h: `refgeo report`: one self-contained report.html for a run.
 *
 * Inputs: the run directory `refgeo train` writes (train_log.csv,
 * config.ini) and the analysis outputs the user points at (asr.csv of
 * `refgeo asr --out DIR`, geometry.csv / carriers.csv / migration.csv of
 * `refgeo geometry --out DIR`, refusal_rates.csv of `asr --prompts`, a
 * published curve of data/published/). Each plot appears when its CSV is
 * there:
 *   plot-asr           ASR against step, one series per attack / classifier,
 *                      the Wilson 95% band, the published curve dashed;
 *   plot-losses        train_log.csv's loss columns against step;
 *   plot-carrier-layer migration.csv's best_layer against step over
 *                      early / middle / late bands;
 *   plot-spectrum      migration.csv's erank_sigma, erank_sigma2 and pr;
 *   the verdict's reported measures (sensitivity.csv, pareto.csv,
 *   transfer.csv, probes.csv; report_figures.h lists them);
 *   plot-overrefusal   refusal_rates.csv's refusal_rate per group, with band.
 * Then every CSV as a table and config.ini as text. The marks follow
 * svg_plot.h's convention: one <circle> per finite point.
 */
#ifndef RG_REPORT_H
#define RG_REPORT_H

typedef struct {
  const char *run_dir;
  const char *const *asr_dirs; /* each holds asr.csv */
  int n_asr;
  const char *geometry_dir;    /* NULL or a `refgeo geometry --out` folder */
  const char *const *overrefusal_dirs; /* each holds refusal_rates.csv */
  int n_overrefusal;
  const char *published;       /* NULL or a published curve CSV */
} rg_report_inputs;

/* Reads the inputs and writes the page atomically to OUT_PATH. Errors (one
 * line, naming the file): a run without any CSV to report, a named folder
 * without its CSV, a CSV that does not parse. Returns 0 or -1. */
int rg_report_write(const rg_report_inputs *in, const char *out_path);

#endif
