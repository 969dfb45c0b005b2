/* fuzz_asr_curve: the curve CSVs `refgeo repro` compares, through
 * rg_published_read (the CSVs of data/published) and rg_asr_curve_read (the
 * measured asr.csv, whose derived columns it recomputes); the same bytes go
 * to both readers.
 * Input: the bytes of one CSV. Seeds: the CSVs of data/published and an asr.csv. */
#include "fuzz_util.h"
#include "harmbench/asr_curve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write("curve.csv", data, size);
  rg_published_curve p;
  if (rg_published_read(path, &p) == 0) rg_published_free(&p);
  rg_asr_curve c;
  if (rg_asr_curve_read(path, &c) == 0) rg_asr_curve_free(&c);
  return 0;
}
