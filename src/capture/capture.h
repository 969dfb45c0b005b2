/* capture.h: the activation-capture pipeline behind `refgeo capture`.
 *
 * For every checkpoint of a series (step 0 first) and every prompt split,
 * each prompt is rendered as one user turn with a generation prompt by the
 * chat template (the model's own, or one named by the caller; templates that
 * carry a default system message, like SmolLM2's chatml, keep it), tokenized
 * with special tokens parsed and BOS as the template wants (the one rule of
 * model/prompt_encode.h), and run through
 * the model. The chosen hook sites of every layer are kept at the
 * post-instruction ("eoi") positions: n_pos = the token count of
 * rg_chat_post_instruction() (tokenized without BOS, specials parsed), i.e.
 * the last n_pos tokens of each prompt (refusal-geometry.md section 4).
 * Results go to an acts_h5 file (acts_h5.h for the layout).
 *
 * Prompts are prefilled `batch` at a time into a padding-free session,
 * once each whatever the number of sites: one hook, set for every requested
 * site of every layer, copies the last n_pos rows of each sequence into that
 * site's per-prompt [n_layers][n_pos][d_model] buffer, and every site's
 * dataset takes the batch's prompts before the next batch runs. Memory stays
 * bounded by one batch per site whatever the split size.
 *
 * Resuming: checkpoints already complete in the output file are skipped
 * ("step N: already captured" on the log); a step cut short is redone from
 * scratch (acts_h5 keeps the file valid across a kill).
 */
#ifndef RG_CAPTURE_CAPTURE_H
#define RG_CAPTURE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/checkpoints.h"
#include "capture/prompts.h"

typedef struct {
  const char *name;             /* split name in the file, e.g. "harmful_train" */
  const rg_prompt_set *prompts; /* borrowed */
} rg_capture_split;

typedef struct {
  const rg_capture_split *splits;
  int n_splits;
  uint32_t sites;            /* mask of RG_HOOK_BIT(site); 0 = resid_pre */
  const char *chat_template; /* renderer name; NULL = detect from each model */
  bool float16;              /* store float16 instead of float32 */
  int batch;                 /* prompts per prefill; <= 0 = 16 */
  int threads;               /* <= 0 = all CPUs */
  FILE *log;                 /* progress and tokens/s lines; NULL = quiet */
} rg_capture_opts;

/* Captures every checkpoint of SERIES into OUT_PATH (created, or reopened to
 * resume). Every checkpoint must have the first one's n_layers, d_model and
 * eoi tokens. Returns 0, or -1 with the error set. */
int rg_capture_series(const rg_checkpoint_series *series, const char *out_path, const rg_capture_opts *opts);

/* Parses a comma-separated list of site names ("resid_pre,mlp_out") into a
 * mask. Returns 0, or -1 with the error set (naming FLAG). */
int rg_capture_parse_sites(const char *flag, const char *list, uint32_t *mask);

#endif
