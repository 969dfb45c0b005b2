/* model_load.c: rg_model_load, which reads a model with the loader its path
 * asks for.
 *
 * A directory is a Hugging Face checkpoint (model_hf.c), anything else is
 * read as GGUF (model_gguf.c). The loaders fill the rg_model; on failure this
 * file frees whatever they managed to build (rg_model_free), so a loader can
 * simply return -1 at any point. */
#include "model/model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_source.h"
#include "util/error.h"
#include "util/fileio.h"

/* m->n_params with checked additions: each tensor's element count fits in
 * int64 (the readers check shapes), but their sum is not bounded by the file
 * when tensors overlap, as GGUF allows. */
static int count_params(rg_model *m) {
  long long n = 0;
  for (int i = 0; i < m->n_tensors; i++)
    if (__builtin_add_overflow(n, rg_tensor_nelems(&m->tensors[i]), &n))
      return rg_error_set("%s: the tensors hold more than 2^63 parameters", m->path);
  m->n_params = n;
  return 0;
}

rg_model *rg_model_load(const char *path) {
  if (!rg_path_exists(path)) {
    rg_error_set("%s: %s", path, strerror(ENOENT));
    return NULL;
  }
  rg_model *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path)) || !(m->source = calloc(1, sizeof *m->source))) {
    rg_model_free(m);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  int rc = rg_is_dir(path) ? rg_model_load_hf(m, path) : rg_model_load_gguf(m, path);
  if (rc == 0) rc = count_params(m);
  if (rc != 0) {
    rg_model_free(m);
    return NULL;
  }
  return m;
}
