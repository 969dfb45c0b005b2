/* subspace.h: principal angles between subspaces (float64).
 *
 * Each subspace is given by spanning vectors stored as the ROWS of a
 * row-major matrix (k vectors of length d), the way directions are stored
 * everywhere in refgeo. The result matches scipy.linalg.subspace_angles on
 * the transposed (column) matrices:
 *   1. orthonormal bases by thin SVD, dropping singular values at or below
 *      max(s) * eps * max(d, k) (scipy.linalg.orth's rank rule), so
 *      rank-deficient spanning sets are fine;
 *   2. cosines = singular values of Qa^T Qb;
 *   3. Knyazev & Argentati (2002): angles whose cosine^2 >= 1/2 come from the
 *      sines, i.e. the singular values of Qb - Qa Qa^T Qb, because arccos of a
 *      cosine near 1 loses about half the digits.
 * Angles are in radians, in [0, pi/2], sorted descending (as scipy).
 */
#ifndef RG_GEOMETRY_SUBSPACE_H
#define RG_GEOMETRY_SUBSPACE_H

/* A is ka x d, B is kb x d. Writes min(rank A, rank B) angles to angles
 * (room for min(ka, kb) is enough) and returns their count, or -1 with the
 * error set (bad shape, non-finite input, LAPACK failure, no memory). A zero
 * matrix has rank 0, so the count is 0. */
int rg_subspace_angles(const double *A, int ka, const double *B, int kb, int d, double *angles);

#endif
