/* csv_table.h: a whole CSV file read into memory with libcsv (RFC 4180:
 * quoted fields may hold commas, quotes and newlines).
 *
 * The first row is the header. Ownership: the table owns every string;
 * rg_csv_free releases them.
 */
#ifndef RG_CSV_TABLE_H
#define RG_CSV_TABLE_H

#include <stddef.h>

typedef struct {
  char *path;
  int n_cols;       /* header width */
  char **header;    /* n_cols names */
  size_t n_rows;    /* data rows, header excluded */
  char ***rows;     /* rows[r][c], NUL-terminated; every row has n_cols fields */
} rg_csv;

/* Reads PATH. A row whose width differs from the header's, a malformed quote
 * or an empty file is an error naming the file and the line. NULL + error. */
rg_csv *rg_csv_read(const char *path);
void rg_csv_free(rg_csv *t);

/* Index of column NAME, or -1. */
int rg_csv_col(const rg_csv *t, const char *name);
/* Like rg_csv_col, but sets the error "PATH: missing column NAME" on absence. */
int rg_csv_require_col(const rg_csv *t, const char *name);

#endif
