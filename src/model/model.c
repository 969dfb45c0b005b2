/* model.c: freeing an rg_model, its lookups, and the helpers both loaders
 * share (model_source.h). rg_model_load, which calls the loaders, is in
 * model_load.c, above them, so that no loader depends on the file that
 * dispatches to it. */
#include "model/model.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model_source.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

int rg_layer_index(const char *name, const char *prefix, const char **rest) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0) return -1;
  const char *p = name + n;
  if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return -1;
  long long layer = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    layer = layer * 10 + (*p - '0');
    if (layer > INT_MAX) return -1;
  }
  if (*p != '.') return -1;
  if (rest) *rest = p + 1;
  return (int)layer;
}

static int int_cmp(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Distinct layer numbers among the tensor names: at most n_tensors, whatever
 * the numbers are, so a count checked against it is bounded by the file. */
static int count_layers_held(const rg_model *m, int *held) {
  *held = 0;
  int *ids = malloc((m->n_tensors ? (size_t)m->n_tensors : 1) * sizeof *ids);
  if (!ids) return rg_error_set("%s: out of memory", m->path);
  int n = 0;
  for (int i = 0; i < m->n_tensors; i++) {
    int layer = rg_layer_index(m->tensors[i].name, "model.layers.", NULL);
    if (layer >= 0) ids[n++] = layer;
  }
  qsort(ids, (size_t)n, sizeof *ids, int_cmp);
  for (int i = 0; i < n; i++) *held += i == 0 || ids[i] != ids[i - 1];
  free(ids);
  return 0;
}

int rg_model_alloc_layers(rg_model *m, const char *count_key) {
  int held;
  if (count_layers_held(m, &held) != 0) return -1;
  if (m->cfg.n_layers > held)
    return rg_error_set("%s: %s is %d but the weights hold tensors for %d layer%s", m->path, count_key,
                        m->cfg.n_layers, held, held == 1 ? "" : "s");
  m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
  if (!m->layers) return rg_error_set("%s: out of memory", m->path);
  return 0;
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
long long rg_model_n_params(const rg_model *m) { return m->n_params; }
