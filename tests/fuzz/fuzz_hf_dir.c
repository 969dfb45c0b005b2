/* fuzz_hf_dir: a Hugging Face model directory through rg_model_load
 * (config.json, single or sharded safetensors with the index, tokenizer.json,
 * tokenizer_config.json, chat_template.jinja), then the work `refgeo info`
 * and `refgeo tokenize` do on a loaded model.
 * Input: the directory's files framed as fuzz_util.h describes, e.g.
 *     \n@@ config.json\n{...}\n@@ model.safetensors\n<bytes>\n@@ tokenizer.json\n{...}
 * Files the input does not hold are absent from the directory. Seeds: tiny
 * models written by `refgeo synth-model` (single file and two shards) with the
 * hf_tiny tokenizers (tools/reference/make_fuzz_seeds.py frames them). */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

static const char *const FILES[] = {
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
};
enum { N_FILES = sizeof FILES / sizeof FILES[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_part parts[N_FILES];
  int n = fuzz_split(data, size, FILES, N_FILES, parts, N_FILES);
  fuzz_remove_tree("hf"); /* the directory holds exactly this input's parts */
  const char *dir = fuzz_subdir("hf");
  char name[64];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "hf/%s", parts[i].name);
    fuzz_write(name, parts[i].data, parts[i].size);
  }
  rg_model *m = rg_model_load(dir);
  if (!m) return 0;
  for (int i = 0; i < m->n_tensors; i++) fuzz_check_tensor(&m->tensors[i], "hf model");
  (void)rg_model_n_params(m);
  static const char text[] = "Hello, world! <|im_start|>user\n1234 caf\xc3\xa9";
  int32_t *ids = NULL;
  int n_ids = 0;
  if (rg_tokenize(m->tokenizer, text, sizeof text - 1, true, true, &ids, &n_ids) == 0)
    free(rg_detokenize(m->tokenizer, ids, n_ids, false));
  free(ids);
  rg_model_free(m);
  return 0;
}
