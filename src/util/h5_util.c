/* h5_util.c: HDF5 attributes and step-group names shared by refgeo's HDF5 files (h5_util.h). */
#include "util/h5_util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rg_h5_init(void) {
  /* H5dont_atexit counts only before HDF5's first call; refgeo's HDF5 use
   * all starts here, and a later call does nothing */
  H5dont_atexit();
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

hid_t rg_h5_utf8_type(void) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

int rg_h5_put_attr(hid_t loc, const char *name, hid_t type, int n, const void *data) {
  hsize_t dims = n < 0 ? 1 : (hsize_t)n;
  hid_t space = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dims, NULL);
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = a < 0 ? -1 : H5Awrite(a, type, data);
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  return rc < 0 ? -1 : 0;
}

int rg_h5_put_str(hid_t loc, const char *name, const char *value) {
  hid_t t = rg_h5_utf8_type();
  const char *v = value ? value : "";
  int rc = rg_h5_put_attr(loc, name, t, -1, &v);
  H5Tclose(t);
  return rc;
}

int rg_h5_put_strs(hid_t loc, const char *name, const char *const *values, int n) {
  hid_t t = rg_h5_utf8_type();
  int rc = rg_h5_put_attr(loc, name, t, n, values);
  H5Tclose(t);
  return rc;
}

int rg_h5_read_int(hid_t loc, const char *name, long long *v) {
  if (H5Aexists(loc, name) <= 0) return -1;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t space = H5Aget_space(a);
  int ok = space >= 0 && H5Sget_simple_extent_npoints(space) == 1 && H5Aread(a, H5T_NATIVE_LLONG, v) >= 0;
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return ok ? 0 : -1;
}

char *rg_h5_read_str(hid_t loc, const char *name) {
  if (H5Aexists(loc, name) <= 0) return NULL;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return NULL;
  char *out = NULL;
  hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
  if (ft >= 0 && H5Tget_class(ft) == H5T_STRING && space >= 0 && H5Sget_simple_extent_npoints(space) == 1) {
    if (H5Tis_variable_str(ft) > 0) {
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      H5Tset_cset(mt, H5Tget_cset(ft));
      char *v = NULL;
      if (H5Aread(a, mt, &v) >= 0 && v) {
        out = strdup(v);
        H5free_memory(v);
      }
      H5Tclose(mt);
    } else {
      size_t sz = H5Tget_size(ft);
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, sz + 1);
      out = calloc(sz + 1, 1);
      if (out && H5Aread(a, mt, out) < 0) {
        free(out);
        out = NULL;
      }
      H5Tclose(mt);
    }
  }
  if (ft >= 0) H5Tclose(ft);
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return out;
}

void rg_h5_step_name(long step, char *buf, size_t n) { snprintf(buf, n, "step_%ld", step); }

int rg_h5_step_of_name(const char *name, long *step) {
  if (strncmp(name, "step_", 5) != 0 || !name[5]) return -1;
  long v = 0;
  for (const char *p = name + 5; *p; p++) {
    if (*p < '0' || *p > '9' || v > (LONG_MAX - 9) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  *step = v;
  return 0;
}
