/* fuzz_acts_h5: refgeo's HDF5 activation reader (rg_acts_reader_open, then
 * every step's checkpoint, token ids and activation sites, as `refgeo
 * geometry` reads them) on files BUILT from the fuzz input.
 *
 * Why structure-aware: libhdf5 itself is not robust to arbitrary bytes. Its
 * object-header, B-tree and heap decoders have known crashes and unbounded
 * reads on corrupt files (e.g. CVE-2020-10810, CVE-2021-45830 and many other
 * heap overflows filed against the 1.10-1.14 decoders) that refgeo cannot
 * fix, so byte-level mutation would spend the campaign on HDF5's bugs and
 * stop at the first of them. refgeo's own risk is different: a well-formed
 * HDF5 file whose CONTENT is hostile (wrong shapes, dtypes, attribute types,
 * missing or misnamed datasets and groups, huge claimed extents). This
 * harness therefore reads the input as a list of choices and writes a valid
 * HDF5 file with the HDF5 API from them, then runs the reader on it:
 *   root attributes  format, n_layers, d_model, eoi_token_ids, model_id,
 *                    chat_template: present or not, right or wrong class
 *                    (int/float/string, vlen/fixed), scalar or array, values
 *   step groups      name (step_<N>, step_, step_x, a huge N), attributes
 *                    complete / checkpoint / step of any of those kinds
 *   datasets         prompts/<split>/token_ids (vlen int32, fixed int, 2-d,
 *                    rows of any length) and acts/<split>/<site> (float32,
 *                    float16, float64, int, any rank, any extent; chunked,
 *                    so a huge extent costs no bytes in the file), under the
 *                    right or wrong split and site names
 * Every read draws bytes from the input and returns 0 once it is used up, so
 * any input describes some file and short inputs describe small ones.
 */
#include <hdf5.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/acts_h5_read.h"
#include "fuzz_util.h"

/* ---------------------------------------------------------------- input as choices */

typedef struct {
  const uint8_t *p;
  size_t n;
} choices;

static uint8_t take_u8(choices *c) {
  if (!c->n) return 0;
  c->n--;
  return *c->p++;
}

static uint32_t take_u32(choices *c) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = v << 8 | take_u8(c);
  return v;
}

/* A count: mostly small, sometimes anything up to 2^32 - 1. */
static uint64_t take_count(choices *c) {
  uint8_t k = take_u8(c);
  if (k < 200) return k % 9;
  if (k < 250) return take_u8(c);
  return take_u32(c);
}

/* One of N names. */
static const char *take_of(choices *c, const char *const *names, int n) { return names[take_u8(c) % n]; }

/* ---------------------------------------------------------------- writing */

static const char *const SPLITS[] = {"harmful_train", "harmless_train", "harmful_val", "", "a/b", "harmful_train "};
static const char *const SITES[] = {"resid_pre", "attn_out",  "resid_mid",   "mlp_out",
                                    "resid_post", "resid_pr", "hook_resid_pre", "blocks.0.hook_resid_pre"};
enum { N_SPLITS = sizeof SPLITS / sizeof SPLITS[0], N_SITES = sizeof SITES / sizeof SITES[0] };

/* An attribute NAME on LOC whose kind the input picks: absent, a scalar or
 * array integer of the given (or any) value, a float, a vlen or fixed
 * string (TEXT), or a uint8. */
static void put_attr(choices *c, hid_t loc, const char *name, long long value, const char *text) {
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

/* Creates the groups of PATH below LOC (H5Pset_create_intermediate_group). */
static hid_t link_props(void) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

static void put_token_ids(choices *c, hid_t step, const char *split) {
  char path[128];
  snprintf(path, sizeof path, "prompts/%s/token_ids", split);
  hsize_t n = take_count(c);
  hid_t lcpl = link_props();
  uint8_t kind = take_u8(c) % 4;
  if (kind == 0) { /* the writer's form: vlen int32, one row per prompt */
    hid_t type = H5Tvlen_create(H5T_NATIVE_INT32);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(step, path, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (d >= 0 && n <= 64) {
      hvl_t rows[64];
      int32_t ids[64][8];
      for (hsize_t i = 0; i < n; i++) {
        rows[i].len = take_u8(c) % 9;
        for (size_t k = 0; k < rows[i].len; k++) ids[i][k] = (int32_t)take_u32(c);
        rows[i].p = ids[i];
      }
      H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows);
    }
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
    H5Tclose(type);
  } else { /* a plain int dataset of rank 1 or 2, or a float one */
    hsize_t dims[2] = {n, take_count(c)};
    hid_t space = H5Screate_simple(kind == 2 ? 2 : 1, dims, NULL);
    hid_t d = H5Dcreate2(step, path, kind == 3 ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32, space, lcpl, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
  }
  H5Pclose(lcpl);
}

/* acts/<split>/<site>: a chunked dataset of the rank, extent and type the
 * input picks; small ones get data, large ones stay unwritten (fill value). */
static void put_site(choices *c, hid_t step, const char *split, const char *site, int n_layers, int d_model) {
  char path[160];
  snprintf(path, sizeof path, "acts/%s/%s", split, site);
  int rank = take_u8(c) % 8 == 0 ? 1 + take_u8(c) % 5 : 4;
  hsize_t dims[5], chunk[5], total = 1;
  for (int i = 0; i < rank; i++) {
    /* mostly the right layer and width, so the reader gets past its checks */
    uint8_t k = take_u8(c);
    dims[i] = (i == 0 && k < 200) ? (hsize_t)n_layers : (i == 3 && k < 200) ? (hsize_t)d_model : take_count(c);
    chunk[i] = i == rank - 1 && dims[i] ? (dims[i] < 4096 ? dims[i] : 4096) : 1;
    total *= dims[i] ? dims[i] : 1;
  }
  hid_t type;
  switch (take_u8(c) % 4) {
  case 0: type = H5Tcopy(H5T_IEEE_F32LE); break;
  case 1: /* IEEE binary16 as acts_h5.h describes the float16 files */
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
  hid_t lcpl = link_props();
  hid_t d = H5Dcreate2(step, path, type, space, lcpl, dcpl, H5P_DEFAULT);
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

static void put_step(choices *c, hid_t file, int n_layers, int d_model) {
  char name[64];
  switch (take_u8(c) % 6) {
  case 0: snprintf(name, sizeof name, "step_"); break;
  case 1: snprintf(name, sizeof name, "step_x%u", take_u8(c)); break;
  case 2: snprintf(name, sizeof name, "step_%u%u%u", take_u32(c), take_u32(c), take_u32(c)); break;
  case 3: snprintf(name, sizeof name, "steps_%u", take_u8(c)); break;
  default: snprintf(name, sizeof name, "step_%u", take_u32(c) % 100000);
  }
  hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return;
  put_attr(c, g, "complete", 1, "1");
  put_attr(c, g, "checkpoint", 0, "/ckpt/step-100");
  put_attr(c, g, "step", 100, "100");
  for (int n = take_u8(c) % 4; n > 0; n--) put_token_ids(c, g, take_of(c, SPLITS, N_SPLITS));
  for (int n = take_u8(c) % 6; n > 0; n--)
    put_site(c, g, take_of(c, SPLITS, N_SPLITS), take_of(c, SITES, N_SITES), n_layers, d_model);
  H5Gclose(g);
}

/* Writes the file the input describes; the path, or NULL if HDF5 refused. */
static const char *write_file(choices *c) {
  const char *path = fuzz_write("acts.h5", NULL, 0);
  /* Built in memory and written out once at close (the core driver with a
   * backing store): several times faster than many small writes. */
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 1);
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (file < 0) return NULL;
  int n_layers = 1 + take_u8(c) % 4, d_model = 1 + take_u8(c) % 8;
  put_attr(c, file, "format", 0, take_u8(c) % 8 ? "steer-acts/1" : "steer-acts/2");
  put_attr(c, file, "n_layers", n_layers, "2");
  put_attr(c, file, "d_model", d_model, "8");
  put_attr(c, file, "eoi_token_ids", 7, "7");
  put_attr(c, file, "model_id", 0, "tiny");
  put_attr(c, file, "chat_template", 0, "chatml");
  for (int n = take_u8(c) % 4; n > 0; n--) put_step(c, file, n_layers, d_model);
  H5Fclose(file);
  return path;
}

/* ---------------------------------------------------------------- reading */

static void read_all(const char *path) {
  rg_acts_reader *r = rg_acts_reader_open(path);
  if (!r) return;
  const rg_acts_reader_info *info = rg_acts_reader_info_of(r);
  for (int s = 0; s < info->n_steps; s++) {
    long step = info->steps[s];
    free(rg_acts_read_checkpoint(r, step));
    for (int sp = 0; sp < N_SPLITS; sp++) {
      int32_t **ids;
      int *lens, n;
      if (rg_acts_read_token_ids(r, step, SPLITS[sp], &ids, &lens, &n) == 0) rg_acts_token_ids_free(ids, lens, n);
      for (int site = 0; site < RG_HOOK_N_SITES; site++) {
        float *acts;
        int n_pos;
        if (rg_acts_read_site(r, step, SPLITS[sp], (rg_hook_site)site, &acts, &n, &n_pos) == 0) free(acts);
      }
    }
  }
  rg_acts_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the writer's refusals are expected, not news */
  choices c = {data, size};
  const char *path = write_file(&c);
  if (path) read_all(path);
  return 0;
}
