/* csv_write.h: writing CSV result files atomically, fields quoted by libcsv
 * (csv_fwrite) where needed.
 *
 * Usage: rg_csv_writer_open(&w, path, header, n_cols); then per row either
 * rg_csv_writer_str/int/double, then rg_csv_writer_end_row, and finally rg_csv_writer_close
 * (which renames the temp file into place) or rg_csv_writer_abort.
 * Numbers are written with "%.17g" (doubles) so they read back exactly.
 */
#ifndef RG_CSV_WRITE_H
#define RG_CSV_WRITE_H

#include "util/fileio.h"

typedef struct {
  rg_atomic_file file;
  int n_cols;
  int col; /* fields written in the current row */
} rg_csv_writer;

int rg_csv_writer_open(rg_csv_writer *w, const char *path, const char *const *header, int n_cols);
int rg_csv_writer_str(rg_csv_writer *w, const char *s);
int rg_csv_writer_int(rg_csv_writer *w, long long v);
int rg_csv_writer_double(rg_csv_writer *w, double v); /* NaN -> "nan" */
int rg_csv_writer_end_row(rg_csv_writer *w);          /* error if the row is short */
int rg_csv_writer_close(rg_csv_writer *w);
void rg_csv_writer_abort(rg_csv_writer *w);

#endif
