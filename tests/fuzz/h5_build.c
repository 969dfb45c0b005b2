/* h5_build.c: a valid HDF5 file built from a fuzz input read as choices (h5_build.h). */
#include "h5_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t take_u8(choices *c) {
  if (!c->n) return 0;
  c->n--;
  return *c->p++;
}

uint32_t take_u32(choices *c) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = v << 8 | take_u8(c);
  return v;
}

uint64_t take_count(choices *c) {
  uint8_t k = take_u8(c);
  if (k < 200) return k % 9;
  if (k < 250) return take_u8(c);
  return take_u32(c);
}

const char *take_of(choices *c, const char *const *names, int n) { return names[take_u8(c) % n]; }

void h5_step_name(choices *c, char *buf, size_t size) {
  switch (take_u8(c) % 6) {
  case 0: snprintf(buf, size, "step_"); break;
  case 1: snprintf(buf, size, "step_x%u", take_u8(c)); break;
  case 2: snprintf(buf, size, "step_%u%u%u", take_u32(c), take_u32(c), take_u32(c)); break;
  case 3: snprintf(buf, size, "steps_%u", take_u8(c)); break;
  default: snprintf(buf, size, "step_%u", take_u32(c) % 100000);
  }
}

hid_t h5_create(const char *path) {
  /* Built in memory and written out once at close (the core driver with a
   * backing store) rather than in many small writes. */
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 1);
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  return file;
}

hid_t h5_link_props(void) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

void h5_put_attr(choices *c, hid_t loc, const char *name, long long value, const char *text) {
  uint8_t kind = take_u8(c) % 8;
  if (kind == 0) return;
  hsize_t dim = take_count(c) % 8192; /* up to twice the reader's bound on eoi_token_ids */
  hid_t space = kind == 5 && dim != 1 ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_SCALAR);
  hid_t type = -1;
  void *buf = NULL;
  long long *ints = NULL;
  double real = (double)value;
  uint8_t byte = (uint8_t)value;
  const char *str = text;
  switch (kind) {
  case 1: /* the writer's form: a native int */
  case 5: /* an int array of DIM elements (as eoi_token_ids), or a scalar */
    if (take_u8(c) & 1) value = (long long)(int32_t)take_u32(c);
    ints = calloc(dim ? dim : 1, sizeof *ints);
    for (hsize_t i = 0; i < dim && ints; i++) ints[i] = i == 0 ? value : (long long)(int32_t)take_u32(c);
    if (ints && dim == 0) ints[0] = value;
    type = H5Tcopy(take_u8(c) & 1 ? H5T_NATIVE_LLONG : H5T_NATIVE_INT32);
    if (ints && H5Tget_size(type) == 4)
      for (hsize_t i = 0; i < (dim ? dim : 1); i++) ((int32_t *)ints)[i] = (int32_t)ints[i];
    buf = ints;
    break;
  case 2:
    type = H5Tcopy(H5T_NATIVE_DOUBLE);
    buf = &real;
    break;
  case 3: /* vlen string */
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    buf = &str;
    break;
  case 4: /* fixed-length string, possibly cut short */
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(text) ? strlen(text) - take_u8(c) % (strlen(text) + 1) + 1 : 1);
    buf = (void *)text;
    break;
  case 6:
    type = H5Tcopy(H5T_NATIVE_UINT8);
    buf = &byte;
    break;
  default: /* an empty string */
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    str = "";
    buf = &str;
  }
  hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    H5Awrite(a, type, buf);
    H5Aclose(a);
  }
  free(ints);
  H5Tclose(type);
  H5Sclose(space);
}

void h5_put_floats(choices *c, hid_t loc, const char *path, const hsize_t *hint, int hint_rank) {
  int rank = take_u8(c) % 8 == 0 ? 1 + take_u8(c) % 5 : hint_rank;
  hsize_t dims[5], chunk[5], total = 1;
  for (int i = 0; i < rank; i++) {
    uint8_t k = take_u8(c);
    dims[i] = i < hint_rank && hint[i] && k < 200 ? hint[i] : take_count(c);
    chunk[i] = i == rank - 1 && dims[i] ? (dims[i] < 4096 ? dims[i] : 4096) : 1;
    total *= dims[i] ? dims[i] : 1;
  }
  hid_t type;
  switch (take_u8(c) % 4) {
  case 0: type = H5Tcopy(H5T_IEEE_F32LE); break;
  case 1: /* IEEE binary16 as capture/acts_h5.h describes the float16 files */
    type = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(type, 15, 10, 5, 0, 10);
    H5Tset_size(type, 2);
    H5Tset_ebias(type, 15);
    break;
  case 2: type = H5Tcopy(H5T_IEEE_F64LE); break;
  default: type = H5Tcopy(H5T_NATIVE_INT);
  }
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, rank, chunk);
  hid_t lcpl = h5_link_props();
  hid_t d = H5Dcreate2(loc, path, type, space, lcpl, dcpl, H5P_DEFAULT);
  if (d >= 0 && total <= 4096) {
    float *v = malloc(total * sizeof *v);
    for (hsize_t i = 0; v && i < total; i++) v[i] = (float)(int8_t)take_u8(c);
    if (v) H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    free(v);
  }
  if (d >= 0) H5Dclose(d);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(type);
}
