/* fuzz_prompts: prompt sets through rg_prompts_load in each of its three
 * formats (refusal_direction JSON, HarmBench CSV, one prompt per line), then
 * the subsampling `refgeo capture --n` applies.
 * Input, framed as fuzz_util.h describes, one part per format to load:
 *     \n@@ prompts.json\n[{"instruction": ..., "category": ...}]\n@@ prompts.txt\n...
 * Seeds: the prompt sets of data/prompts. */
#include <string.h>

#include "capture/prompts.h"
#include "fuzz_util.h"

static const char *const PARTS[] = {"prompts.json", "prompts.csv", "prompts.txt"};
enum { N_PARTS = sizeof PARTS / sizeof PARTS[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_part parts[N_PARTS];
  int n = fuzz_split(data, size, PARTS, N_PARTS, parts, N_PARTS);
  for (int i = 0; i < n; i++) {
    rg_prompt_set *s = rg_prompts_load(fuzz_write(parts[i].name, parts[i].data, parts[i].size));
    if (!s) continue;
    (void)rg_prompts_subsample(s, s->n > 1 ? s->n / 2 : 1, parts[i].size);
    rg_prompts_free(s);
  }
  return 0;
}
