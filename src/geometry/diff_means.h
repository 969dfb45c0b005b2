/* diff_means.h: streaming difference-in-means of residual activations.
 *
 * Following refusal_direction (docs/refusal-geometry.md section 5.2), for
 * every eoi position p and layer l
 *   r[p,l] = mean_i x_harmful_i[p,l] - mean_j x_harmless_j[p,l]
 * with each float32 activation cast to float64 before it is summed.
 *
 * Positions are stored by index pi = 0 .. n_pos-1, which is the relative
 * position pi - n_pos (pi = 0 is position -n_pos, pi = n_pos-1 is -1, the last
 * prompt token). Counts are kept per (class, pos, layer), so activations may
 * arrive one vector at a time (e.g. from a per-layer capture hook).
 *
 * Ownership: the accumulator owns its sums; rg_diff_means_free releases them.
 * Output arrays are caller-owned.
 */
#ifndef RG_GEOMETRY_DIFF_MEANS_H
#define RG_GEOMETRY_DIFF_MEANS_H

typedef enum { RG_HARMLESS = 0, RG_HARMFUL = 1 } rg_prompt_class;

typedef struct {
  int n_pos, n_layers, d_model;
  double *sum[2];   /* [class][pi][layer][d_model] */
  long long *count[2]; /* [class][pi][layer] */
} rg_diff_means;

/* NULL with the error set on a bad shape or no memory. */
rg_diff_means *rg_diff_means_new(int n_pos, int n_layers, int d_model);
void rg_diff_means_free(rg_diff_means *dm);

/* Adds one activation vector x[d_model] of class CLS at (pi, layer). */
int rg_diff_means_add(rg_diff_means *dm, rg_prompt_class cls, int pi, int layer, const float *x);

/* Adds one prompt: acts is [n_layers][n_pos][d_model] (layers first, the
 * layout of /acts/<split>/resid_pre for one prompt). */
int rg_diff_means_add_prompt(rg_diff_means *dm, rg_prompt_class cls, const float *acts);

/* The class mean at (pi, layer) into out[d_model]. -1 with the error set when
 * that class has no samples there. */
int rg_diff_means_mean(const rg_diff_means *dm, rg_prompt_class cls, int pi, int layer, double *out);

/* r[pi, layer] = harmful mean - harmless mean into r[d_model]; -1 with the
 * error set when either class has no samples there. */
int rg_diff_means_direction(const rg_diff_means *dm, int pi, int layer, double *r);

/* The carrier matrix at LAYER: the n_pos directions r[pi, layer] as rows,
 * each scaled to unit norm, into C[n_pos][d_model] (section 10.4: row
 * normalization makes the spectrum measure how parallel the directions are,
 * not how long). A zero direction stays a zero row. */
int rg_diff_means_carrier_matrix(const rg_diff_means *dm, int layer, double *C);

/* The stack of directions across layers at position index PI: rows
 * r[pi, 0 .. n_layers-1], unit-normalized for the same reason (raw norms
 * grow with depth and would let the last layers dominate the spectrum),
 * into S[n_layers][d_model]. */
int rg_diff_means_layer_stack(const rg_diff_means *dm, int pi, double *S);

#endif
