/* acts_h5_read.h: reading the HDF5 activation file of `refgeo capture`
 * (layout in capture/acts_h5.h).
 *
 * Only complete step groups (attr complete = 1) are listed: an incomplete
 * one is a copy that was cut short (refgeo's older one-file layout). A step
 * linked to a step file that does not open is an error naming that file. Every shape read from the file is
 * checked against the root attributes (n_layers, d_model) and against
 * overflow before anything is allocated, so a corrupt or foreign file gives
 * a one-line error, never a crash. float16 datasets are converted to float32
 * by HDF5 on read.
 *
 * Ownership: the reader owns its handle and the info it returns
 * (rg_acts_reader_info stays valid until rg_acts_reader_close); arrays
 * returned through out-pointers are malloc'd and owned by the caller.
 * Functions return 0 / a handle, or -1 / NULL with the error set
 * ("PATH: ...").
 */
#ifndef RG_CAPTURE_ACTS_H5_READ_H
#define RG_CAPTURE_ACTS_H5_READ_H

#include <stdint.h>

#include "engine/hooks.h"

typedef struct rg_acts_reader rg_acts_reader;

typedef struct {
  int n_layers, d_model;
  int n_eoi;
  const int32_t *eoi_token_ids; /* [n_eoi] */
  const char *model_id, *chat_template;
  int n_steps;
  const long *steps; /* ascending, complete steps only */
} rg_acts_reader_info;

rg_acts_reader *rg_acts_reader_open(const char *path);
void rg_acts_reader_close(rg_acts_reader *r);
const rg_acts_reader_info *rg_acts_reader_info_of(const rg_acts_reader *r);
const char *rg_acts_reader_path(const rg_acts_reader *r);

/* The checkpoint attribute of /step_<step> into a malloc'd string. */
char *rg_acts_read_checkpoint(rg_acts_reader *r, long step);

/* /step_<step>/acts/<split>/<site> into a malloc'd float32 array
 * *acts[n_layers][n][n_pos][d_model] (the file's order); *n and *n_pos get
 * the prompt and position counts. */
int rg_acts_read_site(rg_acts_reader *r, long step, const char *split, rg_hook_site site, float **acts, int *n,
                      int *n_pos);

/* /step_<step>/prompts/<split>/token_ids: *ids[n] malloc'd arrays (free each
 * and the outer one, or use rg_acts_token_ids_free) of lengths *lens[n]. */
int rg_acts_read_token_ids(rg_acts_reader *r, long step, const char *split, int32_t ***ids, int **lens, int *n);
void rg_acts_token_ids_free(int32_t **ids, int *lens, int n);

#endif
