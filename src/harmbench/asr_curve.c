/* asr_curve.c: ASR-versus-training-step tables, measured and published (asr_curve.h). */
#include "harmbench/asr_curve.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/asr_stats.h"
#include "util/csv_table.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/printed_decimal.h"

/* Whole-field integer / number parsing; 0 or -1 with the error set. */
static int parse_long(const rg_csv *t, size_t r, int col, long *out) {
  const char *s = t->rows[r][col];
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || !*s || *end)
    return rg_error_set("%s: row %zu: %s is not an integer: '%s'", t->path, r + 1, t->header[col], s);
  *out = v;
  return 0;
}

static int parse_double(const rg_csv *t, size_t r, int col, double *out) {
  const char *s = t->rows[r][col];
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || !*s || *end || !isfinite(v))
    return rg_error_set("%s: row %zu: %s is not a number: '%s'", t->path, r + 1, t->header[col], s);
  *out = v;
  return 0;
}

/* The derived columns are recomputed from n and successes, and the file's
 * values only have to agree with them to the precision they are printed
 * with: a curve typed from a paper or exported by a spreadsheet writes the
 * Wilson bound 0.018845... as 0.0188 or 1.88e-2, and that is not a
 * disagreement. The tolerance is half a unit in the cell's last printed digit
 * plus 1e-9, which covers float64 rounding in whoever computed a
 * full-precision value (~1e-16) and a value that sits exactly on a rounding
 * boundary (7/200 = 0.035 printed as 0.04). A wrong count moves asr by 1/n,
 * so it is caught whenever the cell is printed finer than that; a column
 * printed coarser cannot tell neighbouring counts apart, and then nothing is
 * lost by accepting it because only n and successes are used. WHAT names the
 * recomputation for the message. */
static int check_derived(const rg_csv *t, size_t r, int col, const rg_asr_point *p, const char *what, double want) {
  double v, half_unit;
  if (col < 0) return 0;
  const char *text = t->rows[r][col];
  if (rg_parse_printed_decimal(text, &v, &half_unit) != 0)
    return rg_error_prefix("%s: row %zu: %s", t->path, r + 1, t->header[col]);
  double tolerance = half_unit + 1e-9;
  if (!(fabs(v - want) <= tolerance))
    return rg_error_set("%s: row %zu (step %ld, attack %s): %s = %s contradicts %s %ld/%ld = %.10g beyond its "
                        "printed precision (difference %.3g > tolerance %.3g: half a unit in the last printed digit "
                        "plus 1e-9)",
                        t->path, r + 1, p->step, p->attack, t->header[col], text, what, p->successes, p->n, want,
                        fabs(v - want), tolerance);
  return 0;
}

int rg_asr_curve_read(const char *path, rg_asr_curve *out) {
  memset(out, 0, sizeof *out);
  rg_csv *t = rg_csv_read(path);
  if (!t) return -1;
  int c_step = rg_csv_require_col(t, "step");
  int c_attack = c_step < 0 ? -1 : rg_csv_require_col(t, "attack");
  int c_n = c_attack < 0 ? -1 : rg_csv_require_col(t, "n");
  int c_succ = c_n < 0 ? -1 : rg_csv_require_col(t, "successes");
  int c_cls = rg_csv_col(t, "classifier");
  int c_asr = rg_csv_col(t, "asr"), c_lo = rg_csv_col(t, "wilson95_lo"), c_hi = rg_csv_col(t, "wilson95_hi");
  if (c_succ < 0) goto fail;
  if (!(out->items = calloc(t->n_rows ? t->n_rows : 1, sizeof *out->items))) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  for (size_t r = 0; r < t->n_rows; r++) {
    rg_asr_point *p = &out->items[r];
    p->line = r + 1;
    if (parse_long(t, r, c_step, &p->step) || parse_long(t, r, c_n, &p->n) || parse_long(t, r, c_succ, &p->successes))
      goto fail;
    if (p->n <= 0 || p->successes < 0 || p->successes > p->n) {
      rg_error_set("%s: row %zu: need 0 <= successes <= n and n > 0 (successes=%ld, n=%ld)", path, r + 1,
                   p->successes, p->n);
      goto fail;
    }
    p->attack = strdup(t->rows[r][c_attack]);
    p->classifier = strdup(c_cls < 0 ? "" : t->rows[r][c_cls]);
    out->n = r + 1;
    if (!p->attack || !p->classifier) {
      rg_error_set("%s: out of memory", path);
      goto fail;
    }
    double lo, hi;
    rg_wilson_interval(p->successes, p->n, RG_Z95, &lo, &hi);
    if (check_derived(t, r, c_asr, p, "successes/n =", (double)p->successes / (double)p->n) ||
        check_derived(t, r, c_lo, p, "the Wilson 95% lower bound", lo) ||
        check_derived(t, r, c_hi, p, "the Wilson 95% upper bound", hi))
      goto fail;
  }
  rg_csv_free(t);
  return 0;
fail:
  rg_csv_free(t);
  rg_asr_curve_free(out);
  return -1;
}

int rg_asr_curve_write(const char *path, const rg_asr_curve *c) {
  static const char *const HEADER[] = {"step", "attack", "classifier", "n", "successes", "asr", "wilson95_lo",
                                       "wilson95_hi"};
  rg_csv_writer w;
  if (rg_csv_writer_open(&w, path, HEADER, 8) != 0) return -1;
  for (size_t i = 0; i < c->n; i++) {
    const rg_asr_point *p = &c->items[i];
    double lo, hi;
    if (rg_wilson_interval(p->successes, p->n, RG_Z95, &lo, &hi) != 0 || rg_csv_writer_int(&w, p->step) ||
        rg_csv_writer_str(&w, p->attack) || rg_csv_writer_str(&w, p->classifier) || rg_csv_writer_int(&w, p->n) ||
        rg_csv_writer_int(&w, p->successes) || rg_csv_writer_double(&w, (double)p->successes / (double)p->n) ||
        rg_csv_writer_double(&w, lo) || rg_csv_writer_double(&w, hi) || rg_csv_writer_end_row(&w)) {
      rg_error_prefix("%s", path);
      rg_csv_writer_abort(&w);
      return -1;
    }
  }
  return rg_csv_writer_close(&w);
}

void rg_asr_curve_free(rg_asr_curve *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->items[i].attack);
    free(c->items[i].classifier);
  }
  free(c->items);
  memset(c, 0, sizeof *c);
}

static char *copy_col(const rg_csv *t, size_t r, int col) { return strdup(col < 0 ? "" : t->rows[r][col]); }

int rg_published_read(const char *path, rg_published_curve *out) {
  memset(out, 0, sizeof *out);
  rg_csv *t = rg_csv_read(path);
  if (!t) return -1;
  int c_step = rg_csv_require_col(t, "step");
  int c_attack = c_step < 0 ? -1 : rg_csv_require_col(t, "attack");
  int c_asr = c_attack < 0 ? -1 : rg_csv_require_col(t, "asr");
  int c_n = rg_csv_col(t, "n"), c_source = rg_csv_col(t, "source");
  int c_method = rg_csv_col(t, "method"), c_category = rg_csv_col(t, "category");
  if (c_asr < 0) goto fail;
  if (!(out->items = calloc(t->n_rows ? t->n_rows : 1, sizeof *out->items))) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  for (size_t r = 0; r < t->n_rows; r++) {
    rg_published_point *p = &out->items[r];
    p->line = r + 1;
    out->n = r + 1;
    p->has_step = t->rows[r][c_step][0] != '\0';
    p->has_asr = t->rows[r][c_asr][0] != '\0';
    if ((p->has_step && parse_long(t, r, c_step, &p->step)) || (p->has_asr && parse_double(t, r, c_asr, &p->asr)) ||
        (c_n >= 0 && t->rows[r][c_n][0] && parse_long(t, r, c_n, &p->n)))
      goto fail;
    if (p->has_asr && (p->asr < 0.0 || p->asr > 1.0)) {
      rg_error_set("%s: row %zu: asr %s is not a fraction in [0, 1]", path, r + 1, t->rows[r][c_asr]);
      goto fail;
    }
    if (p->n < 0) {
      rg_error_set("%s: row %zu: negative n", path, r + 1);
      goto fail;
    }
    p->attack = copy_col(t, r, c_attack);
    p->source = copy_col(t, r, c_source);
    p->method = copy_col(t, r, c_method);
    p->category = copy_col(t, r, c_category);
    if (!p->attack || !p->source || !p->method || !p->category) {
      rg_error_set("%s: out of memory", path);
      goto fail;
    }
  }
  rg_csv_free(t);
  return 0;
fail:
  rg_csv_free(t);
  rg_published_free(out);
  return -1;
}

void rg_published_free(rg_published_curve *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->items[i].source);
    free(c->items[i].method);
    free(c->items[i].attack);
    free(c->items[i].category);
  }
  free(c->items);
  memset(c, 0, sizeof *c);
}
