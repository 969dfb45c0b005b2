/* acts_h5_read.c: reading the HDF5 activation file of `refgeo capture` (acts_h5_read.h). */
#include "capture/acts_h5_read.h"

#include <hdf5.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/h5_util.h"

struct rg_acts_reader {
  char *path;
  hid_t file;
  rg_acts_reader_info info;
  int32_t *eoi;
  char *model_id, *chat_template;
  long *steps;
};

/* A sanity bound on any one count read from the file (prompts, positions,
 * tokens): far above real use, low enough that products cannot overflow. */
enum { MAX_COUNT = 1 << 24 };

static int read_eoi(rg_acts_reader *r) {
  if (H5Aexists(r->file, "eoi_token_ids") <= 0) return rg_error_set("%s: no eoi_token_ids attribute", r->path);
  hid_t a = H5Aopen(r->file, "eoi_token_ids", H5P_DEFAULT);
  hid_t space = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
  hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  int rc = 0;
  if (n < 0 || n > 4096) {
    rc = rg_error_set("%s: bad eoi_token_ids attribute", r->path);
  } else {
    r->eoi = malloc((size_t)(n > 0 ? n : 1) * sizeof *r->eoi);
    if (!r->eoi || H5Aread(a, H5T_NATIVE_INT32, r->eoi) < 0)
      rc = rg_error_set("%s: cannot read eoi_token_ids", r->path);
    r->info.n_eoi = (int)n;
  }
  if (space >= 0) H5Sclose(space);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* ---------------------------------------------------------------- steps */

typedef struct {
  rg_acts_reader *r;
  int cap;
  bool failed; /* the error is set (a step file is missing) */
} step_scan;

/* The file an external link points to, malloc'd ("?" when unreadable). */
static char *link_target_file(hid_t g, const char *name, const H5L_info_t *li) {
  char *val = li->u.val_size > 0 && li->u.val_size < 65536 ? malloc(li->u.val_size) : NULL;
  const char *file = NULL, *obj = NULL;
  if (val && H5Lget_val(g, name, val, li->u.val_size, H5P_DEFAULT) >= 0)
    H5Lunpack_elink_val(val, li->u.val_size, NULL, &file, &obj);
  char *copy = strdup(file ? file : "?");
  free(val);
  return copy;
}

static herr_t collect_step(hid_t g, const char *name, const H5L_info_t *li, void *user) {
  step_scan *sc = user;
  rg_acts_reader *r = sc->r;
  long step;
  if (rg_h5_step_of_name(name, &step) != 0) return 0;
  hid_t sg = H5Gopen2(g, name, H5P_DEFAULT);
  if (sg < 0 && li->type == H5L_TYPE_EXTERNAL) {
    /* Only complete steps are linked, so a link that does not open is a
     * step file that was lost or left behind when the file was moved. */
    char *file = link_target_file(g, name, li);
    rg_error_set("%s: /%s is in %s, which cannot be opened (keep the step files beside the main file)", r->path,
                 name, file ? file : "?");
    free(file);
    sc->failed = true;
    return -1;
  }
  if (sg < 0) return 0;
  long long complete = 0;
  int ok = rg_h5_read_int(sg, "complete", &complete) == 0 && complete == 1;
  H5Gclose(sg);
  if (!ok) return 0;
  if (r->info.n_steps == sc->cap) {
    int cap = sc->cap ? 2 * sc->cap : 16;
    long *s = realloc(r->steps, (size_t)cap * sizeof *s);
    if (!s) return -1;
    r->steps = s;
    sc->cap = cap;
  }
  r->steps[r->info.n_steps++] = step;
  return 0;
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* ---------------------------------------------------------------- open */

rg_acts_reader *rg_acts_reader_open(const char *path) {
  rg_h5_init();
  rg_acts_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  r->file = H5I_INVALID_HID;
  if (H5Fis_hdf5(path) <= 0) {
    rg_error_set("%s: not an HDF5 file (or missing)", path);
    goto fail;
  }
  r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (r->file < 0) {
    rg_error_set("%s: cannot open as HDF5", path);
    goto fail;
  }
  char *format = rg_h5_read_str(r->file, "format");
  int format_ok = format && strcmp(format, "steer-acts/1") == 0;
  free(format);
  if (!format_ok) {
    rg_error_set("%s: not a refgeo activation file (format attribute is not \"steer-acts/1\")", path);
    goto fail;
  }
  long long n_layers = 0, d_model = 0;
  if (rg_h5_read_int(r->file, "n_layers", &n_layers) != 0 || rg_h5_read_int(r->file, "d_model", &d_model) != 0 ||
      n_layers <= 0 || n_layers > 4096 || d_model <= 0 || d_model > 1 << 20) {
    rg_error_set("%s: missing or bad n_layers / d_model attributes", path);
    goto fail;
  }
  r->info.n_layers = (int)n_layers;
  r->info.d_model = (int)d_model;
  if (read_eoi(r) != 0) goto fail;
  r->model_id = rg_h5_read_str(r->file, "model_id");
  r->chat_template = rg_h5_read_str(r->file, "chat_template");
  step_scan sc = {r, 0, false};
  hsize_t idx = 0;
  if (H5Literate(r->file, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, collect_step, &sc) < 0) {
    if (!sc.failed) rg_error_set("%s: cannot list the step groups", path);
    goto fail;
  }
  if (r->info.n_steps == 0) {
    rg_error_set("%s: no complete step group", path);
    goto fail;
  }
  qsort(r->steps, (size_t)r->info.n_steps, sizeof *r->steps, cmp_long);
  r->info.eoi_token_ids = r->eoi;
  r->info.model_id = r->model_id ? r->model_id : "";
  r->info.chat_template = r->chat_template ? r->chat_template : "";
  r->info.steps = r->steps;
  return r;
fail:
  rg_acts_reader_close(r);
  return NULL;
}

void rg_acts_reader_close(rg_acts_reader *r) {
  if (!r) return;
  if (r->file >= 0) H5Fclose(r->file);
  free(r->eoi);
  free(r->model_id);
  free(r->chat_template);
  free(r->steps);
  free(r->path);
  free(r);
}

const rg_acts_reader_info *rg_acts_reader_info_of(const rg_acts_reader *r) { return &r->info; }
const char *rg_acts_reader_path(const rg_acts_reader *r) { return r->path; }

/* ---------------------------------------------------------------- datasets */

static hid_t open_step(rg_acts_reader *r, long step) {
  char name[32];
  rg_h5_step_name(step, name, sizeof name);
  hid_t g = H5Lexists(r->file, name, H5P_DEFAULT) > 0 ? H5Gopen2(r->file, name, H5P_DEFAULT) : H5I_INVALID_HID;
  if (g < 0) rg_error_set("%s: no group /%s", r->path, name);
  return g;
}

char *rg_acts_read_checkpoint(rg_acts_reader *r, long step) {
  hid_t g = open_step(r, step);
  if (g < 0) return NULL;
  char *c = rg_h5_read_str(g, "checkpoint");
  H5Gclose(g);
  if (!c) rg_error_set("%s: /step_%ld has no checkpoint attribute", r->path, step);
  return c;
}

/* Opens /step_<step>/<rel> as a dataset. */
static hid_t open_dataset(rg_acts_reader *r, long step, const char *rel) {
  hid_t g = open_step(r, step);
  if (g < 0) return H5I_INVALID_HID;
  hid_t d = H5I_INVALID_HID;
  /* H5Lexists fails on a missing intermediate group; check each level. */
  char buf[512];
  snprintf(buf, sizeof buf, "%s", rel);
  int exists = 1;
  for (char *p = buf; exists && (p = strchr(p, '/')); p++) {
    *p = 0;
    exists = H5Lexists(g, buf, H5P_DEFAULT) > 0;
    *p = '/';
  }
  if (exists && H5Lexists(g, rel, H5P_DEFAULT) > 0) d = H5Dopen2(g, rel, H5P_DEFAULT);
  H5Gclose(g);
  if (d < 0) rg_error_set("%s: no dataset /step_%ld/%s", r->path, step, rel);
  return d;
}

/* Whether dataset D (COUNT values of TYPE) has its data in the file. An HDF5
 * dataset may declare a huge extent with no chunk written (reads give the fill
 * value), so its dimensions alone do not bound what reading it allocates. The
 * writer deflates every chunk it writes, and deflate expands at most 1032:1
 * (zlib's documented limit), so more than that per stored byte, beyond a page
 * of slack for tiny datasets, is data the file does not hold. */
static bool holds_its_data(hid_t d, hid_t type, size_t count) {
  enum { DEFLATE_MAX_RATIO = 1032, SLACK_BYTES = 4096 };
  size_t elem = H5Tget_size(type), logical;
  if (elem == 0 || __builtin_mul_overflow(count, elem, &logical)) return false;
  hsize_t stored = H5Dget_storage_size(d);
  return logical <= SLACK_BYTES || logical / DEFLATE_MAX_RATIO <= stored;
}

int rg_acts_read_site(rg_acts_reader *r, long step, const char *split, rg_hook_site site, float **acts, int *n,
                      int *n_pos) {
  *acts = NULL;
  if (site < 0 || site >= RG_HOOK_N_SITES) return rg_error_set("%s: bad hook site %d", r->path, (int)site);
  char rel[300];
  snprintf(rel, sizeof rel, "acts/%s/%s", split, rg_hook_site_name(site));
  hid_t d = open_dataset(r, step, rel);
  if (d < 0) return -1;
  int rc = -1;
  hid_t space = H5Dget_space(d), type = H5Dget_type(d);
  hsize_t dims[4] = {0};
  if (space < 0 || type < 0 || H5Tget_class(type) != H5T_FLOAT || H5Sget_simple_extent_ndims(space) != 4 ||
      H5Sget_simple_extent_dims(space, dims, NULL) != 4) {
    rg_error_set("%s: /step_%ld/%s is not a 4-d float dataset", r->path, step, rel);
  } else if (dims[0] != (hsize_t)r->info.n_layers || dims[3] != (hsize_t)r->info.d_model || dims[1] == 0 ||
             dims[1] > MAX_COUNT || dims[2] == 0 || dims[2] > 4096) {
    rg_error_set("%s: /step_%ld/%s has shape [%llu, %llu, %llu, %llu], expected [%d, n, n_pos, %d]", r->path, step,
                 rel, (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2],
                 (unsigned long long)dims[3], r->info.n_layers, r->info.d_model);
  } else if (!holds_its_data(d, type, (size_t)dims[0] * dims[1] * dims[2] * dims[3])) {
    rg_error_set("%s: /step_%ld/%s declares [%llu, %llu, %llu, %llu] values but the file stores %llu bytes of them",
                 r->path, step, rel, (unsigned long long)dims[0], (unsigned long long)dims[1],
                 (unsigned long long)dims[2], (unsigned long long)dims[3], (unsigned long long)H5Dget_storage_size(d));
  } else {
    size_t count = (size_t)dims[0] * dims[1] * dims[2] * dims[3];
    if (count > SIZE_MAX / sizeof(float) || !(*acts = malloc(count * sizeof(float)))) {
      rg_error_set("%s: /step_%ld/%s: out of memory", r->path, step, rel);
    } else if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, *acts) < 0) {
      rg_error_set("%s: cannot read /step_%ld/%s", r->path, step, rel);
      free(*acts);
      *acts = NULL;
    } else {
      *n = (int)dims[1];
      *n_pos = (int)dims[2];
      rc = 0;
    }
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Dclose(d);
  return rc;
}

void rg_acts_token_ids_free(int32_t **ids, int *lens, int n) {
  for (int i = 0; ids && i < n; i++) free(ids[i]);
  free(ids);
  free(lens);
}

int rg_acts_read_token_ids(rg_acts_reader *r, long step, const char *split, int32_t ***ids, int **lens, int *n) {
  *ids = NULL;
  *lens = NULL;
  char rel[300];
  snprintf(rel, sizeof rel, "prompts/%s/token_ids", split);
  hid_t d = open_dataset(r, step, rel);
  if (d < 0) return -1;
  int rc = -1;
  hid_t space = H5Dget_space(d), ft = H5Dget_type(d);
  hid_t vint = H5Tvlen_create(H5T_NATIVE_INT32);
  hsize_t dim = 0;
  hvl_t *vl = NULL;
  if (space < 0 || ft < 0 || H5Tget_class(ft) != H5T_VLEN || H5Sget_simple_extent_ndims(space) != 1 ||
      H5Sget_simple_extent_dims(space, &dim, NULL) != 1 || dim == 0 || dim > MAX_COUNT) {
    rg_error_set("%s: /step_%ld/%s is not a 1-d vlen int dataset", r->path, step, rel);
  } else if (!holds_its_data(d, ft, (size_t)dim)) {
    /* Each element is a heap reference stored in the dataset itself, so a
       dataset that declares millions of prompts in a few bytes is corrupt;
       refuse it before allocating their descriptors (fuzz finding). */
    rg_error_set("%s: /step_%ld/%s declares %llu prompts but the file stores %llu bytes of them", r->path, step, rel,
                 (unsigned long long)dim, (unsigned long long)H5Dget_storage_size(d));
  } else if (!(vl = calloc((size_t)dim, sizeof *vl))) {
    rg_error_set("%s: out of memory", r->path);
  } else if (H5Dread(d, vint, H5S_ALL, H5S_ALL, H5P_DEFAULT, vl) < 0) {
    rg_error_set("%s: cannot read /step_%ld/%s", r->path, step, rel);
    free(vl);
    vl = NULL;
  } else {
    int m = (int)dim;
    int32_t **out = calloc((size_t)m, sizeof *out);
    int *len = calloc((size_t)m, sizeof *len);
    rc = out && len ? 0 : rg_error_set("%s: out of memory", r->path);
    for (int i = 0; rc == 0 && i < m; i++) {
      if (vl[i].len == 0 || vl[i].len > MAX_COUNT) {
        rc = rg_error_set("%s: /step_%ld/%s: prompt %d has %zu tokens", r->path, step, rel, i, vl[i].len);
      } else if (!(out[i] = malloc(vl[i].len * sizeof(int32_t)))) {
        rc = rg_error_set("%s: out of memory", r->path);
      } else {
        memcpy(out[i], vl[i].p, vl[i].len * sizeof(int32_t));
        len[i] = (int)vl[i].len;
      }
    }
    H5Dvlen_reclaim(vint, space, H5P_DEFAULT, vl);
    if (rc == 0) {
      *ids = out;
      *lens = len;
      *n = m;
    } else {
      rg_acts_token_ids_free(out, len, m);
    }
  }
  free(vl);
  H5Tclose(vint);
  if (ft >= 0) H5Tclose(ft);
  if (space >= 0) H5Sclose(space);
  H5Dclose(d);
  return rc;
}
