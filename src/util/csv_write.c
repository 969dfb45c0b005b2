/* csv_write.c: writing CSV result files atomically with libcsv's quoting (csv_write.h). */
#include "util/csv_write.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

/* A field needs quotes when a reader would otherwise split it or trim it:
 * separators, quotes, line breaks, or leading/trailing blanks. Plain fields
 * are written bare so that numeric columns stay easy to read and grep. */
static int needs_quotes(const char *s) {
  size_t n = strlen(s);
  if (n == 0) return 0;
  if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t') return 1;
  return strpbrk(s, ",\"\r\n") != NULL;
}

static int write_failed(rg_csv_writer *w) {
  return rg_error_set("%s: write failed: %s", w->file.path, strerror(errno));
}

/* Writes one field with its separator; the caller has checked the width. */
static int put_field(rg_csv_writer *w, const char *s) {
  if (w->col > 0 && fputc(',', w->file.fp) == EOF) return write_failed(w);
  if (needs_quotes(s)) {
    if (csv_fwrite(w->file.fp, s, strlen(s)) != 0) return write_failed(w);
  } else if (fputs(s, w->file.fp) == EOF) {
    return write_failed(w);
  }
  w->col++;
  return 0;
}

static int end_line(rg_csv_writer *w) {
  if (w->col != w->n_cols)
    return rg_error_set("%s: row has %d fields, header has %d", w->file.path, w->col, w->n_cols);
  if (fputc('\n', w->file.fp) == EOF) return write_failed(w);
  w->col = 0;
  return 0;
}

int rg_csv_writer_open(rg_csv_writer *w, const char *path, const char *const *header, int n_cols) {
  memset(w, 0, sizeof *w);
  if (n_cols <= 0) return rg_error_set("%s: CSV needs at least one column", path);
  if (rg_atomic_open(&w->file, path) != 0) return -1;
  w->n_cols = n_cols;
  for (int c = 0; c < n_cols; c++) {
    if (put_field(w, header[c]) != 0) goto fail;
  }
  if (end_line(w) != 0) goto fail;
  return 0;
fail:
  rg_atomic_abort(&w->file);
  return -1;
}

int rg_csv_writer_str(rg_csv_writer *w, const char *s) {
  if (w->col >= w->n_cols)
    return rg_error_set("%s: row has more than %d fields", w->file.path, w->n_cols);
  return put_field(w, s ? s : "");
}

int rg_csv_writer_int(rg_csv_writer *w, long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  return rg_csv_writer_str(w, buf);
}

int rg_csv_writer_double(rg_csv_writer *w, double v) {
  /* %.17g round-trips every double; NaN is spelled "nan" regardless of its
   * sign bit (printf may write "-nan"), infinities as "inf" / "-inf". */
  char buf[32];
  if (isnan(v))
    snprintf(buf, sizeof buf, "nan");
  else
    snprintf(buf, sizeof buf, "%.17g", v);
  return rg_csv_writer_str(w, buf);
}

int rg_csv_writer_end_row(rg_csv_writer *w) { return end_line(w); }

int rg_csv_writer_close(rg_csv_writer *w) {
  if (w->col != 0) {
    rg_error_set("%s: last row is incomplete (%d of %d fields)", w->file.path, w->col, w->n_cols);
    rg_atomic_abort(&w->file);
    return -1;
  }
  return rg_atomic_commit(&w->file);
}

void rg_csv_writer_abort(rg_csv_writer *w) {
  if (w->file.fp) rg_atomic_abort(&w->file);
}
