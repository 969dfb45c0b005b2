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
 * (h5_build.h holds the building blocks, shared with fuzz_directions_h5.)
 */
#include <hdf5.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/acts_h5_read.h"
#include "fuzz_util.h"
#include "h5_build.h"

/* ---------------------------------------------------------------- writing */

static const char *const SPLITS[] = {"harmful_train", "harmless_train", "harmful_val", "", "a/b", "harmful_train "};
static const char *const SITES[] = {"resid_pre", "attn_out",  "resid_mid",   "mlp_out",
                                    "resid_post", "resid_pr", "hook_resid_pre", "blocks.0.hook_resid_pre"};
enum { N_SPLITS = sizeof SPLITS / sizeof SPLITS[0], N_SITES = sizeof SITES / sizeof SITES[0] };

static void put_token_ids(choices *c, hid_t step, const char *split) {
  char path[128];
  snprintf(path, sizeof path, "prompts/%s/token_ids", split);
  hsize_t n = take_count(c);
  hid_t lcpl = h5_link_props();
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

/* acts/<split>/<site>: [n_layers, n, n_pos, d_model] mostly. */
static void put_site(choices *c, hid_t step, const char *split, const char *site, int n_layers, int d_model) {
  char path[160];
  snprintf(path, sizeof path, "acts/%s/%s", split, site);
  const hsize_t hint[4] = {(hsize_t)n_layers, 0, 0, (hsize_t)d_model};
  h5_put_floats(c, step, path, hint, 4);
}

static void put_step(choices *c, hid_t file, int n_layers, int d_model) {
  char name[64];
  h5_step_name(c, name, sizeof name);
  hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return;
  h5_put_attr(c, g, "complete", 1, "1");
  h5_put_attr(c, g, "checkpoint", 0, "/ckpt/step-100");
  h5_put_attr(c, g, "step", 100, "100");
  for (int n = take_u8(c) % 4; n > 0; n--) put_token_ids(c, g, take_of(c, SPLITS, N_SPLITS));
  for (int n = take_u8(c) % 6; n > 0; n--)
    put_site(c, g, take_of(c, SPLITS, N_SPLITS), take_of(c, SITES, N_SITES), n_layers, d_model);
  H5Gclose(g);
}

/* Writes the file the input describes; the path, or NULL if HDF5 refused. */
static const char *write_file(choices *c) {
  const char *path = fuzz_write("acts.h5", NULL, 0);
  hid_t file = h5_create(path);
  if (file < 0) return NULL;
  int n_layers = 1 + take_u8(c) % 4, d_model = 1 + take_u8(c) % 8;
  h5_put_attr(c, file, "format", 0, take_u8(c) % 8 ? "steer-acts/1" : "steer-acts/2");
  h5_put_attr(c, file, "n_layers", n_layers, "2");
  h5_put_attr(c, file, "d_model", d_model, "8");
  h5_put_attr(c, file, "eoi_token_ids", 7, "7");
  h5_put_attr(c, file, "model_id", 0, "tiny");
  h5_put_attr(c, file, "chat_template", 0, "chatml");
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
      else fuzz_check_refusal("rg_acts_read_token_ids");
      for (int site = 0; site < RG_HOOK_N_SITES; site++) {
        float *acts;
        int n_pos;
        if (rg_acts_read_site(r, step, SPLITS[sp], (rg_hook_site)site, &acts, &n, &n_pos) == 0) free(acts);
        else fuzz_check_refusal("rg_acts_read_site");
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
