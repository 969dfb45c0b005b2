/* model.c: rg_model_load dispatch, freeing and lookups shared by both loaders.
 *
 * A directory is a Hugging Face checkpoint (model_hf.c), anything else is
 * read as GGUF (model_gguf.c). The loaders fill the rg_model; on failure this
 * file frees whatever they managed to build, so a loader can simply return -1
 * at any point.
 */
#include "model/model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/model_source.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "util/error.h"
#include "util/fileio.h"

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
  if (rc != 0) {
    rg_model_free(m);
    return NULL;
  }
  return m;
}

void rg_model_free(rg_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_tensors; i++) free(m->tensors[i].name);
  free(m->tensors);
  free(m->layers);
  if (m->tokenizer) rg_tokenizer_free(m->tokenizer);
  free(m->chat_template);
  if (m->source) {
    rg_gguf_close(m->source->gguf);
    for (int i = 0; i < m->source->n_shards; i++) rg_safetensors_close(m->source->shards[i]);
    free(m->source->shards);
    free(m->source);
  }
  free(m->path);
  free(m->id);
  free(m->format);
  free(m);
}

const rg_tensor *rg_model_find_tensor(const rg_model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
  return NULL;
}

/* m->tensors lists each stored tensor once; a tied lm_head is the embedding
 * tensor itself, not a second entry, so it is not counted twice. */
long long rg_model_n_params(const rg_model *m) {
  long long n = 0;
  for (int i = 0; i < m->n_tensors; i++) n += rg_tensor_nelems(&m->tensors[i]);
  return n;
}
