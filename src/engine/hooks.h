/* hooks.h: activation capture sites and residual-stream interventions.
 *
 * Sites follow TransformerLens names, per block L:
 *   blocks.L.hook_resid_pre   input of block L (= HF hidden_states[L])
 *   blocks.L.hook_attn_out    attention output (after o_proj)
 *   blocks.L.hook_resid_mid   resid_pre + attn_out
 *   blocks.L.hook_mlp_out     MLP output (after down_proj)
 *   blocks.L.hook_resid_post  resid_mid + mlp_out (= input of block L+1)
 * Hooks see the values AFTER any intervention at that site.
 *
 * Interventions follow refusal_direction (hook_utils.py):
 *  - directional ablation: x <- x - (x . r_hat) r_hat with
 *    r_hat = r / (|r| + 1e-8), at resid_pre, attn_out and mlp_out of EVERY
 *    layer and every position (so resid_mid/resid_post are ablated too);
 *  - activation addition: x <- x + c * r (r unnormalized) at resid_pre of
 *    one layer, every position.
 * If both are set, block L's input is ablated first, then c*r is added.
 * Interventions apply to every forward step, generation included.
 */
#ifndef RG_HOOKS_H
#define RG_HOOKS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  RG_HOOK_RESID_PRE = 0,
  RG_HOOK_ATTN_OUT,
  RG_HOOK_RESID_MID,
  RG_HOOK_MLP_OUT,
  RG_HOOK_RESID_POST,
  RG_HOOK_N_SITES
} rg_hook_site;

#define RG_HOOK_BIT(site) (1u << (site))

/* Called once per (site, layer) per forward call with the captured rows of
 * the batch: rows[n_rows, d_model] float32 (valid only during the call),
 * and for row i its sequence id seq[i] and position pos[i] within that
 * sequence (positions count from 0 per sequence). Not called when the
 * batch has no captured row. */
typedef void (*rg_hook_fn)(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d_model,
                           const int *seq, const int *pos);

typedef struct {
  rg_hook_fn fn;
  void *user;
  /* layer_sites[L] is a mask of RG_HOOK_BIT(site) for block L; the array has
   * n_layers entries and is owned by the caller (it must outlive its use). */
  const uint32_t *layer_sites;
  /* NULL: every token of the batch is captured. Otherwise from_pos[S] (one
   * entry per sequence id of the session) is the first position of
   * sequence S that is captured: the session gathers those rows on the
   * backend and downloads only them (e.g. the last few positions of each
   * prompt). Owned by the caller, as layer_sites. */
  const int *from_pos;
} rg_capture;

typedef struct {
  const float *ablate_dir; /* [d_model] direction r (need not be unit), NULL = off */
  const float *actadd_vec; /* [d_model] r, NULL = off */
  int actadd_layer;        /* block whose input gets + actadd_coeff * r */
  float actadd_coeff;
} rg_intervention;

/* "blocks.5.hook_resid_pre" into buf (size n). Returns buf. */
char *rg_hook_name(rg_hook_site site, int layer, char *buf, size_t n);
/* "resid_pre" etc. */
const char *rg_hook_site_name(rg_hook_site site);
/* Parses "blocks.L.hook_SITE" (L >= 0). Returns 0, or -1 with the error set. */
int rg_hook_parse(const char *name, rg_hook_site *site, int *layer);

#endif
