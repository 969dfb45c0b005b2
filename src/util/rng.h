/* rng.h: splitmix64, the one 64-bit generator refgeo's seeded draws start
 * from (prompt subsets, sampling seeds, perturbation factors, synthetic
 * weights). Constants from Steele, Lea & Flood, "Fast splittable
 * pseudorandom number generators" (OOPSLA 2014), as in Vigna's reference
 * splitmix64.c. */
#ifndef RG_UTIL_RNG_H
#define RG_UTIL_RNG_H

#include <stdint.h>

/* The finaliser: a bijective 64-bit mix of X + the golden-ratio increment. */
static inline uint64_t rg_mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The next value of the stream whose state is *STATE (advances it). */
static inline uint64_t rg_splitmix64(uint64_t *state) {
  uint64_t x = *state;
  *state += 0x9e3779b97f4a7c15ull;
  return rg_mix64(x);
}

#endif
