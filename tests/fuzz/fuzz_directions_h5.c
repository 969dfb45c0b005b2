/* fuzz_directions_h5: the directions file of `refgeo geometry`
 * (geometry/directions_h5.h) as the CLI's --ablate / --actadd
 * FILE[:step=S,pos=P,layer=L] reads it: rg_direction_spec_parse on a spec
 * whose suffix the input writes, then rg_directions_read with and without
 * the model's width, on a file BUILT from the input with the HDF5 API
 * (structure-aware for the reason fuzz_acts_h5.c gives):
 *   root attributes  format, n_layers, d_model, positions: present or not,
 *                    of any class, scalar or array
 *   step groups      name, step, checkpoint, selected_pos, selected_layer
 *   datasets         <step>/resid_pre, mostly [n_layers, n_pos, d_model]
 *                    float32, else any rank, extent and type
 * Input: the choices that build the file, then, after the last newline, the
 * spec's suffix (":step=100,pos=-1" is appended to FILE as it is); with no
 * newline the spec is FILE alone.
 * Seeds: fixed random byte strings (tools/reference/make_fuzz_seeds.py). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "geometry/directions_h5.h"
#include "h5_build.h"

static void put_step(choices *c, hid_t file, int n_layers, int n_pos, int d_model) {
  char name[64];
  h5_step_name(c, name, sizeof name);
  hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return;
  h5_put_attr(c, g, "step", 100, "100");
  h5_put_attr(c, g, "checkpoint", 0, "/ckpt/step-100");
  h5_put_attr(c, g, "selected_pos", -1, "-1");
  h5_put_attr(c, g, "selected_layer", 0, "0");
  const hsize_t hint[3] = {(hsize_t)n_layers, (hsize_t)n_pos, (hsize_t)d_model};
  if (take_u8(c) % 8) h5_put_floats(c, g, "resid_pre", hint, 3);
  H5Gclose(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the writer's refusals are expected, not news */
  const uint8_t *nl = NULL; /* the last newline */
  for (size_t i = size; i > 0 && !nl; i--)
    if (data[i - 1] == '\n') nl = data + i - 1;
  size_t spec_len = nl ? size - (size_t)(nl + 1 - data) : 0;
  choices c = {data, nl ? (size_t)(nl - data) : size};
  const char *written = fuzz_write("directions.h5", NULL, 0);
  char path[512];
  snprintf(path, sizeof path, "%s", written);
  hid_t file = h5_create(path);
  if (file < 0) return 0;
  int n_layers = 1 + take_u8(&c) % 4, n_pos = 1 + take_u8(&c) % 3, d_model = 1 + take_u8(&c) % 8;
  h5_put_attr(&c, file, "format", 0, take_u8(&c) % 8 ? "refgeo-directions/1" : "refgeo-directions/2");
  h5_put_attr(&c, file, "n_layers", n_layers, "2");
  h5_put_attr(&c, file, "d_model", d_model, "8");
  h5_put_attr(&c, file, "positions", -n_pos, "-1");
  for (int n = take_u8(&c) % 4; n > 0; n--) put_step(&c, file, n_layers, n_pos, d_model);
  H5Fclose(file);

  char spec[600]; /* a NUL in the suffix ends it, as in a C string from argv */
  snprintf(spec, sizeof spec, "%s%s%.*s", path, nl ? ":" : "", (int)(spec_len < 64 ? spec_len : 64),
           (const char *)data + size - spec_len);
  char *file_name = NULL;
  rg_direction_ref ref;
  if (rg_direction_spec_parse(spec, &file_name, &ref) == 0) {
    rg_direction_ref only = ref;
    (void)rg_directions_read(file_name, &only, 0, NULL);
    float *out = malloc((size_t)d_model * sizeof *out);
    if (out) (void)rg_directions_read(file_name, &ref, d_model, out);
    free(out);
  }
  free(file_name);
  return 0;
}
