/* h5_build.h: writing a valid HDF5 file from a fuzz input read as choices,
 * for the structure-aware HDF5 harnesses (fuzz_acts_h5.c says why they are
 * structure-aware: libhdf5 does not survive arbitrary bytes).
 *
 * Every take_* draws bytes from the input and returns 0 once it is used up,
 * so any input describes some file and short inputs describe small ones.
 * The h5_put_* helpers let the input choose, for each object a reader
 * expects, between the form refgeo writes and the forms a foreign or corrupt
 * file could hold (absent, another class or size, another rank, a huge
 * extent). HDF5's refusals while writing are expected and ignored.
 */
#ifndef RG_FUZZ_H5_BUILD_H
#define RG_FUZZ_H5_BUILD_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t *p;
  size_t n;
} choices;

uint8_t take_u8(choices *c);
uint32_t take_u32(choices *c); /* big-endian, from 4 bytes */
/* A count: mostly 0..8, sometimes 0..255, sometimes anything below 2^32. */
uint64_t take_count(choices *c);
/* One of N names. */
const char *take_of(choices *c, const char *const *names, int n);

/* "step_<N>" mostly, else a malformed or huge step group name. */
void h5_step_name(choices *c, char *buf, size_t size);

/* Creates PATH (truncating it) for writing; a negative id on failure. */
hid_t h5_create(const char *path);

/* An attribute NAME on LOC whose kind the input picks: absent, a scalar or
 * array integer of VALUE (or any value), a float, a vlen or fixed-length
 * string of TEXT (possibly cut short), a uint8, or an empty string. */
void h5_put_attr(choices *c, hid_t loc, const char *name, long long value, const char *text);

/* A chunked dataset at PATH below LOC (intermediate groups created) of a
 * float16/float32/float64/int type the input picks. Its rank is mostly
 * HINT_RANK, and dimension i mostly HINT[i] (0: the input's count), so that
 * readers get past their shape checks; otherwise rank and extents are the
 * input's, huge ones included (unwritten chunks cost no bytes). Datasets of
 * at most 4096 elements are filled with values from the input. */
void h5_put_floats(choices *c, hid_t loc, const char *path, const hsize_t *hint, int hint_rank);

/* Link-creation properties that create missing intermediate groups. */
hid_t h5_link_props(void);

#endif
