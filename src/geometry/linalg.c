/* linalg.c: the float64 vector and matrix helpers of the geometry measures (linalg.h). */
#include "geometry/linalg.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

double rg_vec_dot(const double *a, const double *b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

double rg_vec_norm(const double *a, int n) { return sqrt(rg_vec_dot(a, a, n)); }

double rg_vec_cos(const double *a, const double *b, int n) {
  double na = rg_vec_norm(a, n), nb = rg_vec_norm(b, n);
  if (na == 0.0 || nb == 0.0) return NAN;
  double c = rg_vec_dot(a, b, n) / (na * nb);
  return c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c;
}

/* 2 atan2(|a^ - sign b^|, |a^ + sign b^|): the angle between a and sign*b. */
static double kahan_angle(const double *a, const double *b, int n, double sign) {
  double na = rg_vec_norm(a, n), nb = rg_vec_norm(b, n);
  if (na == 0.0 || nb == 0.0) return NAN;
  double diff = 0.0, sum = 0.0;
  for (int i = 0; i < n; i++) {
    double x = a[i] / na, y = sign * b[i] / nb;
    diff += (x - y) * (x - y);
    sum += (x + y) * (x + y);
  }
  return 2.0 * atan2(sqrt(diff), sqrt(sum));
}

double rg_vec_angle(const double *a, const double *b, int n) { return kahan_angle(a, b, n, 1.0); }

double rg_line_angle(const double *a, const double *b, int n) {
  return kahan_angle(a, b, n, rg_vec_dot(a, b, n) < 0.0 ? -1.0 : 1.0);
}

int rg_matrix_normalize_rows(double *A, int m, int n) {
  int zero = 0;
  for (int i = 0; i < m; i++) {
    double *row = A + (size_t)i * n;
    double norm = rg_vec_norm(row, n);
    if (norm == 0.0) {
      zero++;
      continue;
    }
    for (int j = 0; j < n; j++) row[j] /= norm;
  }
  return zero;
}

void rg_matrix_subtract_row(double *A, int m, int n, const double *v) {
  for (int j = 0; j < n; j++) {
    double c;
    if (v) {
      c = v[j];
    } else {
      c = 0.0;
      for (int i = 0; i < m; i++) c += A[(size_t)i * n + j];
      c = m > 0 ? c / m : 0.0;
    }
    for (int i = 0; i < m; i++) A[(size_t)i * n + j] -= c;
  }
}

int rg_singular_values(const double *A, int m, int n, double *s) {
  if (m <= 0 || n <= 0) return rg_error_set("singular values: empty %d x %d matrix", m, n);
  size_t count = (size_t)m * (size_t)n;
  double *work = malloc(count * sizeof *work);
  if (!work) return rg_error_set("singular values: out of memory for a %d x %d matrix", m, n);
  memcpy(work, A, count * sizeof *work); /* dgesdd destroys its input */
  /* No vectors are computed, but LAPACKE's row-major path still checks that
   * ldu >= m and ldvt >= n, so pass those. */
  lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', m, n, work, n, s, NULL, m, NULL, n);
  free(work);
  if (info != 0) return rg_error_set("singular values: LAPACK dgesdd failed (info %d) on a %d x %d matrix", (int)info, m, n);
  return 0;
}
