/* fuzz_r2d2_data: R2D2's behaviors CSV and away-target JSON through
 * rg_r2d2_data_load, then the invariants the trainer's pool relies on.
 * Input: parts "behaviors.csv" and "targets.json" (fuzz_util.h framing).
 * Seeds: small files in the formats of data/harmbench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/r2d2_data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const NAMES[] = {"behaviors.csv", "targets.json"};
  fuzz_part parts[4];
  const int n = fuzz_split(data, size, NAMES, 2, parts, 4);
  fuzz_write("behaviors.csv", (const uint8_t *)"", 0);
  fuzz_write("targets.json", (const uint8_t *)"", 0);
  for (int i = 0; i < n; i++) fuzz_write(parts[i].name, parts[i].data, parts[i].size);
  char csv[4096], json[4096];
  snprintf(csv, sizeof csv, "%s/behaviors.csv", fuzz_dir());
  snprintf(json, sizeof json, "%s/targets.json", fuzz_dir());
  const char *cs[] = {csv}, *js[] = {json};
  rg_r2d2_data *d = rg_r2d2_data_load(cs, 1, js, 1);
  if (!d) return 0;
  for (int i = 0; i < d->n; i++) {
    if (d->items[i].n_targets < 1) abort(); /* the pool draws a target of every behavior */
    for (int k = 0; k < d->items[i].n_targets; k++)
      if (!d->items[i].targets[k][0]) abort(); /* empty targets are dropped */
  }
  for (int i = 0; i < d->n_init; i++)
    if (d->init[i] < 0 || d->init[i] >= d->n || !d->items[d->init[i]].eligible_init) abort();
  rg_r2d2_data_free(d);
  return 0;
}
