/* asr_stats.h: confidence intervals and tests for an attack success rate,
 * i.e. for k successes out of n independent binary judgments.
 *
 * Plain functions of numbers; nothing is allocated.
 */
#ifndef RG_ASR_STATS_H
#define RG_ASR_STATS_H

/* z for a two-sided 95% interval: the 0.975 quantile of the standard normal
 * (scipy.stats.norm.ppf(0.975)). */
#define RG_Z95 1.959963984540054

/* Wilson score interval (Wilson 1927) for k of n at normal quantile z:
 *   centre = (k/n + z^2/(2n)) / (1 + z^2/n)
 *   half   = z / (1 + z^2/n) * sqrt(k/n (1 - k/n) / n + z^2 / (4 n^2))
 * clipped to [0, 1]. Returns 0, or -1 (error set) unless 0 <= k <= n, n > 0. */
int rg_wilson_interval(long k, long n, double z, double *lo, double *hi);

/* Exact two-sided binomial test of H0: success probability = p, computed the
 * way scipy.stats.binomtest(k, n, p, alternative="two-sided") does: the sum of
 * the probabilities of all outcomes no more likely than the observed one,
 * with scipy's relative tolerance 1 + 1e-7 on "no more likely" (so that
 * outcomes tied with k up to rounding count), capped at 1; exactly 1 when
 * k == n p. Returns the p-value, or -1 (error set) on k, n, p out of range. */
double rg_binom_test_two_sided(long k, long n, double p);

/* The binomial probability mass C(n, k) p^k (1-p)^(n-k), via lgamma. */
double rg_binom_pmf(long k, long n, double p);

#endif
