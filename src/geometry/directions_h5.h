/* directions_h5.h: the refusal directions `refgeo geometry` computes, as an
 * HDF5 file that h5py and numpy read directly (OUT_DIR/directions.h5), and
 * the lookup behind the CLI's --ablate / --actadd FILE[:step=S,pos=P,layer=L].
 *
 * Layout (in h5py, f["step_0/resid_pre"][layer, n_pos + pos] is the float32
 * direction at layer `layer` and eoi position `pos` < 0):
 *   /                     attrs format="refgeo-directions/1", n_layers, d_model,
 *                               positions int32 [-n_pos..-1],
 *                               hook_convention="transformer_lens"
 *   /step_<N>/            attrs step int64, checkpoint (the model directory),
 *                               selected_pos int32, selected_layer int32: the
 *                               best admissible carrier of that step (RD's
 *                               selection); selected_layer = -1 and
 *                               selected_pos = 0 when none was admissible
 *   /step_<N>/resid_pre   float32 [n_layers, n_pos, d_model]: the difference in
 *                         means harmful_train - harmless_train of resid_pre
 *                         (not normalised), layer-major like the activations
 *                         attrs hook_names ["blocks.0.hook_resid_pre", ...],
 *                               positions int32 [-n_pos..-1], layer_axis = 0
 * The file is written whole to PATH.tmp and renamed into place.
 */
#ifndef RG_DIRECTIONS_H5_H
#define RG_DIRECTIONS_H5_H

#include <stdbool.h>

typedef struct {
  long step;
  const char *checkpoint;
  const float *dirs;                /* [n_layers][n_pos][d_model] */
  int selected_pos, selected_layer; /* selected_layer < 0: none admissible */
} rg_directions_step;

/* Writes PATH with the N steps. Returns 0, or -1 with the error set. */
int rg_directions_write(const char *path, int n_layers, int n_pos, int d_model, const rg_directions_step *steps,
                        int n);

/* Which direction of a file: each field is optional. */
typedef struct {
  long step;
  int pos, layer;
  bool has_step, has_pos, has_layer;
} rg_direction_ref;

/* Splits SPEC = "FILE" or "FILE:step=S,pos=P,layer=L" (any subset of the
 * keys, in any order) into a malloc'd *FILE and *REF. The suffix is the part
 * after the last ':' when it starts with one of the keys, so a FILE may
 * contain ':'. Returns 0, or -1 with the error set. */
int rg_direction_spec_parse(const char *spec, char **file, rg_direction_ref *ref);

/* Reads the direction REF names in PATH into out[d_model]; D_MODEL must be
 * the file's. A missing step is the file's only step (a file of several steps
 * needs one); missing pos and layer are that step's selected carrier (both or
 * neither must be given). On success REF is filled in with what was used.
 * With D_MODEL <= 0 and OUT NULL, only REF is resolved (any width).
 * Returns 0, or -1 with one line naming the file and the problem. */
int rg_directions_read(const char *path, rg_direction_ref *ref, int d_model, float *out);

#endif
