/* linalg.h: the float64 vector and matrix helpers the geometry measures share.
 *
 * Matrices are dense, row-major, caller-owned double arrays; a "direction
 * matrix" holds one direction per row (k rows of length d). Functions never
 * keep pointers to their arguments.
 */
#ifndef RG_GEOMETRY_LINALG_H
#define RG_GEOMETRY_LINALG_H

double rg_vec_dot(const double *a, const double *b, int n);
double rg_vec_norm(const double *a, int n);

/* cos(a, b) = a.b / (|a| |b|), clamped to [-1, 1]. NaN when either vector is
 * all zeros (the direction is undefined, and NaN keeps that visible in the
 * CSVs instead of pretending the vectors are orthogonal). */
double rg_vec_cos(const double *a, const double *b, int n);

/* The angle between a and b in radians, in [0, pi]; NaN for a zero vector.
 * Computed as 2 atan2(|a^ - b^|, |a^ + b^|) (Kahan) rather than acos(cos),
 * which loses half the digits for nearly parallel vectors. */
double rg_vec_angle(const double *a, const double *b, int n);

/* The angle between the lines spanned by a and b, arccos(|cos|) in [0, pi/2]
 * (a direction and its negation span the same line); NaN for a zero vector.
 * Same stable formula as rg_vec_angle with b's sign matched to a. */
double rg_line_angle(const double *a, const double *b, int n);

/* Scales each row of A (m x n) to unit norm. All-zero rows stay zero; the
 * return value is how many there were. */
int rg_matrix_normalize_rows(double *A, int m, int n);

/* Subtracts v (length n) from every row of A (m x n). With v == NULL the
 * column means are subtracted (ordinary centring). */
void rg_matrix_subtract_row(double *A, int m, int n, const double *v);

/* The min(m, n) singular values of A (m x n), descending, into s, computed by
 * LAPACK dgesdd without singular vectors (A itself is not modified).
 * Returns 0, or -1 with the error set (bad shape, no memory, no convergence). */
int rg_singular_values(const double *A, int m, int n, double *s);

#endif
