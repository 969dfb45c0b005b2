/* fuzz_train_config: a `refgeo train` INI file through
 * rg_train_config_read (inih) and rg_train_config_check, then the resolved
 * config written out and read back, as --resume compares them.
 * Input: the bytes of one INI file. Seeds: data/r2d2-*.ini-like files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/train_config.h"
#include "fuzz_util.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rg_train_config c;
  if (rg_train_config_init(&c, "/nonexistent-data") != 0) abort();
  if (rg_train_config_read(&c, fuzz_write("run.ini", data, size)) == 0 && rg_train_config_check(&c) == 0) {
    /* what a run writes as RUN_DIR/config.ini reads back as the same config */
    const char *path = fuzz_write("config.ini", (const uint8_t *)"", 0);
    FILE *fp = fopen(path, "w");
    if (!fp || rg_train_config_write(&c, fp) != 0) abort();
    fclose(fp);
    rg_train_config back;
    if (rg_train_config_init(&back, "/nonexistent-data") != 0) abort();
    /* a single value longer than inih's line (a path of 190 bytes) is the
     * one thing that cannot be read back: an error, not a wrong config */
    if (rg_train_config_read(&back, path) == 0) {
      if (rg_train_config_check(&back) != 0 || rg_train_config_diff(&c, &back) != NULL) abort();
    } else if (!strstr(rg_error_get(), "a line longer than")) {
      abort();
    }
    rg_train_config_free(&back);
  }
  rg_train_config_free(&c);
  return 0;
}
