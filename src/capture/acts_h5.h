/* acts_h5.h: the HDF5 activation file written by `refgeo capture`.
 *
 * Layout (docs/refusal-geometry.md section 12, with one group per
 * checkpoint so that a checkpoint series reads as one file):
 *
 *   /                          attrs: format="steer-acts/1", model_id,
 *                              model_revision, model_dtype, n_layers, d_model,
 *                              chat_template, eoi_token_ids (int32[]),
 *                              hook_convention="transformer_lens",
 *                              weight_processing="none"
 *   /step_<N>/                 attrs: step (int64), checkpoint (path),
 *                              complete (uint8, 1 once everything is flushed)
 *   /step_<N>/prompts/<split>/text, category   vlen utf-8 [n] ("" = none)
 *   /step_<N>/prompts/<split>/token_ids        vlen int32 [n], attrs: padding_side="left"
 *   /step_<N>/acts/<split>/<site>              float32 | float16 [n_layers, n, n_pos, d_model]
 *        attrs: hook_names = ["blocks.0.hook_resid_pre", ...] (TransformerLens
 *        names live in attributes; link names are dot-free), positions =
 *        [-n_pos .. -1] (int32), layer_axis = 0
 *
 * Files: PATH holds the root attributes and, per complete step, an HDF5
 * external link /step_<N> -> "<basename of PATH>.step_<N>.h5":/step_<N>; the
 * step's group and data live in that file, beside PATH. HDF5 (and so h5py)
 * follows external links on open, so readers use the paths above as if the
 * groups were in PATH; the step files must stay in PATH's directory. (Files
 * of refgeo's older one-file layout, with the groups in PATH itself, read
 * and resume the same way.)
 *
 * <site> is rg_hook_site_name ("resid_pre", ...). Datasets are chunked one
 * (layer, prompt) at a time, [1, 1, n_pos, d_model], and deflate-compressed.
 * float16 files use an IEEE half type built from HDF5 1.10's float type
 * (sign 15, exponent 10..14 bias 15, mantissa 0..9), which h5py and numpy
 * read as float16; HDF5 rounds float32 to it on write.
 *
 * Resumability: HDF5 1.10 has no journal, so a process killed while it
 * writes can leave that file's metadata broken, and its SWMR mode, which
 * keeps a file readable while it is appended to, cannot create groups or
 * datasets; appending steps to one file in place is therefore not safe. No
 * file is written under its final name. rg_acts_open builds a new PATH as
 * "PATH.tmp" and renames it into place; rg_acts_begin_step creates the step
 * file as "PATH.step_<N>.h5.tmp"; rg_acts_end_step sets complete = 1, closes,
 * fsyncs and renames it to "PATH.step_<N>.h5", then copies PATH (attributes
 * and links only, a few KB) to "PATH.tmp", adds the step's link there and
 * renames that over PATH. A kill at any moment leaves PATH as it was after
 * the last finished step (or absent), plus at most a temp file or an
 * unlinked step file that the next run overwrites. Each activation byte is
 * written once: a series of S steps writes its data plus S small copies of
 * PATH (the old one-file scheme copied the whole file per step, about S^2/2
 * step sizes of I/O).
 *
 * Ownership: the rg_acts_file owns its HDF5 handles; rg_acts_close releases
 * them. Every function returns 0 / a handle, or -1 / NULL with the error set
 * ("PATH: ...").
 */
#ifndef RG_CAPTURE_ACTS_H5_H
#define RG_CAPTURE_ACTS_H5_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/hooks.h"

typedef struct rg_acts_file rg_acts_file;

typedef struct {
  const char *model_id, *model_revision, *model_dtype; /* NULL = "" */
  const char *chat_template;                          /* NULL = "" */
  int n_layers, d_model;
  const int32_t *eoi_token_ids;
  int n_eoi;
  bool float16; /* store activations as float16 instead of float32 */
} rg_acts_meta;

/* Creates PATH, or reopens it to resume when it exists: then its n_layers
 * and d_model must equal META's. */
rg_acts_file *rg_acts_open(const char *path, const rg_acts_meta *meta);
void rg_acts_close(rg_acts_file *f);

/* 1 if /step_<step> exists and is complete, else 0. */
int rg_acts_has_step(rg_acts_file *f, long step);

/* Starts /step_<step> in its own temp file. One step at a time. */
int rg_acts_begin_step(rg_acts_file *f, long step, const char *checkpoint);
/* Marks the step complete, puts its file in place and links it from PATH. */
int rg_acts_end_step(rg_acts_file *f);

/* Writes the prompts of SPLIT: texts[n], categories[n] (NULL array or entries
 * = none), token_ids[i] of length n_tokens[i]. */
int rg_acts_write_prompts(rg_acts_file *f, const char *split, int n, const char *const *texts,
                          const char *const *categories, const int32_t *const *token_ids, const int *n_tokens);

/* Creates /step_<N>/acts/<split>/<site> for n prompts x n_pos positions and
 * then takes one prompt at a time: acts[n_layers][n_pos][d_model] float32.
 * Several sites may be open at once (one forward pass fills them all); each
 * must be ended, with all n prompts written, before the step ends. */
int rg_acts_begin_site(rg_acts_file *f, const char *split, rg_hook_site site, int n, int n_pos);
int rg_acts_write_prompt(rg_acts_file *f, rg_hook_site site, int prompt, const float *acts);
int rg_acts_end_site(rg_acts_file *f, rg_hook_site site);

#endif
