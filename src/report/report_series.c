#include "report/report_series.h"

#include <math.h>
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
