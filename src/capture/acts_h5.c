/* acts_h5.c: writing the HDF5 activation file of `refgeo capture` (acts_h5.h). */
#include "capture/acts_h5.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/h5_util.h"

/* One activation dataset being written. */
typedef struct {
  hid_t dset; /* H5I_INVALID_HID when the site is not open */
  int n, n_pos, written;
} open_site;

struct rg_acts_file {
  char *path;
  hid_t file; /* PATH, read-only: it only ever links complete steps */
  int n_layers, d_model;
  bool float16;
  /* the step being written */
  long step;
  char group_name[32];
  char *step_path;            /* PATH.step_<N>.h5: the step's own file, once finished */
  char *tmp_path;             /* PATH.step_<N>.h5.tmp: that file while it is written */
  hid_t tmp_file, step_group; /* H5I_INVALID_HID when no step is open */
  /* the sites being written, any number at once (one forward pass feeds all) */
  open_site sites[RG_HOOK_N_SITES];
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

/* PATH followed by SUFFIX, malloc'd; NULL with the error set. */
static char *path_with(const char *path, const char *suffix) {
  size_t n = strlen(path) + strlen(suffix) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s%s", path, suffix);
  else rg_error_set("%s: out of memory", path);
  return p;
}

/* Builds a new file with only the root attributes under "PATH.tmp" and
 * renames it into place. */
static int create_file(const char *path, const rg_acts_meta *meta) {
  char *tmp = path_with(path, ".tmp");
  if (!tmp) return -1;
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
  rg_h5_init();
  rg_acts_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  f->n_layers = meta->n_layers;
  f->d_model = meta->d_model;
  f->float16 = meta->float16;
  f->file = f->tmp_file = f->step_group = H5I_INVALID_HID;
  for (int s = 0; s < RG_HOOK_N_SITES; s++) f->sites[s].dset = H5I_INVALID_HID;
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

static void close_sites(rg_acts_file *f) {
  for (int s = 0; s < RG_HOOK_N_SITES; s++) {
    if (f->sites[s].dset >= 0) H5Dclose(f->sites[s].dset);
    f->sites[s].dset = H5I_INVALID_HID;
  }
}

static void close_step(rg_acts_file *f) {
  close_sites(f);
  if (f->step_group >= 0) H5Gclose(f->step_group);
  if (f->tmp_file >= 0) H5Fclose(f->tmp_file);
  f->step_group = f->tmp_file = H5I_INVALID_HID;
  if (f->tmp_path) unlink(f->tmp_path);
  free(f->tmp_path);
  free(f->step_path);
  f->tmp_path = f->step_path = NULL;
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
  /* An external link whose step file is gone does not open: not complete. */
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
  char suffix[48];
  snprintf(suffix, sizeof suffix, ".%s.h5", f->group_name);
  if (!(f->step_path = path_with(f->path, suffix)) || !(f->tmp_path = path_with(f->step_path, ".tmp"))) {
    close_step(f);
    return -1;
  }
  /* The step file starts empty: a temp file left by a killed run is
   * truncated, never continued. */
  f->tmp_file = H5Fcreate(f->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
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

/* The last path component of PATH. */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Publishes the finished step: a copy of PATH, which holds only attributes
 * and links (a few KB whatever the activations' size), gets the external
 * link /step_<N> -> "<basename>.step_<N>.h5":/step_<N> and is renamed over
 * PATH. The link's file name is relative, so HDF5 looks for the step file in
 * the directory of the file holding the link (H5Lcreate_external, "External
 * link traversal": after HDF5_EXT_PREFIX and the link-access prefix, before
 * the current directory), and the files can move together. */
static int link_step(rg_acts_file *f) {
  char *tmp = path_with(f->path, ".tmp");
  if (!tmp) return -1;
  int rc = rg_copy_file(f->path, tmp);
  hid_t file = rc == 0 ? H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT) : H5I_INVALID_HID;
  if (rc == 0 && file < 0) rc = rg_error_set("%s: cannot open as HDF5", tmp);
  /* A link of this name can only be a step that did not open (its file was
   * lost), or, in a file of refgeo's older one-file layout, a group that a
   * killed copy cut short: either is replaced. */
  if (rc == 0 && H5Lexists(file, f->group_name, H5P_DEFAULT) > 0 && H5Ldelete(file, f->group_name, H5P_DEFAULT) < 0)
    rc = rg_error_set("%s: cannot replace the old /%s", tmp, f->group_name);
  if (rc == 0 && H5Lcreate_external(base_name(f->step_path), f->group_name, file, f->group_name, H5P_DEFAULT,
                                    H5P_DEFAULT) < 0)
    rc = rg_error_set("%s: cannot link /%s to %s", tmp, f->group_name, f->step_path);
  if (file >= 0 && H5Fclose(file) < 0 && rc == 0) rc = rg_error_set("%s: cannot close", tmp);
  if (rc == 0) {
    /* PATH is reopened to answer rg_acts_has_step. */
    H5Fclose(f->file);
    f->file = H5I_INVALID_HID;
    rc = rg_fsync_rename(tmp, f->path);
    if (open_published(f) != 0) rc = -1;
  }
  if (rc != 0) unlink(tmp);
  free(tmp);
  return rc;
}

int rg_acts_end_step(rg_acts_file *f) {
  if (f->step_group < 0) return rg_error_set("%s: no step is open", f->path);
  for (int s = 0; s < RG_HOOK_N_SITES; s++)
    if (f->sites[s].dset >= 0)
      return rg_error_set("%s: step %ld: site %s is still open", f->path, f->step, rg_hook_site_name((rg_hook_site)s));
  static const unsigned char done = 1;
  int rc = rg_h5_put_attr(f->step_group, "complete", H5T_NATIVE_UCHAR, -1, &done);
  H5Gclose(f->step_group);
  f->step_group = H5I_INVALID_HID;
  if (H5Fclose(f->tmp_file) < 0) rc = -1;
  f->tmp_file = H5I_INVALID_HID;
  if (rc != 0) rc = rg_error_set("%s: cannot finish step %ld", f->tmp_path, f->step);
  /* The step file goes into place first, then PATH links it: a kill between
   * the two leaves an unlinked step file that the next run rewrites. */
  if (rc == 0) rc = rg_fsync_rename(f->tmp_path, f->step_path);
  if (rc == 0) rc = link_step(f);
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
  if (n <= 0 || n_pos <= 0 || site < 0 || site >= RG_HOOK_N_SITES || strchr(split, '/') || strchr(split, '.'))
    return rg_error_set("%s: bad activation dataset (split '%s', %d prompts, %d positions)", f->path, split, n, n_pos);
  open_site *os = &f->sites[site];
  if (os->dset >= 0) return rg_error_set("%s: site %s is still open", f->path, rg_hook_site_name(site));
  hsize_t dims[4] = {(hsize_t)f->n_layers, (hsize_t)n, (hsize_t)n_pos, (hsize_t)f->d_model};
  hsize_t chunk[4] = {1, 1, (hsize_t)n_pos, (hsize_t)f->d_model};
  char name[256];
  snprintf(name, sizeof name, "acts/%s/%s", split, rg_hook_site_name(site));
  hid_t space = H5Screate_simple(4, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = intermediate_lcpl();
  hid_t type = f->float16 ? half_type() : H5Tcopy(H5T_IEEE_F32LE);
  H5Pset_chunk(dcpl, 4, chunk);
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) H5Pset_deflate(dcpl, 4);
  hid_t dset = H5Dcreate2(f->step_group, name, type, space, lcpl, dcpl, H5P_DEFAULT);
  H5Tclose(type);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
  if (dset < 0) return rg_error_set("%s: cannot create %s/%s", f->tmp_path, f->group_name, name);

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
    rc = rg_h5_put_strs(dset, "hook_names", (const char *const *)hooks, f->n_layers) != 0 ||
         rg_h5_put_attr(dset, "positions", H5T_NATIVE_INT32, n_pos, positions) != 0 ||
         rg_h5_put_attr(dset, "layer_axis", H5T_NATIVE_INT, -1, &layer_axis) != 0;
  for (int l = 0; hooks && l < f->n_layers; l++) free(hooks[l]);
  free(hooks);
  free(positions);
  if (rc) {
    H5Dclose(dset);
    return rg_error_set("%s: cannot write the attributes of %s", f->tmp_path, name);
  }
  *os = (open_site){.dset = dset, .n = n, .n_pos = n_pos, .written = 0};
  return 0;
}

/* The open dataset of SITE, or NULL with the error set. */
static open_site *site_of(rg_acts_file *f, rg_hook_site site) {
  if (site < 0 || site >= RG_HOOK_N_SITES || f->sites[site].dset < 0) {
    rg_error_set("%s: no activation dataset is open for site %d", f->path, (int)site);
    return NULL;
  }
  return &f->sites[site];
}

int rg_acts_write_prompt(rg_acts_file *f, rg_hook_site site, int prompt, const float *acts) {
  open_site *os = site_of(f, site);
  if (!os) return -1;
  if (prompt < 0 || prompt >= os->n) return rg_error_set("%s: prompt %d outside [0, %d)", f->path, prompt, os->n);
  /* The prompt's slab [all layers, 1, n_pos, d_model] is the caller's
   * [n_layers][n_pos][d_model] array in the same element order. */
  hsize_t start[4] = {0, (hsize_t)prompt, 0, 0};
  hsize_t count[4] = {(hsize_t)f->n_layers, 1, (hsize_t)os->n_pos, (hsize_t)f->d_model};
  hid_t fspace = H5Dget_space(os->dset), mspace = H5Screate_simple(4, count, NULL);
  herr_t rc = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
  if (rc >= 0) rc = H5Dwrite(os->dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, acts);
  H5Sclose(mspace);
  H5Sclose(fspace);
  if (rc < 0)
    return rg_error_set("%s: cannot write %s activations of prompt %d", f->tmp_path, rg_hook_site_name(site), prompt);
  os->written++;
  return 0;
}

int rg_acts_end_site(rg_acts_file *f, rg_hook_site site) {
  open_site *os = site_of(f, site);
  if (!os) return -1;
  int written = os->written, n = os->n;
  H5Dclose(os->dset);
  os->dset = H5I_INVALID_HID;
  if (written != n)
    return rg_error_set("%s: %s: %d of %d prompts were written", f->path, rg_hook_site_name(site), written, n);
  return 0;
}
