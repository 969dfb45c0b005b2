/* spectrum.h: scalar summaries of a singular-value spectrum (float64).
 *
 * Input: k >= 1 singular values s_i >= 0 (any order). Conventions, see
 * docs/refusal-geometry.md section 10 (/work/shared/docs):
 *   erank_sigma  Roy & Vetterli (2007): exp(H(p)), p_i = s_i / sum s
 *   erank_sigma2 the same with p_i = s_i^2 / sum s^2 (eigenvalue weights)
 *   PR           participation ratio (sum l)^2 / sum l^2 with l_i = s_i^2
 * Zero singular values contribute 0 to the entropy (0 log 0 = 0), so padding a
 * spectrum with zeros changes nothing. An all-zero spectrum (a zero matrix)
 * has no distribution to take the entropy of: every measure is NaN. A
 * negative or non-finite value is invalid input and also gives NaN.
 */
#ifndef RG_GEOMETRY_SPECTRUM_H
#define RG_GEOMETRY_SPECTRUM_H

double rg_erank_sigma(const double *s, int k);
double rg_erank_sigma2(const double *s, int k);
double rg_participation_ratio(const double *s, int k);

/* All three measures of one matrix. */
typedef struct {
  double erank_sigma;
  double erank_sigma2;
  double participation_ratio;
} rg_spectrum_measures;

/* Singular values of A (m x n, row-major) and the three measures. Returns 0,
 * or -1 with the error set (LAPACK failure, no memory). */
int rg_matrix_spectrum_measures(const double *A, int m, int n, rg_spectrum_measures *out);

#endif
