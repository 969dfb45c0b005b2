/* fuzz_checkpoints: the checkpoint series of `refgeo capture/geometry`,
 * through rg_checkpoints_from_manifest (a "step,path" CSV) and
 * rg_checkpoints_from_run_dir (a Trainer output directory of
 * checkpoint-<step> subdirectories), with and without a base model.
 * Input, framed as fuzz_util.h describes:
 *     \n@@ manifest.csv\nstep,path\n0,base.gguf\n100,checkpoint-100
 *     \n@@ dirs\ncheckpoint-100\ncheckpoint-0050
 * "dirs" names, one per line, the subdirectories to create in the run
 * directory (each with a config.json); names with '/' or a leading '.' are
 * skipped so nothing is created outside it. The manifest sits in the same
 * directory, next to an existing file base.gguf. Seeds: the manifests of
 * tests/test_geometry_checkpoints.c's form. */
#include <stdio.h>
#include <string.h>

#include "model/checkpoints.h"
#include "fuzz_util.h"

static const char *const PARTS[] = {"manifest.csv", "dirs"};
enum { N_PARTS = sizeof PARTS / sizeof PARTS[0], MAX_DIRS = 16 };

/* The run directory fuzz_dir()/run: base.gguf, the manifest (if any), and
 * the subdirectories DIRS names. The files come first, so a directory name
 * that is theirs is skipped rather than clobbering them. */
static const char *make_run_dir(const fuzz_part *manifest, const fuzz_part *dirs) {
  fuzz_remove_tree("run");
  fuzz_subdir("run");
  fuzz_write("run/base.gguf", (const uint8_t *)"GGUF", 4);
  if (manifest) fuzz_write("run/manifest.csv", manifest->data, manifest->size);
  const char *p = dirs ? (const char *)dirs->data : "";
  const char *end = dirs ? p + dirs->size : p;
  for (int n = 0; p < end && n < MAX_DIRS; n++) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    size_t len = (size_t)((eol ? eol : end) - p);
    char name[128];
    if (len > 0 && len < 64 && p[0] != '.' && !memchr(p, '/', len) && !memchr(p, '\0', len)) {
      snprintf(name, sizeof name, "run/%.*s", (int)len, p);
      if (fuzz_subdir(name)) {
        strcat(name, "/config.json");
        fuzz_write(name, (const uint8_t *)"{}", 2);
      }
    }
    p += len + 1;
  }
  static char path[512];
  snprintf(path, sizeof path, "%s/run", fuzz_dir());
  return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_part parts[N_PARTS];
  int n = fuzz_split(data, size, PARTS, N_PARTS, parts, N_PARTS);
  const fuzz_part *manifest = NULL, *dirs = NULL;
  for (int i = 0; i < n; i++) *(strcmp(parts[i].name, "dirs") == 0 ? &dirs : &manifest) = &parts[i];
  char run[512], base[600], csv[600];
  snprintf(run, sizeof run, "%s", make_run_dir(manifest, dirs));
  snprintf(base, sizeof base, "%s/base.gguf", run);
  snprintf(csv, sizeof csv, "%s/manifest.csv", run);
  rg_checkpoints_free(rg_checkpoints_from_run_dir(run, NULL));
  rg_checkpoints_free(rg_checkpoints_from_run_dir(run, base));
  if (manifest) {
    rg_checkpoints_free(rg_checkpoints_from_manifest(csv, NULL));
    rg_checkpoints_free(rg_checkpoints_from_manifest(csv, base));
  }
  return 0;
}
