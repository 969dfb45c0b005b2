/* h5_util.h: HDF5 attributes and step-group names, shared by refgeo's HDF5
 * files (capture/acts_h5*.c, geometry/directions_h5.c).
 *
 * Writers return 0 or -1 (no error message: the caller names the file).
 * Readers are defensive, since files come from outside: a missing attribute,
 * a wrong class or more than one element gives -1 / NULL. */
#ifndef RG_H5_UTIL_H
#define RG_H5_UTIL_H

#include <hdf5.h>
#include <stddef.h>

/* Called before a file is opened or created (every entry point of the
 * readers and writers does): HDF5's errors go through rg_error, not stderr,
 * and HDF5 is kept from closing files at process exit. refgeo closes every
 * file it opens, so that exit handler has nothing left to do but one thing:
 * HDF5 1.10 (Debian 12 ships 1.10.8) frees a file whose close failed on a
 * write error, ENOSPC say, yet keeps its id, and its exit handler closes it
 * again and crashes (HDFGroup/hdf5 PR #2291, HDFFV-11052, fixed in 1.14).
 * Without the handler the reported error is the outcome. */
void rg_h5_init(void);

/* A variable-length UTF-8 string type; the caller closes it (H5Tclose). */
hid_t rg_h5_utf8_type(void);

/* Writes attribute NAME of type TYPE with N elements (N < 0: scalar),
 * replacing one of that name. */
int rg_h5_put_attr(hid_t loc, const char *name, hid_t type, int n, const void *data);
/* A scalar UTF-8 string (NULL writes ""). */
int rg_h5_put_str(hid_t loc, const char *name, const char *value);
/* An array of N UTF-8 strings. */
int rg_h5_put_strs(hid_t loc, const char *name, const char *const *values, int n);

/* A one-element integer attribute into *V. */
int rg_h5_read_int(hid_t loc, const char *name, long long *v);
/* A one-element string attribute (variable or fixed length) as a malloc'd
 * copy the caller frees. */
char *rg_h5_read_str(hid_t loc, const char *name);

/* Step groups are named "step_<N>" (N >= 0, decimal). */
void rg_h5_step_name(long step, char *buf, size_t n);
/* The N of a "step_<N>" name into *STEP; -1 for any other name. */
int rg_h5_step_of_name(const char *name, long *step);

#endif
