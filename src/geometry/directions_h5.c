/* directions_h5.c: the refusal directions file of `refgeo geometry`, written and looked up (directions_h5.h). */
#include "geometry/directions_h5.h"

#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/hooks.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/h5_util.h"

#define FORMAT "refgeo-directions/1"
enum { HOOK_NAME_LEN = 48 };

/* ---------------------------------------------------------------- writing */

static int write_step(hid_t file, int n_layers, int n_pos, int d_model, const int32_t *positions,
                      const rg_directions_step *s) {
  char name[32];
  rg_h5_step_name(s->step, name, sizeof name);
  hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return -1;
  long long step = s->step;
  bool none = s->selected_layer < 0;
  int32_t sel_pos = none ? 0 : s->selected_pos, sel_layer = none ? -1 : s->selected_layer;
  int rc = rg_h5_put_attr(g, "step", H5T_NATIVE_LLONG, -1, &step) | rg_h5_put_str(g, "checkpoint", s->checkpoint) |
           rg_h5_put_attr(g, "selected_pos", H5T_NATIVE_INT32, -1, &sel_pos) |
           rg_h5_put_attr(g, "selected_layer", H5T_NATIVE_INT32, -1, &sel_layer);
  hsize_t dims[3] = {(hsize_t)n_layers, (hsize_t)n_pos, (hsize_t)d_model};
  hid_t space = H5Screate_simple(3, dims, NULL);
  hid_t d = H5Dcreate2(g, "resid_pre", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  rc |= d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->dirs) < 0;
  char(*hooks)[HOOK_NAME_LEN] = malloc((size_t)n_layers * HOOK_NAME_LEN);
  const char **hook_ptrs = malloc((size_t)n_layers * sizeof *hook_ptrs);
  if (d >= 0 && hooks && hook_ptrs) {
    for (int l = 0; l < n_layers; l++) hook_ptrs[l] = rg_hook_name(RG_HOOK_RESID_PRE, l, hooks[l], HOOK_NAME_LEN);
    int layer_axis = 0;
    rc |= rg_h5_put_strs(d, "hook_names", hook_ptrs, n_layers) |
          rg_h5_put_attr(d, "positions", H5T_NATIVE_INT32, n_pos, positions) |
          rg_h5_put_attr(d, "layer_axis", H5T_NATIVE_INT, -1, &layer_axis);
  } else {
    rc = -1;
  }
  free(hooks);
  free(hook_ptrs);
  if (d >= 0) H5Dclose(d);
  H5Sclose(space);
  H5Gclose(g);
  return rc ? -1 : 0;
}

int rg_directions_write(const char *path, int n_layers, int n_pos, int d_model, const rg_directions_step *steps,
                        int n) {
  rg_h5_init();
  size_t len = strlen(path) + 5;
  char *tmp = malloc(len);
  int32_t *positions = malloc((size_t)n_pos * sizeof *positions);
  if (!tmp || !positions) {
    free(tmp);
    free(positions);
    return rg_error_set("%s: out of memory", path);
  }
  snprintf(tmp, len, "%s.tmp", path);
  for (int i = 0; i < n_pos; i++) positions[i] = i - n_pos;
  int rc = -1;
  hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f >= 0) {
    rc = rg_h5_put_str(f, "format", FORMAT) | rg_h5_put_str(f, "hook_convention", "transformer_lens") |
         rg_h5_put_attr(f, "n_layers", H5T_NATIVE_INT, -1, &n_layers) |
         rg_h5_put_attr(f, "d_model", H5T_NATIVE_INT, -1, &d_model) |
         rg_h5_put_attr(f, "positions", H5T_NATIVE_INT32, n_pos, positions);
    for (int i = 0; rc == 0 && i < n; i++) rc = write_step(f, n_layers, n_pos, d_model, positions, &steps[i]);
    if (H5Fclose(f) < 0) rc = -1;
  }
  if (rc == 0) {
    rc = rg_fsync_rename(tmp, path);
  } else {
    rg_error_set("%s: cannot write the directions file", tmp);
    remove(tmp);
  }
  free(tmp);
  free(positions);
  return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- the spec */

/* Parses the integer after "KEY=" at *P up to ',' or the end. */
static int parse_field(const char *spec, const char **p, long *v) {
  char *end;
  long x = strtol(*p, &end, 10);
  if (end == *p || (*end && *end != ',')) return rg_error_set("%s: expected an integer at '%s'", spec, *p);
  *v = x;
  *p = *end ? end + 1 : end;
  return 0;
}

static bool starts_with_key(const char *s) {
  return strncmp(s, "step=", 5) == 0 || strncmp(s, "pos=", 4) == 0 || strncmp(s, "layer=", 6) == 0;
}

int rg_direction_spec_parse(const char *spec, char **file, rg_direction_ref *ref) {
  *ref = (rg_direction_ref){0};
  const char *colon = strrchr(spec, ':');
  size_t file_len = colon && starts_with_key(colon + 1) ? (size_t)(colon - spec) : strlen(spec);
  if (file_len == 0) return rg_error_set("%s: no file named before ':'", spec);
  if (file_len < strlen(spec)) {
    for (const char *p = colon + 1; *p;) {
      long v = 0;
      if (strncmp(p, "step=", 5) == 0) {
        p += 5;
        if (parse_field(spec, &p, &v) < 0) return -1;
        if (v < 0) return rg_error_set("%s: step %ld is negative", spec, v);
        ref->step = v;
        ref->has_step = true;
      } else if (strncmp(p, "pos=", 4) == 0) {
        p += 4;
        if (parse_field(spec, &p, &v) < 0) return -1;
        if (v >= 0 || v < INT_MIN) return rg_error_set("%s: pos %ld must be negative (-1 is the last token)", spec, v);
        ref->pos = (int)v;
        ref->has_pos = true;
      } else if (strncmp(p, "layer=", 6) == 0) {
        p += 6;
        if (parse_field(spec, &p, &v) < 0) return -1;
        if (v < 0 || v > INT_MAX) return rg_error_set("%s: layer %ld is out of range", spec, v);
        ref->layer = (int)v;
        ref->has_layer = true;
      } else {
        return rg_error_set("%s: unknown key at '%s' (known: step=, pos=, layer=)", spec, p);
      }
    }
  }
  if (ref->has_pos != ref->has_layer) return rg_error_set("%s: give both pos= and layer=, or neither", spec);
  if (!(*file = strndup(spec, file_len))) return rg_error_set("%s: out of memory", spec);
  return 0;
}

/* ---------------------------------------------------------------- reading */

typedef struct {
  long steps[64];
  int n; /* may exceed 64: only the first 64 are kept (for the message) */
} step_list;

static herr_t collect_step(hid_t g, const char *name, const H5L_info_t *li, void *user) {
  (void)g;
  (void)li;
  step_list *sl = user;
  long step;
  if (rg_h5_step_of_name(name, &step) == 0) {
    if (sl->n < 64) sl->steps[sl->n] = step;
    sl->n++;
  }
  return 0;
}

/* "0, 50, 100" into BUF. */
static const char *format_steps(const step_list *sl, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < sl->n && i < 64 && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%ld", i ? ", " : "", sl->steps[i]);
  return buf;
}

/* Resolves the step, pos and layer of REF in the open file F. */
static int resolve_ref(const char *path, hid_t f, int n_layers, int n_pos, rg_direction_ref *ref, hid_t *group) {
  step_list sl = {.n = 0};
  hsize_t idx = 0;
  if (H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_step, &sl) < 0)
    return rg_error_set("%s: cannot list the step groups", path);
  char list[512];
  if (sl.n == 0) return rg_error_set("%s: holds no step", path);
  if (!ref->has_step) {
    if (sl.n > 1)
      return rg_error_set("%s: holds steps %s; name one with FILE:step=S", path, format_steps(&sl, list, sizeof list));
    ref->step = sl.steps[0];
    ref->has_step = true;
  }
  char name[32];
  rg_h5_step_name(ref->step, name, sizeof name);
  if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
    return rg_error_set("%s: no step %ld (the file holds %s)", path, ref->step, format_steps(&sl, list, sizeof list));
  if ((*group = H5Gopen2(f, name, H5P_DEFAULT)) < 0) return rg_error_set("%s: cannot open /%s", path, name);
  if (!ref->has_pos) {
    long long pos, layer;
    if (rg_h5_read_int(*group, "selected_pos", &pos) != 0 || rg_h5_read_int(*group, "selected_layer", &layer) != 0)
      return rg_error_set("%s: /%s has no selected carrier attributes", path, name);
    if (layer < 0)
      return rg_error_set("%s: step %ld had no admissible carrier; name one with :pos=P,layer=L", path, ref->step);
    if (pos < INT_MIN || pos > INT_MAX || layer > INT_MAX)
      return rg_error_set("%s: /%s: selected carrier out of range", path, name);
    ref->pos = (int)pos;
    ref->layer = (int)layer;
    ref->has_pos = ref->has_layer = true;
  }
  if (ref->pos < -n_pos || ref->pos >= 0)
    return rg_error_set("%s: no position %d (the file holds positions -%d..-1)", path, ref->pos, n_pos);
  if (ref->layer < 0 || ref->layer >= n_layers)
    return rg_error_set("%s: no layer %d (the file holds layers 0..%d)", path, ref->layer, n_layers - 1);
  return 0;
}

/* Reads row [layer, n_pos + pos, :] of the step's dataset into OUT. */
static int read_row(const char *path, hid_t group, int n_layers, int n_pos, int d_model, const rg_direction_ref *ref,
                    float *out) {
  if (H5Lexists(group, "resid_pre", H5P_DEFAULT) <= 0)
    return rg_error_set("%s: step %ld has no resid_pre dataset", path, ref->step);
  hid_t d = H5Dopen2(group, "resid_pre", H5P_DEFAULT);
  hid_t space = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
  hsize_t dims[3] = {0, 0, 0};
  int ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 3 && H5Sget_simple_extent_dims(space, dims, NULL) == 3 &&
           dims[0] == (hsize_t)n_layers && dims[1] == (hsize_t)n_pos && dims[2] == (hsize_t)d_model;
  int rc = ok ? 0
              : rg_error_set("%s: step %ld: resid_pre is not [%d, %d, %d]", path, ref->step, n_layers, n_pos, d_model);
  if (rc == 0) {
    hsize_t start[3] = {(hsize_t)ref->layer, (hsize_t)(n_pos + ref->pos), 0}, count[3] = {1, 1, (hsize_t)d_model};
    hsize_t mdim = (hsize_t)d_model;
    hid_t mspace = H5Screate_simple(1, &mdim, NULL);
    if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(d, H5T_NATIVE_FLOAT, mspace, space, H5P_DEFAULT, out) < 0)
      rc = rg_error_set("%s: cannot read step %ld, pos %d, layer %d", path, ref->step, ref->pos, ref->layer);
    H5Sclose(mspace);
  }
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  return rc;
}

int rg_directions_read(const char *path, rg_direction_ref *ref, int d_model, float *out) {
  rg_h5_init();
  if (!rg_path_exists(path)) return rg_error_set("%s: no such file", path);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return rg_error_set("%s: cannot open as HDF5", path);
  hid_t g = H5I_INVALID_HID;
  int rc = -1;
  char *format = rg_h5_read_str(f, "format");
  long long n_layers, width, n_pos = 0;
  if (!format || strcmp(format, FORMAT) != 0) {
    rg_error_set("%s: not a refgeo directions file (format '%s', expected '%s')", path, format ? format : "",
                 FORMAT);
  } else if (rg_h5_read_int(f, "n_layers", &n_layers) != 0 || rg_h5_read_int(f, "d_model", &width) != 0 ||
             n_layers < 1 || n_layers > 1 << 16 || width < 1 || width > 1 << 20) {
    rg_error_set("%s: missing or bad n_layers / d_model attributes", path);
  } else if (d_model > 0 && width != d_model) {
    rg_error_set("%s: the directions have width %lld, the model's d_model is %d", path, width, d_model);
  } else {
    hid_t a = H5Aexists(f, "positions") > 0 ? H5Aopen(f, "positions", H5P_DEFAULT) : H5I_INVALID_HID;
    hid_t s = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    n_pos = s >= 0 ? H5Sget_simple_extent_npoints(s) : 0;
    if (s >= 0) H5Sclose(s);
    if (a >= 0) H5Aclose(a);
    if (n_pos < 1 || n_pos > 1 << 16)
      rg_error_set("%s: missing or bad positions attribute", path);
    else if (resolve_ref(path, f, (int)n_layers, (int)n_pos, ref, &g) == 0)
      rc = out ? read_row(path, g, (int)n_layers, (int)n_pos, (int)width, ref, out) : 0;
  }
  free(format);
  if (g >= 0) H5Gclose(g);
  H5Fclose(f);
  return rc;
}
