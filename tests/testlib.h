/* testlib.h: helpers shared by the cmocka tests (inputs, fixtures, CLI runs). */
#ifndef RG_TESTLIB_H
#define RG_TESTLIB_H

/* The [pool] and [data] sections of the tiny-model R2D2 runs (test_train,
 * test_train_sp, test_train_zero, test_islands): a pool of 3 cases, 2 per
 * update, one GCG step of 8 candidates, and 6 utility prompts of 8 new
 * tokens, so that a run takes about a second in the sanitizer build. The
 * test tokenizer spells the longest case in 392-400 tokens, hence
 * max_case_tokens = 400. A config ends with it; [data] keys of its own, or
 * other sections, may follow. */
#define T_TINY_R2D2_SECTIONS                                                                                      \
  "[pool]\n"                                                                                                       \
  "pool_size = 3\n"                                                                                                \
  "cases_per_step = 2\n"                                                                                           \
  "gcg_steps = 1\n"                                                                                                \
  "search_width = 8\n"                                                                                             \
  "top_k = 4\n"                                                                                                    \
  "gcg_batch = 8\n"                                                                                                \
  "reset_every = 2\n"                                                                                              \
  "[data]\n"                                                                                                       \
  "utility_prompts = 6\n"                                                                                          \
  "utility_max_new_tokens = 8\n"                                                                                   \
  "utility_per_step = 2\n"                                                                                         \
  "utility_labels = assistant\n"                                                                                   \
  "max_case_tokens = 400\n"                                                                                        \
  "max_utility_tokens = 128\n"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h> /* cmocka needs these three first */
#include <cmocka.h>

#include "engine/forward.h"

/* The value of an environment variable set by tests/CMakeLists.txt; fails the
 * test (does not skip) when it is missing, since scripts/test.sh sets all. */
const char *t_env(const char *name);
/* With REFGEO_DEVICE naming a GPU backend (CTest's *_cuda / *_hip variants
 * of the model tests): exits 77 (CTest: skipped) saying why when there is
 * no GPU here, 1 when there is one but the backend does not start;
 * otherwise returns. Call first in main. */
void t_require_device(void);

/* REFGEO_FIXTURES/NAME as a malloc'd path. */
char *t_fixture_path(const char *name);
/* REFGEO_DATA/NAME (the repository's data/) as a malloc'd path. */
char *t_data_path(const char *name);
/* REFGEO_TMP/NAME as a malloc'd path. */
char *t_tmp_path(const char *name);

/* Reads a fixture of little-endian float32 values; *n gets the count. */
float *t_read_f32(const char *fixture_name, size_t *n);

/* Parses the JSON fixture REFGEO_FIXTURES/NAME (fails the test on error);
 * the caller frees the tree with cJSON_Delete. */
struct cJSON *t_read_json_fixture(const char *name);

/* FNV-1a 64-bit hash of a NUL-terminated string: fixture scripts store it per
 * field so that a data file is compared byte for byte without a second copy. */
unsigned long long t_fnv1a64(const char *s);

/* Runs "$REFGEO_BIN ARGS" through /bin/sh; returns the exit status and the
 * malloc'd stdout / stderr (either pointer may be NULL if not wanted). */
int t_run_cli(const char *args, char **out, char **err);

/* Runs "[$REFGEO_MPIRUN --oversubscribe -np NP] $REFGEO_BIN ARGS" (NP 0:
 * no mpirun) with stdin from /dev/null (mpirun forwards it); returns the
 * exit status (128 when it did not exit) and stdout and stderr together,
 * malloc'd, in *out. */
int t_run_ranks(int np, const char *args, char **out);
/* The same for the shell command line CMD as given. */
int t_run_shell(const char *cmd, char **out);

/* REFGEO_TMP/NAME, removed if it exists (malloc'd path; not created). */
char *t_fresh_tmp_dir(const char *name);

/* Every parameter of the model in DIR (GGUF or an HF directory, such as a
 * checkpoint) as float32, concatenated in rg_weights order (an island's
 * theta.f32, a state's params.f32); *N gets the count. malloc'd; fails the
 * test on a model that does not load. */
float *t_model_params(const char *dir, size_t *n);

/* The tiny Hugging Face model NAME of tests/fixtures/hf_tiny as a malloc'd
 * directory path. No weights are committed: on first use in a process the
 * model is written under REFGEO_TMP/hf_tiny-PID/NAME by `refgeo
 * synth-model` with the arguments in hf_tiny/NAME.expected.json "synth"
 * (the formula tools/reference/make_hf_tiny.py checked bit for bit against
 * transformers' save_pretrained), and the committed config.json,
 * tokenizer.json and tokenizer_config.json are copied over its own. */
char *t_hf_tiny(const char *name);

/* Writes LEN bytes to REFGEO_TMP/NAME and returns the malloc'd path. */
char *t_write_tmp(const char *name, const void *data, size_t len);

/* Runs "h5dump -w 0 ARGS FILE" (hdf5-tools: an HDF5 reader independent of
 * refgeo's) and returns its stdout, malloc'd; fails the test if it fails. */
char *t_h5dump(const char *args, const char *file);
/* The float32 dataset DSET of FILE as little-endian values, through h5dump's
 * binary export (malloc'd); *n gets the count. */
float *t_h5dump_floats(const char *file, const char *dset, size_t *n);

/* A session on its own weights of M (a CPU backend of THREADS threads,
 * weights in MODE): the common case of a test that needs one session.
 * Fails the test on error. t_session_free frees the session, its weights
 * and their backend. */
rg_session *t_session(const rg_model *m, int threads, rg_weight_mode mode, int max_seqs, int max_ctx,
                      const rg_session_opts *opts);
void t_session_free(rg_session *s);

#endif
