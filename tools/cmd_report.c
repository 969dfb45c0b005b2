/* cmd_report: `refgeo report RUN_DIR`: a self-contained report.html of a
 * run and the analysis outputs named on the command line (src/report/). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "report/report.h"
#include "report/report_notebook.h"
#include "util/error.h"
#include "util/fileio.h"

/* DIR/<run-name>.ipynb, the run's name being the last part of its path. */
static int write_notebook(const rg_report_inputs *in, const char *dir) {
  char *run = strdup(in->run_dir);
  if (!run) return rg_error_set("out of memory");
  size_t len = strlen(run);
  while (len > 1 && run[len - 1] == '/') run[--len] = '\0';
  const char *slash = strrchr(run, '/'), *name = slash ? slash + 1 : run;
  char *file = malloc(strlen(name) + 7), *path = NULL;
  if (file) {
    sprintf(file, "%s.ipynb", name);
    path = rg_path_join(dir, file);
  }
  int rc = path ? rg_report_notebook_write(in, path) : rg_error_set("out of memory");
  if (rc == 0) printf("wrote %s\n", path);
  free(path);
  free(file);
  free(run);
  return rc;
}

int cmd_report(int argc, char **argv) {
  cli_list asr_dirs = {0}, overrefusal = {0};
  const char *geometry = NULL, *published = NULL, *out = NULL;
  const char *notebook_dir = "notebooks-export";
  bool notebook = false;
  const cli_opt opts[] = {
      {"asr", CLI_MULTI, &asr_dirs, "a `refgeo asr --out` folder (its asr.csv); repeatable"},
      {"geometry", CLI_STRING, &geometry, "a `refgeo geometry --out` folder (geometry.csv, carriers.csv, migration.csv)"},
      {"overrefusal", CLI_MULTI, &overrefusal, "a folder with refusal_rates.csv (`refgeo asr --prompts`); repeatable"},
      {"published", CLI_STRING, &published, "a published ASR curve CSV to overlay (data/published/*.csv)"},
      {"out", CLI_STRING, &out, "the HTML file to write (default RUN_DIR/report.html)"},
      {"notebook", CLI_BOOL, &notebook, "also write NOTEBOOK_DIR/<run-name>.ipynb (nbformat 4)"},
      {"notebook-dir", CLI_STRING, &notebook_dir, "the notebook's folder (default notebooks-export)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "RUN_DIR [--asr DIR ...] [--geometry DIR] [--overrefusal DIR ...] [--published CSV] "
                     "[--out FILE.html] [--notebook [--notebook-dir DIR]]\n\nexample: refgeo report runs/r2d2 --asr runs/r2d2/asr --geometry "
                     "runs/r2d2/geometry --published data/published/lan2026_r2d2.csv",
                     pos, 1, &n_pos);
  if (rc != 0) {
    cli_list_free(&asr_dirs);
    cli_list_free(&overrefusal);
    return rc > 0 ? 0 : cli_fail();
  }
  if (n_pos != 1) {
    cli_list_free(&asr_dirs);
    cli_list_free(&overrefusal);
    rg_error_set("give the run directory: refgeo report RUN_DIR");
    return cli_fail();
  }
  char *default_out = out ? NULL : rg_path_join(pos[0], "report.html");
  rg_report_inputs in = {.run_dir = pos[0], .asr_dirs = asr_dirs.items, .n_asr = asr_dirs.n,
                         .geometry_dir = geometry, .overrefusal_dirs = overrefusal.items,
                         .n_overrefusal = overrefusal.n, .published = published};
  const char *path = out ? out : default_out;
  rc = path ? rg_report_write(&in, path) : rg_error_set("out of memory");
  if (rc == 0) printf("wrote %s\n", path);
  if (rc == 0 && notebook) rc = write_notebook(&in, notebook_dir);
  free(default_out);
  cli_list_free(&asr_dirs);
  cli_list_free(&overrefusal);
  return rc == 0 ? 0 : cli_fail();
}
