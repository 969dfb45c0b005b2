/* checkpoints.h: a series of model checkpoints (steps of one fine-tuning
 * run), the input of capture, geometry and asr.
 *
 * Three sources: one model alone (rg_checkpoints_single: step 0), or,
 * picked by rg_checkpoints_open from what PATH is:
 *   a directory   a fine-tuning run as the Hugging Face Trainer writes it:
 *                 subdirectories "checkpoint-<step>" (decimal digits), each a
 *                 HF model directory (must hold config.json). Other entries
 *                 are ignored, among them "checkpoint-<step>.tmp" folders
 *                 that a killed writer left. With a DIR/SHA256SUMS (a run
 *                 of refgeo train; util/manifest.h) every file it lists of
 *                 each checkpoint is checked against its sha256, and a
 *                 checkpoint it does not list is refused. Step 0 is BASE
 *                 (the model fine-tuning started from) or a "checkpoint-0"
 *                 directory, not both.
 *   a file        a manifest CSV with the header "step,path" and one row per
 *                 checkpoint; path is a GGUF file or HF directory, relative
 *                 to the manifest's directory unless absolute. BASE, if given,
 *                 is step 0 and the manifest must then not list step 0.
 * Steps are non-negative decimal integers; the series is sorted by step
 * numerically and must start at step 0 (every drift is measured against it).
 * Errors (one line, naming the file and, for manifests, the line): a
 * checkpoint file whose sha256 differs, a non-integer step, a duplicate step, a path that does not exist, no step 0,
 * no checkpoints.
 *
 * Ownership: the series owns its paths; rg_checkpoints_free releases them.
 */
#ifndef RG_MODEL_CHECKPOINTS_H
#define RG_MODEL_CHECKPOINTS_H

typedef struct {
  long step;
  char *path; /* as usable by rg_model_load */
} rg_checkpoint;

typedef struct {
  int n;
  rg_checkpoint *items; /* ascending step; items[0].step == 0 */
} rg_checkpoint_series;

/* BASE may be NULL. NULL with the error set on failure. */
rg_checkpoint_series *rg_checkpoints_open(const char *path, const char *base);
rg_checkpoint_series *rg_checkpoints_from_run_dir(const char *dir, const char *base);
rg_checkpoint_series *rg_checkpoints_from_manifest(const char *csv_path, const char *base);
/* The one-checkpoint series of the model PATH (GGUF file or HF directory)
 * as step 0; PATH is not checked here (loading it reports a bad one). */
rg_checkpoint_series *rg_checkpoints_single(const char *path);
void rg_checkpoints_free(rg_checkpoint_series *s);

#endif
