/* run_config.h: the one INI file of `refgeo run` (read with inih).
 *
 * Sections (docs/cli.md, `refgeo run`):
 *   [run]      out (the run directory, required), stages, train_config,
 *              run_dir / manifest / model (the checkpoints when there is no
 *              train stage), threads;
 *   [train]    trainer keys (`refgeo train --help`) over train_config's;
 *   [capture] [geometry] [repro] [report]
 *              that command's flags, one key per flag: `max_val = 64` is
 *              --max-val 64, `float16 = true` a switch, `= false` leaves it
 *              off;
 *   [asr] [asr NAME] ...
 *              one `refgeo asr` each (outputs RUN/asr, RUN/asr-NAME).
 * A value naming a file or folder that exists relative to the INI file's
 * folder is resolved against it (`harmbench/x.csv` beside data/demo.ini),
 * "~/" at the start of a value is $HOME/; any other value is kept as
 * written. "{out}" in a stage's value stands for
 * the run directory, so a stage can name an earlier stage's output:
 * `ablate = {out}/geometry/directions.h5:step=0`.
 *
 * Ownership: the config owns every string; run_config_free releases them.
 */
#ifndef RG_RUN_CONFIG_H
#define RG_RUN_CONFIG_H

typedef struct {
  char *key, *value;
  int line;
} run_key;

typedef struct {
  char *name; /* "run", "train", "asr xstest", ... */
  run_key *keys;
  int n_keys;
} run_section;

typedef struct {
  char *path; /* the INI file as given */
  run_section *sections;
  int n_sections;
} run_config;

/* Reads PATH. Errors (one line, "PATH:LINE: ..."): a line that does not
 * parse, an unknown section, a section or key given twice, a [run] key that
 * is not one of its keys. Returns 0 or -1 (C is then empty). */
int run_config_read(run_config *c, const char *path);
void run_config_free(run_config *c);

/* Applies "SECTION.KEY=VALUE" (a command-line override: `--set
 * train.updates=10`), adding or replacing the key; the section must be one
 * a config may have. VALUE is kept as written (relative to where refgeo
 * runs). Returns 0, or -1 with the error set. */
int run_config_override(run_config *c, const char *assignment);

/* The section NAME, or NULL. */
const run_section *run_config_section(const run_config *c, const char *name);
/* The value of KEY in S (S may be NULL), or NULL. */
const char *run_section_get(const run_section *s, const char *key);

#endif
