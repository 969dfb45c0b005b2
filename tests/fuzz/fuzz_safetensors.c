/* fuzz_safetensors: one .safetensors file through rg_safetensors_open
 * (header length, JSON header, dtypes, shapes, data_offsets, overlap), then
 * every tensor and the metadata accessors.
 * Input: the bytes of one .safetensors file. Seeds: shards of tiny models
 * written by `refgeo synth-model`, and the safetensors format vector of
 * tests/fixtures/hf_tiny. */
#include "fuzz_util.h"
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rg_safetensors *st = rg_safetensors_open(fuzz_write("model.safetensors", data, size));
  if (!st) return 0;
  for (int i = 0; i < rg_safetensors_n_tensors(st); i++) {
    const rg_tensor *t = rg_safetensors_tensor(st, i);
    fuzz_check_tensor(t, "safetensors");
    (void)rg_safetensors_find(st, t->name);
  }
  (void)rg_safetensors_metadata(st, "format");
  rg_safetensors_close(st);
  return 0;
}
