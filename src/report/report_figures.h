/* report_figures.h: the report's plots, each drawn twice from the same
 * description: as SVG by refgeo (svg_plot.h, svg_heatmap.h) and as Python
 * code (pandas + matplotlib) that redraws it from the CSVs, for the
 * notebook. Building both from one call per series keeps them from drifting
 * apart.
 *
 * The figures, in page order, each when its CSV is there:
 *   plot-asr            ASR against step per attack / classifier with the
 *                       Wilson 95% band, the published curve dashed;
 *   plot-overrefusal    refusal_rates.csv's refusal_rate per group;
 *   plot-carrier-layer  migration.csv's best_layer over early / middle /
 *                       late bands;
 *   plot-spectrum       migration.csv's erank_sigma, erank_sigma2 and pr;
 *   plot-sensitivity    sensitivity.csv's n_admissible against kl_max, per step;
 *   plot-sensitivity-layer  its best_layer against kl_max, per step;
 *   plot-pareto         pareto.csv's bypass against kl, per step;
 *   plot-transfer-bypass, plot-transfer-induce  heatmaps source step x
 *                       target step of transfer.csv's bypass and induce;
 *   plot-probes         probes.csv's auroc against layer, per step, each
 *                       layer at its best position, over the 0.8 band;
 *   plot-cos-step0      heatmap layer x step of geometry.csv's cos_step0;
 *   plot-bypass         heatmap layer x step of carriers.csv's bypass;
 *   plot-losses         train_log.csv's loss columns.
 * The layer heatmaps show one eoi position: the best carrier's at the first
 * step that has one (migration.csv), else the last prompt token (-1). A
 * figure whose CSV has nothing to draw says why inside its frame.
 */
#ifndef RG_REPORT_FIGURES_H
#define RG_REPORT_FIGURES_H

#include "report/report_data.h"

typedef struct {
  char *section_id, *section_title; /* the page section the figure belongs to */
  char *title;
  char *svg;    /* one <svg> element */
  char *python; /* a self-contained code cell (imports, reads, draws) */
} rg_figure;

typedef struct {
  rg_figure *items;
  int n;
  char *run_real; /* the run directory's real path: CSVs below it are read as RUN / "..." */
} rg_figures;

/* Builds every figure D has data for. The Python code reads a CSV below the
 * run directory as RUN / "path/inside/the/run" (RUN, a pathlib.Path, is
 * defined by whoever runs the code: the notebook sets it per cell, relative
 * to its own folder), and any other CSV by absolute path. Returns 0, or -1
 * with the error set (a CSV cell that is not a number, a missing column, out
 * of memory); F is then empty. */
int rg_figures_build(rg_figures *f, const rg_report_data *d, const rg_report_inputs *in);
void rg_figures_free(rg_figures *f);

#endif
