/* fuzz_behaviors: a HarmBench behaviors CSV through rg_behaviors_read, then
 * the lookups and the DirectRequest test case `refgeo asr` builds from it.
 * Input: the bytes of one CSV. Seeds: behaviors CSVs built from
 * tests/fixtures/harmbench (HarmBench's columns and R2D2's "Category" form). */
#include <stdlib.h>

#include "fuzz_util.h"
#include "harmbench/behaviors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rg_behaviors *b = rg_behaviors_read(fuzz_write("behaviors.csv", data, size));
  if (!b) return 0;
  for (size_t i = 0; i < b->n; i++) {
    const rg_behavior *x = &b->items[i];
    if (rg_behaviors_find(b, x->id) != x) abort(); /* ids are unique once read */
    (void)rg_behavior_is_contextual(x);
    (void)rg_behavior_is_copyright(x);
    (void)rg_behavior_has_tag(x, "context");
    free(rg_behavior_direct_request(x));
  }
  rg_behaviors_free(b);
  return 0;
}
