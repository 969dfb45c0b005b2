/* fuzz_gguf: a GGUF file through rg_gguf_open, every metadata getter, and
 * rg_model_load (config, tensor binding, GGUF tokenizer), then the work
 * `refgeo info` and `refgeo tokenize` do on a loaded model.
 * Input: the bytes of one .gguf file. Seeds: tiny Llama models written by
 * tools/reference/make_fuzz_seeds.py with gguf-py (llama.cpp's writer). */
#include <stdbool.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* Reads every key through the getter for its type, as the loaders do. */
static void walk_metadata(const rg_gguf *g) {
  for (int64_t i = 0; i < rg_gguf_n_kv(g); i++) {
    const char *key = rg_gguf_kv_key(g, i);
    int64_t iv;
    double fv;
    size_t len;
    rg_gguf_type et;
    int64_t count;
    (void)rg_gguf_get_i64(g, key, &iv);
    (void)rg_gguf_get_f64(g, key, &fv);
    free(rg_gguf_dup_str(g, key));
    (void)rg_gguf_get_str(g, key, &len);
    if (rg_gguf_get_arr(g, key, &et, &count) == 0) {
      if (et == RG_GGUF_STRING)
        for (int64_t k = 0; k < count && k < 64; k++) (void)rg_gguf_arr_str(g, key, k, &len);
      else
        (void)rg_gguf_arr_data(g, key);
    }
  }
  for (int64_t i = 0; i < rg_gguf_n_tensors(g); i++) fuzz_check_tensor(rg_gguf_tensor(g, i), "gguf");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write("model.gguf", data, size);
  rg_gguf *g = rg_gguf_open(path);
  if (g) {
    walk_metadata(g);
    rg_gguf_close(g);
  }
  rg_model *m = rg_model_load(path);
  if (!m) return 0;
  for (int i = 0; i < m->n_tensors; i++) fuzz_check_tensor(&m->tensors[i], "model");
  (void)rg_model_n_params(m);
  static const char text[] = "Hello, world! <|im_start|>user\n1234 caf\xc3\xa9 \xe2\x96\x81x";
  int32_t *ids = NULL;
  int n = 0;
  if (rg_tokenize(m->tokenizer, text, sizeof text - 1, true, true, &ids, &n) == 0) free(rg_detokenize(m->tokenizer, ids, n, false));
  free(ids);
  rg_model_free(m);
  return 0;
}
