/* fuzz_tokenizer: a tokenizer.json (with an optional tokenizer_config.json)
 * through rg_tokenizer_from_json, then encoding and decoding of the fuzzer's
 * text, and decoding of the fuzzer's ids (in range or not).
 * Input, framed as fuzz_util.h describes:
 *     \n@@ tokenizer.json\n{...}\n@@ tokenizer_config.json\n{...}
 *     \n@@ text\n<bytes to encode>\n@@ ids\n<little-endian int32s to decode>
 * Seeds: the tokenizers of tests/fixtures/tokenizer and tests/fixtures/hf_tiny
 * with prompts of data/prompts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

static const char *const PARTS[] = {"tokenizer.json", "tokenizer_config.json", "text", "ids"};
enum { N_PARTS = sizeof PARTS / sizeof PARTS[0] };

static const fuzz_part *part(const fuzz_part *parts, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(parts[i].name, name) == 0) return &parts[i];
  return NULL;
}

static void round_trip(const rg_tokenizer *t, const fuzz_part *text, bool parse_special) {
  int32_t *ids = NULL;
  int n = 0;
  if (rg_tokenize(t, (const char *)text->data, text->size, parse_special, true, &ids, &n) == 0) {
    free(rg_detokenize(t, ids, n, false));
    free(rg_detokenize(t, ids, n, true));
  }
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_part parts[8];
  int n = fuzz_split(data, size, PARTS, N_PARTS, parts, 8);
  const fuzz_part *json = part(parts, n, "tokenizer.json");
  const fuzz_part *config = part(parts, n, "tokenizer_config.json");
  if (!json) return 0;
  char json_path[512];
  snprintf(json_path, sizeof json_path, "%s", fuzz_write("tokenizer.json", json->data, json->size));
  const char *config_path = config ? fuzz_write("tokenizer_config.json", config->data, config->size) : NULL;
  rg_tokenizer *t = rg_tokenizer_from_json(json_path, config_path);
  if (!t) return 0;

  const fuzz_part *text = part(parts, n, "text");
  if (text) {
    round_trip(t, text, true);
    round_trip(t, text, false);
  }
  const fuzz_part *ids = part(parts, n, "ids");
  if (ids && ids->size >= 4) {
    int n_ids = (int)(ids->size / 4 < 4096 ? ids->size / 4 : 4096);
    int32_t *v = malloc((size_t)n_ids * sizeof *v);
    memcpy(v, ids->data, (size_t)n_ids * sizeof *v);
    free(rg_detokenize(t, v, n_ids, false));
    for (int i = 0; i < n_ids; i++) {
      const char *s = rg_token_text(t, v[i]);
      if (s) (void)rg_token_lookup(t, s);
      (void)rg_token_is_special(t, v[i]);
    }
    free(v);
  }
  (void)rg_tokenizer_vocab_size(t);
  rg_tokenizer_free(t);
  return 0;
}
