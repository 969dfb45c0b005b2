/* fuzz_test_cases: HarmBench's JSON interchange files through
 * rg_test_cases_read (test_cases.json) and rg_completions_read
 * (completions.json); the same bytes go to both readers.
 * Input: the bytes of one JSON file. Seeds: tests/fixtures/harmbench's
 * completions files and a test_cases.json of the same behaviors. */
#include "fuzz_util.h"
#include "harmbench/completions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write("cases.json", data, size);
  rg_completions c;
  if (rg_test_cases_read(path, &c) == 0) rg_completions_free(&c);
  if (rg_completions_read(path, &c) == 0) rg_completions_free(&c);
  return 0;
}
