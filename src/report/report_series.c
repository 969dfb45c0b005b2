/* report_series.c: plot series built from the columns of a CSV table (report_series.h). */
#include "report/report_series.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"

int rg_csv_number(const rg_csv *t, size_t row, int col, double *out) {
  const char *s = t->rows[row][col];
  if (s[0] == '\0' || strcasecmp(s, "nan") == 0) {
    *out = NAN;
    return 0;
  }
  char *end;
  *out = strtod(s, &end);
  while (*end == ' ') end++;
  if (end == s || *end != '\0')
    return rg_error_set("%s: row %zu, column %s: '%s' is not a number", t->path, row + 1, t->header[col], s);
  return 0;
}

static void series_free(rg_svg_series *s) {
  free((char *)s->name);
  free((double *)s->x);
  free((double *)s->y);
  free((double *)s->lo);
  free((double *)s->hi);
}

void rg_series_set_free(rg_series_set *set) {
  for (int k = 0; k < set->n; k++) series_free(&set->items[k]);
  free(set->items);
  *set = (rg_series_set){0};
}

size_t rg_series_points(const rg_series_set *set) {
  size_t n = 0;
  for (int k = 0; k < set->n; k++)
    for (size_t i = 0; i < set->items[k].n; i++) n += isfinite(set->items[k].x[i]) && isfinite(set->items[k].y[i]);
  return n;
}

/* A new empty series of capacity CAP at the end of SET (takes NAME). */
static rg_svg_series *push_series(rg_series_set *set, char *name, size_t cap, bool band) {
  rg_svg_series *grown = realloc(set->items, (size_t)(set->n + 1) * sizeof *grown);
  if (!grown) {
    free(name);
    return NULL;
  }
  set->items = grown;
  rg_svg_series *s = &set->items[set->n];
  *s = (rg_svg_series){.name = name};
  size_t bytes = (cap ? cap : 1) * sizeof(double);
  double *x = malloc(bytes), *y = malloc(bytes), *lo = band ? malloc(bytes) : NULL, *hi = band ? malloc(bytes) : NULL;
  s->x = x, s->y = y, s->lo = lo, s->hi = hi;
  set->n++; /* counted now so that rg_series_set_free releases a partial one */
  if (!name || !x || !y || (band && (!lo || !hi))) return NULL;
  return s;
}

static void swap_down(double *a, size_t j) {
  double t = a[j];
  a[j] = a[j - 1];
  a[j - 1] = t;
}

/* Insertion sort by x, carrying y and the band: series are a few dozen
 * checkpoints long, and the sort must be stable. */
static void sort_by_x(rg_svg_series *s) {
  double *x = (double *)s->x, *y = (double *)s->y, *lo = (double *)s->lo, *hi = (double *)s->hi;
  for (size_t i = 1; i < s->n; i++)
    for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
      swap_down(x, j), swap_down(y, j);
      if (lo) swap_down(lo, j), swap_down(hi, j);
    }
}

/* "PREFIX<v1> / <v2>" for row R, malloc'd. */
static char *group_name(const rg_csv *t, size_t r, const int *gcols, int n_group, const char *prefix) {
  size_t len = strlen(prefix) + 1;
  for (int g = 0; g < n_group; g++) len += strlen(t->rows[r][gcols[g]]) + 3;
  char *name = malloc(len);
  if (!name) return NULL;
  strcpy(name, prefix);
  for (int g = 0; g < n_group; g++) {
    if (g) strcat(name, " / ");
    strcat(name, t->rows[r][gcols[g]]);
  }
  return name;
}

static int same_group(const rg_csv *t, size_t a, size_t b, const int *gcols, int n_group) {
  for (int g = 0; g < n_group; g++)
    if (strcmp(t->rows[a][gcols[g]], t->rows[b][gcols[g]]) != 0) return 0;
  return 1;
}

enum { MAX_GROUP_COLS = 8 };

int rg_series_from_csv(rg_series_set *set, const rg_csv *t, const char *x_col, const char *y_col, const char *lo_col,
                       const char *hi_col, const char *const *group_cols, int n_group, const char *prefix) {
  if (n_group > MAX_GROUP_COLS) return rg_error_set("%s: too many group columns", t->path);
  int xc = rg_csv_require_col(t, x_col), yc = rg_csv_require_col(t, y_col);
  int lc = lo_col ? rg_csv_require_col(t, lo_col) : -2, hc = hi_col ? rg_csv_require_col(t, hi_col) : -2;
  if (xc < 0 || yc < 0 || lc == -1 || hc == -1) return -1;
  int gcols[MAX_GROUP_COLS];
  for (int g = 0; g < n_group; g++)
    if ((gcols[g] = rg_csv_require_col(t, group_cols[g])) < 0) return -1;
  bool band = lo_col && hi_col;
  /* Each row starts a group unless an earlier row already has its values. */
  for (size_t r = 0; r < t->n_rows; r++) {
    size_t first = 0;
    while (first < r && !same_group(t, first, r, gcols, n_group)) first++;
    if (first < r) continue;
    rg_svg_series *s = push_series(set, group_name(t, r, gcols, n_group, prefix), t->n_rows - r, band);
    if (!s) return rg_error_set("out of memory");
    for (size_t q = r; q < t->n_rows; q++) {
      if (!same_group(t, r, q, gcols, n_group)) continue;
      size_t i = s->n;
      if (rg_csv_number(t, q, xc, (double *)&s->x[i]) < 0 || rg_csv_number(t, q, yc, (double *)&s->y[i]) < 0) return -1;
      if (band && (rg_csv_number(t, q, lc, (double *)&s->lo[i]) < 0 || rg_csv_number(t, q, hc, (double *)&s->hi[i]) < 0))
        return -1;
      s->n++;
    }
    sort_by_x(s);
  }
  return 0;
}

int rg_series_add(rg_series_set *set, const char *name, size_t n, const double *x, const double *y, bool dashed) {
  rg_svg_series *s = push_series(set, strdup(name), n, false);
  if (!s) return rg_error_set("out of memory");
  memcpy((double *)s->x, x, n * sizeof *x);
  memcpy((double *)s->y, y, n * sizeof *y);
  s->n = n;
  s->dashed = dashed;
  sort_by_x(s);
  return 0;
}

void rg_grid_free(rg_grid *g) {
  free(g->x);
  free(g->y);
  free(g->value);
  *g = (rg_grid){0};
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts V[0..N) and drops repeats; returns the distinct count. */
static size_t sort_unique(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
  return k;
}

static size_t index_of(const double *v, size_t n, double x) {
  const double *hit = bsearch(&x, v, n, sizeof *v, cmp_double);
  return (size_t)(hit - v);
}

int rg_grid_from_csv(rg_grid *g, const rg_csv *t, const char *x_col, const char *y_col, const char *v_col,
                     const char *filter_col, double filter_value) {
  *g = (rg_grid){0};
  int xc = rg_csv_require_col(t, x_col), yc = rg_csv_require_col(t, y_col), vc = rg_csv_require_col(t, v_col);
  int fc = filter_col ? rg_csv_require_col(t, filter_col) : -2;
  if (xc < 0 || yc < 0 || vc < 0 || fc == -1) return -1;
  size_t n = 0;
  bool *filled = NULL;
  bool *keep = calloc(t->n_rows ? t->n_rows : 1, sizeof *keep);
  g->x = malloc((t->n_rows + 1) * sizeof *g->x);
  g->y = malloc((t->n_rows + 1) * sizeof *g->y);
  int rc = keep && g->x && g->y ? 0 : rg_error_set("out of memory");
  for (size_t r = 0; r < t->n_rows && rc == 0; r++) {
    double f;
    if (filter_col && (rc = rg_csv_number(t, r, fc, &f)) < 0) break;
    if (filter_col && f != filter_value) continue;
    if ((rc = rg_csv_number(t, r, xc, &g->x[n])) < 0 || (rc = rg_csv_number(t, r, yc, &g->y[n])) < 0) break;
    if (!isfinite(g->x[n]) || !isfinite(g->y[n]))
      rc = rg_error_set("%s: row %zu: %s and %s must be numbers", t->path, r + 1, x_col, y_col);
    keep[r] = true, n++;
  }
  if (rc == 0) {
    g->n_x = sort_unique(g->x, n);
    g->n_y = sort_unique(g->y, n);
    g->value = malloc((g->n_x * g->n_y + 1) * sizeof *g->value);
    filled = calloc(g->n_x * g->n_y + 1, sizeof *filled); /* a NaN value still fills its cell */
    if (!g->value || !filled) rc = rg_error_set("out of memory");
  }
  for (size_t i = 0; rc == 0 && i < g->n_x * g->n_y; i++) g->value[i] = NAN;
  for (size_t r = 0; r < t->n_rows && rc == 0; r++) {
    if (!keep[r]) continue;
    double x, y, v;
    rg_csv_number(t, r, xc, &x), rg_csv_number(t, r, yc, &y); /* parsed above */
    if ((rc = rg_csv_number(t, r, vc, &v)) < 0) break;
    size_t cell = index_of(g->y, g->n_y, y) * g->n_x + index_of(g->x, g->n_x, x);
    if (filled[cell]) rc = rg_error_set("%s: row %zu: a second row for %s %g, %s %g", t->path, r + 1, x_col, x, y_col, y);
    g->value[cell] = v, filled[cell] = true;
  }
  free(keep);
  free(filled);
  if (rc < 0) rg_grid_free(g);
  return rc;
}
