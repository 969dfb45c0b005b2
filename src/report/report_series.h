/* report_series.h: plot series built from the columns of a CSV table.
 *
 * The report plots columns of refgeo's CSVs (asr.csv, train_log.csv,
 * migration.csv, ...) against their `step` column. A series set owns the
 * numbers and names it hands to rg_svg_plot as an array of rg_svg_series.
 */
#ifndef RG_REPORT_SERIES_H
#define RG_REPORT_SERIES_H

#include <stdbool.h>
#include <stddef.h>

#include "report/svg_plot.h"
#include "util/csv_table.h"

typedef struct {
  rg_svg_series *items; /* names and arrays owned by the set */
  int n;
} rg_series_set;

/* The number in cell (ROW, COL) of T. An empty cell or "nan" is NAN (a
 * step without a value, e.g. no admissible carrier); anything else that is
 * not a whole number is an error "PATH: row R, column C: 'TEXT' is not a
 * number". Returns 0 or -1. */
int rg_csv_number(const rg_csv *t, size_t row, int col, double *out);

/* Appends the series Y_COL against X_COL of T (columns by name; a missing
 * one is an error naming the file). LO_COL/HI_COL (or NULL) give a band.
 * With N_GROUP > 0 the rows are split by the values of GROUP_COLS, one
 * series per distinct combination in order of first appearance, named
 * "PREFIX<v1> / <v2>..." ; without, one series named PREFIX. Each series is
 * sorted by x (stable: rows with equal x keep file order). Returns 0 or -1. */
int rg_series_from_csv(rg_series_set *set, const rg_csv *t, const char *x_col, const char *y_col, const char *lo_col,
                       const char *hi_col, const char *const *group_cols, int n_group, const char *prefix);

/* Appends a copy of N points X, Y (sorted by x) as a series named NAME.
 * Returns 0 or -1 (out of memory). */
int rg_series_add(rg_series_set *set, const char *name, size_t n, const double *x, const double *y, bool dashed);

/* The total finite points of the set (the circles its plot will draw). */
size_t rg_series_points(const rg_series_set *set);

void rg_series_set_free(rg_series_set *set);

/* A value per (x, y) cell, for a heatmap: X and Y are the distinct values
 * of two columns, ascending; VALUE[iy * n_x + ix] is NaN where no row has
 * that pair. */
typedef struct {
  size_t n_x, n_y;
  double *x, *y, *value;
} rg_grid;

/* The grid of V_COL over (X_COL, Y_COL) from the rows of T whose FILTER_COL
 * holds the number FILTER_VALUE (e.g. geometry.csv's rows at one eoi
 * position), or from every row when FILTER_COL is NULL (transfer.csv's
 * source x target steps). Two rows for the same cell, or a missing column,
 * are errors naming the file. No matching row gives an empty grid. Returns 0
 * or -1. */
int rg_grid_from_csv(rg_grid *g, const rg_csv *t, const char *x_col, const char *y_col, const char *v_col,
                     const char *filter_col, double filter_value);
void rg_grid_free(rg_grid *g);

#endif
