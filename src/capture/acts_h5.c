#include "capture/acts_h5.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/h5_util.h"

struct rg_acts_file {
  char *path;
  hid_t file; /* PATH, read-only: it only ever holds complete steps */
  int n_layers, d_model;
  bool float16;
  /* the step being written */
  long step;
  char group_name[32];
  char *tmp_path;             /* PATH.step_<N>.tmp: a copy of PATH plus this step */
  hid_t tmp_file, step_group; /* H5I_INVALID_HID when no step is open */
  /* the site being written */
  hid_t dset;
  int site_n, site_n_pos, site_written;
};

/* ---------------------------------------------------------------- file */

static int write_root_attrs(hid_t root, const rg_acts_meta *m) {
  int rc = 0;
  rc |= rg_h5_put_str(root, "format", "steer-acts/1");
  rc |= rg_h5_put_str(root, "model_id", m->model_id);
  rc |= rg_h5_put_str(root, "model_revision", m->model_revision);
  rc |= rg_h5_put_str(root, "model_dtype", m->model_dtype);
  rc |= rg_h5_put_str(root, "chat_template", m->chat_template);
  rc |= rg_h5_put_str(root, "hook_convention", "transformer_lens");
  rc |= rg_h5_put_str(root, "weight_processing", "none");
  rc |= rg_h5_put_attr(root, "n_layers", H5T_NATIVE_INT, -1, &m->n_layers);
  rc |= rg_h5_put_attr(root, "d_model", H5T_NATIVE_INT, -1, &m->d_model);
  static const int32_t none = 0;
  rc |= rg_h5_put_attr(root, "eoi_token_ids", H5T_NATIVE_INT32, m->n_eoi, m->n_eoi > 0 ? m->eoi_token_ids : &none);
  return rc ? -1 : 0;
}

/* Builds a new file with only the root attributes under "PATH.tmp" and
 * renames it into place. */
static int create_file(const char *path, const rg_acts_meta *meta) {
  size_t n = strlen(path) + 8;
  char *tmp = malloc(n);
  if (!tmp) return rg_error_set("%s: out of memory", path);
  snprintf(tmp, n, "%s.tmp", path);
  int rc = 0;
  hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) rc = rg_error_set("%s: cannot create HDF5 file", tmp);
  if (rc == 0 && write_root_attrs(file, meta) != 0) rc = rg_error_set("%s: cannot write the file attributes", tmp);
  if (file >= 0 && H5Fclose(file) < 0 && rc == 0) rc = rg_error_set("%s: cannot close", tmp);
  if (rc == 0) rc = rg_fsync_rename(tmp, path);
  if (rc != 0) unlink(tmp);
  free(tmp);
  return rc;
}

static int open_published(rg_acts_file *f) {
  f->file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  return f->file < 0 ? rg_error_set("%s: cannot open as HDF5", f->path) : 0;
}

rg_acts_file *rg_acts_open(const char *path, const rg_acts_meta *meta) {
  if (meta->n_layers <= 0 || meta->d_model <= 0 || meta->n_eoi < 0) {
    rg_error_set("%s: bad activation shape (%d layers, d_model %d)", path, meta->n_layers, meta->d_model);
    return NULL;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported through rg_error, not printed */
  rg_acts_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  f->n_layers = meta->n_layers;
  f->d_model = meta->d_model;
  f->float16 = meta->float16;
  f->file = f->tmp_file = f->step_group = f->dset = H5I_INVALID_HID;
  if (!rg_path_exists(path) && create_file(path, meta) != 0) goto fail;
  if (open_published(f) != 0) goto fail;
  long long n_layers = -1, d_model = -1;
  if (rg_h5_read_int(f->file, "n_layers", &n_layers) != 0 || rg_h5_read_int(f->file, "d_model", &d_model) != 0 ||
      n_layers != meta->n_layers || d_model != meta->d_model) {
    rg_error_set("%s: existing file has n_layers %lld, d_model %lld; this model has %d, %d", path, n_layers, d_model,
                 meta->n_layers, meta->d_model);
    goto fail;
  }
  return f;
fail:
  rg_acts_close(f);
  return NULL;
}

static void close_step(rg_acts_file *f) {
  if (f->dset >= 0) H5Dclose(f->dset);
  if (f->step_group >= 0) H5Gclose(f->step_group);
  if (f->tmp_file >= 0) H5Fclose(f->tmp_file);
  f->dset = f->step_group = f->tmp_file = H5I_INVALID_HID;
  if (f->tmp_path) unlink(f->tmp_path);
  free(f->tmp_path);
  f->tmp_path = NULL;
}

void rg_acts_close(rg_acts_file *f) {
  if (!f) return;
  close_step(f); /* an unfinished step is discarded */
  if (f->file >= 0) H5Fclose(f->file);
  free(f->path);
  free(f);
}

int rg_acts_has_step(rg_acts_file *f, long step) {
  char name[32];
  rg_h5_step_name(step, name, sizeof name);
  if (H5Lexists(f->file, name, H5P_DEFAULT) <= 0) return 0;
  hid_t g = H5Gopen2(f->file, name, H5P_DEFAULT);
  long long complete = 0;
  int ok = g >= 0 && rg_h5_read_int(g, "complete", &complete) == 0 && complete == 1;
  if (g >= 0) H5Gclose(g);
  return ok;
}

int rg_acts_begin_step(rg_acts_file *f, long step, const char *checkpoint) {
  if (f->tmp_file >= 0) return rg_error_set("%s: step %ld is still open", f->path, f->step);
  if (rg_acts_has_step(f, step)) return rg_error_set("%s: step %ld is already complete", f->path, step);
  f->step = step;
  rg_h5_step_name(step, f->group_name, sizeof f->group_name);
  size_t n = strlen(f->path) + 48;
  f->tmp_path = malloc(n);
  if (!f->tmp_path) return rg_error_set("%s: out of memory", f->path);
  snprintf(f->tmp_path, n, "%s.%s.tmp", f->path, f->group_name);
  if (rg_copy_file(f->path, f->tmp_path) != 0) {
    close_step(f);
    return -1;
  }
  f->tmp_file = H5Fopen(f->tmp_path, H5F_ACC_RDWR, H5P_DEFAULT);
  /* A file written by refgeo before this scheme can hold an incomplete group
   * of this step (an H5Ocopy cut short); it is dropped from the copy. */
  if (f->tmp_file >= 0 && H5Lexists(f->tmp_file, f->group_name, H5P_DEFAULT) > 0)
    H5Ldelete(f->tmp_file, f->group_name, H5P_DEFAULT);
  if (f->tmp_file >= 0) f->step_group = H5Gcreate2(f->tmp_file, f->group_name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  long long step64 = step;
  if (f->step_group < 0 || rg_h5_put_attr(f->step_group, "step", H5T_NATIVE_LLONG, -1, &step64) != 0 ||
      rg_h5_put_str(f->step_group, "checkpoint", checkpoint) != 0) {
    rg_error_set("%s: cannot start step %ld", f->tmp_path, step);
    close_step(f);
    return -1;
  }
  return 0;
}

int rg_acts_end_step(rg_acts_file *f) {
  if (f->step_group < 0) return rg_error_set("%s: no step is open", f->path);
  if (f->dset >= 0) return rg_error_set("%s: step %ld: a site is still open", f->path, f->step);
  static const unsigned char done = 1;
  int rc = rg_h5_put_attr(f->step_group, "complete", H5T_NATIVE_UCHAR, -1, &done);
  H5Gclose(f->step_group);
  f->step_group = H5I_INVALID_HID;
  if (H5Fclose(f->tmp_file) < 0) rc = -1;
  f->tmp_file = H5I_INVALID_HID;
  if (rc != 0) {
    rg_error_set("%s: cannot finish step %ld", f->tmp_path, f->step);
    close_step(f);
    return -1;
  }
  /* The copy with the finished step replaces PATH in one rename; PATH is
   * reopened to answer rg_acts_has_step. */
  H5Fclose(f->file);
  rc = rg_fsync_rename(f->tmp_path, f->path);
  if (open_published(f) != 0) rc = -1;
  close_step(f);
  return rc;
}

/* ---------------------------------------------------------------- datasets */

/* Link creation that makes missing parent groups ("prompts/<split>/..."). */
static hid_t intermediate_lcpl(void) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

static int write_vector(hid_t loc, const char *name, hid_t type, int n, const void *data) {
  hsize_t dims = (hsize_t)n;
  hid_t space = H5Screate_simple(1, &dims, NULL), lcpl = intermediate_lcpl();
  hid_t d = H5Dcreate2(loc, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = d < 0 ? -1 : H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  if (d >= 0) H5Dclose(d);
  H5Pclose(lcpl);
  H5Sclose(space);
  return rc < 0 ? -1 : 0;
}

int rg_acts_write_prompts(rg_acts_file *f, const char *split, int n, const char *const *texts,
                          const char *const *categories, const int32_t *const *token_ids, const int *n_tokens) {
  if (f->step_group < 0) return rg_error_set("%s: no step is open", f->path);
  if (n <= 0 || strchr(split, '/') || strchr(split, '.'))
    return rg_error_set("%s: bad prompt split '%s' (%d prompts)", f->path, split, n);
  const char **cats = malloc((size_t)n * sizeof *cats);
  hvl_t *ids = malloc((size_t)n * sizeof *ids);
  if (!cats || !ids) {
    free(cats);
    free(ids);
    return rg_error_set("%s: out of memory", f->path);
  }
  for (int i = 0; i < n; i++) {
    cats[i] = categories && categories[i] ? categories[i] : "";
    ids[i] = (hvl_t){.len = (size_t)n_tokens[i], .p = (void *)token_ids[i]};
  }
  char name[256];
  hid_t str = rg_h5_utf8_type(), vint = H5Tvlen_create(H5T_NATIVE_INT32);
  int rc = 0;
  snprintf(name, sizeof name, "prompts/%s/text", split);
  rc |= write_vector(f->step_group, name, str, n, texts);
  snprintf(name, sizeof name, "prompts/%s/category", split);
  rc |= write_vector(f->step_group, name, str, n, cats);
  snprintf(name, sizeof name, "prompts/%s/token_ids", split);
  if (rc == 0 && write_vector(f->step_group, name, vint, n, ids) == 0) {
    hid_t d = H5Dopen2(f->step_group, name, H5P_DEFAULT);
    rc |= d < 0 || rg_h5_put_str(d, "padding_side", "left") != 0;
    if (d >= 0) H5Dclose(d);
  } else {
    rc = -1;
  }
  H5Tclose(str);
  H5Tclose(vint);
  free(cats);
  free(ids);
  return rc ? rg_error_set("%s: cannot write prompts of split %s", f->tmp_path, split) : 0;
}

/* IEEE binary16 built from a float type (HDF5 1.10 has no native half). */
static hid_t half_type(void) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

int rg_acts_begin_site(rg_acts_file *f, const char *split, rg_hook_site site, int n, int n_pos) {
  if (f->step_group < 0) return rg_error_set("%s: no step is open", f->path);
  if (f->dset >= 0) return rg_error_set("%s: a site is still open", f->path);
  if (n <= 0 || n_pos <= 0 || site < 0 || site >= RG_HOOK_N_SITES || strchr(split, '/') || strchr(split, '.'))
    return rg_error_set("%s: bad activation dataset (split '%s', %d prompts, %d positions)", f->path, split, n, n_pos);
  hsize_t dims[4] = {(hsize_t)f->n_layers, (hsize_t)n, (hsize_t)n_pos, (hsize_t)f->d_model};
  hsize_t chunk[4] = {1, 1, (hsize_t)n_pos, (hsize_t)f->d_model};
  char name[256];
  snprintf(name, sizeof name, "acts/%s/%s", split, rg_hook_site_name(site));
  hid_t space = H5Screate_simple(4, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = intermediate_lcpl();
  hid_t type = f->float16 ? half_type() : H5Tcopy(H5T_IEEE_F32LE);
  H5Pset_chunk(dcpl, 4, chunk);
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) H5Pset_deflate(dcpl, 4);
  f->dset = H5Dcreate2(f->step_group, name, type, space, lcpl, dcpl, H5P_DEFAULT);
  H5Tclose(type);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
  if (f->dset < 0) return rg_error_set("%s: cannot create %s/%s", f->tmp_path, f->group_name, name);

  /* TransformerLens names and the position axis as attributes. */
  char **hooks = calloc((size_t)f->n_layers, sizeof *hooks);
  int32_t *positions = malloc((size_t)n_pos * sizeof *positions);
  int rc = !hooks || !positions;
  for (int l = 0; !rc && l < f->n_layers; l++) {
    hooks[l] = malloc(64);
    if (!hooks[l]) rc = 1;
    else rg_hook_name(site, l, hooks[l], 64);
  }
  for (int p = 0; !rc && p < n_pos; p++) positions[p] = p - n_pos;
  static const int layer_axis = 0;
  if (!rc)
    rc = rg_h5_put_strs(f->dset, "hook_names", (const char *const *)hooks, f->n_layers) != 0 ||
         rg_h5_put_attr(f->dset, "positions", H5T_NATIVE_INT32, n_pos, positions) != 0 ||
         rg_h5_put_attr(f->dset, "layer_axis", H5T_NATIVE_INT, -1, &layer_axis) != 0;
  for (int l = 0; hooks && l < f->n_layers; l++) free(hooks[l]);
  free(hooks);
  free(positions);
  if (rc) {
    H5Dclose(f->dset);
    f->dset = H5I_INVALID_HID;
    return rg_error_set("%s: cannot write the attributes of %s", f->tmp_path, name);
  }
  f->site_n = n;
  f->site_n_pos = n_pos;
  f->site_written = 0;
  return 0;
}

int rg_acts_write_prompt(rg_acts_file *f, int prompt, const float *acts) {
  if (f->dset < 0) return rg_error_set("%s: no activation dataset is open", f->path);
  if (prompt < 0 || prompt >= f->site_n)
    return rg_error_set("%s: prompt %d outside [0, %d)", f->path, prompt, f->site_n);
  /* The prompt's slab [all layers, 1, n_pos, d_model] is the caller's
   * [n_layers][n_pos][d_model] array in the same element order. */
  hsize_t start[4] = {0, (hsize_t)prompt, 0, 0};
  hsize_t count[4] = {(hsize_t)f->n_layers, 1, (hsize_t)f->site_n_pos, (hsize_t)f->d_model};
  hid_t fspace = H5Dget_space(f->dset), mspace = H5Screate_simple(4, count, NULL);
  herr_t rc = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
  if (rc >= 0) rc = H5Dwrite(f->dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, acts);
  H5Sclose(mspace);
  H5Sclose(fspace);
  if (rc < 0) return rg_error_set("%s: cannot write activations of prompt %d", f->tmp_path, prompt);
  f->site_written++;
  return 0;
}

int rg_acts_end_site(rg_acts_file *f) {
  if (f->dset < 0) return rg_error_set("%s: no activation dataset is open", f->path);
  int written = f->site_written, n = f->site_n;
  H5Dclose(f->dset);
  f->dset = H5I_INVALID_HID;
  if (written != n) return rg_error_set("%s: %d of %d prompts were written", f->path, written, n);
  return 0;
}
