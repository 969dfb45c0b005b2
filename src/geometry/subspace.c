/* subspace.c: principal angles between subspaces (subspace.h). */
#include "geometry/subspace.h"

#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/linalg.h"
#include "util/error.h"

/* Orthonormal basis of the span of the k rows of V (k x d, row-major). The
 * same memory read column-major is the d x k matrix whose columns are those
 * vectors, so LAPACK sees scipy's layout without a transpose. On success *Q
 * is a malloc'd column-major d x rank matrix and the rank is returned. */
static int orthonormal_basis(const double *V, int k, int d, double **Q) {
  *Q = NULL;
  int kmin = k < d ? k : d;
  size_t count = (size_t)k * (size_t)d;
  for (size_t i = 0; i < count; i++)
    if (!isfinite(V[i])) return rg_error_set("subspace angles: non-finite value in a %d x %d matrix", k, d);
  double *a = malloc(count * sizeof *a);
  double *u = malloc((size_t)d * (size_t)kmin * sizeof *u);
  double *s = malloc((size_t)kmin * sizeof *s);
  double *superb = malloc((size_t)(kmin > 1 ? kmin : 2) * sizeof *superb);
  int rank = -1;
  if (!a || !u || !s || !superb) {
    rg_error_set("subspace angles: out of memory for a %d x %d matrix", k, d);
    goto done;
  }
  memcpy(a, V, count * sizeof *a);
  lapack_int info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'S', 'N', d, k, a, d, s, u, d, NULL, 1, superb);
  if (info != 0) {
    rg_error_set("subspace angles: LAPACK dgesvd failed (info %d)", (int)info);
    goto done;
  }
  /* scipy.linalg.orth: keep s > max(s) * eps * max(M, N). */
  double tol = s[0] * DBL_EPSILON * (d > k ? d : k);
  rank = 0;
  while (rank < kmin && s[rank] > tol) rank++;
  *Q = u;
  u = NULL;
done:
  free(a);
  free(u);
  free(s);
  free(superb);
  return rank;
}

int rg_subspace_angles(const double *A, int ka, const double *B, int kb, int d, double *angles) {
  if (ka <= 0 || kb <= 0 || d <= 0) return rg_error_set("subspace angles: empty input (%d and %d vectors of length %d)", ka, kb, d);
  double *qa = NULL, *qb = NULL, *c = NULL, *sigma = NULL, *resid = NULL, *mu = NULL;
  int n = -1;
  int ra = orthonormal_basis(A, ka, d, &qa);
  int rb = ra < 0 ? -1 : orthonormal_basis(B, kb, d, &qb);
  if (ra < 0 || rb < 0) goto done;
  n = ra < rb ? ra : rb;
  if (n == 0) goto done;

  /* Cosines: singular values of Qa^T Qb (ra x rb, column-major). */
  c = malloc((size_t)ra * (size_t)rb * sizeof *c);
  sigma = malloc((size_t)n * sizeof *sigma);
  mu = malloc((size_t)n * sizeof *mu);
  resid = malloc((size_t)d * (size_t)n * sizeof *resid); /* d x min(ra, rb) */
  if (!c || !sigma || !mu || !resid) {
    n = rg_error_set("subspace angles: out of memory");
    goto done;
  }
  cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, ra, rb, d, 1.0, qa, d, qb, d, 0.0, c, ra);
  /* A column-major ra x rb matrix is a row-major rb x ra one: same spectrum. */
  if (rg_singular_values(c, rb, ra, sigma) != 0) {
    n = -1;
    goto done;
  }

  /* Sines: singular values of the part of the smaller basis outside the
   * larger subspace, Qb - Qa (Qa^T Qb) or Qa - Qb (Qa^T Qb)^T. */
  if (ra >= rb) {
    memcpy(resid, qb, (size_t)d * (size_t)rb * sizeof *resid);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, d, rb, ra, -1.0, qa, d, c, ra, 1.0, resid, d);
  } else {
    memcpy(resid, qa, (size_t)d * (size_t)ra * sizeof *resid);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, d, ra, rb, -1.0, qb, d, c, ra, 1.0, resid, d);
  }
  if (rg_singular_values(resid, n, d, mu) != 0) {
    n = -1;
    goto done;
  }

  /* Angle i (descending) has cosine sigma[n-1-i] (cosines are descending)
   * and sine mu[i] (sines are descending too). */
  for (int i = 0; i < n; i++) {
    double cosv = sigma[n - 1 - i];
    if (cosv * cosv >= 0.5)
      angles[i] = asin(mu[i] > 1.0 ? 1.0 : mu[i]);
    else
      angles[i] = acos(cosv > 1.0 ? 1.0 : cosv < -1.0 ? -1.0 : cosv);
  }
done:
  free(qa);
  free(qb);
  free(c);
  free(sigma);
  free(mu);
  free(resid);
  return n;
}
