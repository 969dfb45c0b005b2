/* run_config.c: the INI file of `refgeo run` (run_config.h). */
#include "run_config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/ini_lines.h"

static const char *const RUN_KEYS[] = {"out", "stages", "train_config", "run_dir", "manifest", "model", "threads"};
static const char *const STAGE_SECTIONS[] = {"run", "train", "capture", "geometry", "verdict", "repro", "report", "asr"};

typedef struct {
  run_config *c;
  const char *dir; /* the INI file's folder */
  rg_ini_lines lines;
  int failed;
} reader;

/* "asr NAME" with NAME of letters, digits, '-' and '_' (it names a folder). */
static int is_asr_variant(const char *name) {
  if (strncmp(name, "asr ", 4) != 0 || !name[4]) return 0;
  for (const char *p = name + 4; *p; p++)
    if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || *p == '-' || *p == '_'))
      return 0;
  return 1;
}

static int known_section(const char *name) {
  for (size_t i = 0; i < sizeof STAGE_SECTIONS / sizeof STAGE_SECTIONS[0]; i++)
    if (strcmp(name, STAGE_SECTIONS[i]) == 0) return 1;
  return is_asr_variant(name);
}

/* VALUE with a leading "~/" read as $HOME/ (as the trainer's config reads
 * it), else resolved against DIR when DIR/VALUE exists, else a copy. */
static char *resolve(const char *dir, const char *value) {
  const char *home = getenv("HOME");
  if (value[0] == '~' && value[1] == '/' && home && home[0]) return rg_path_join(home, value + 2);
  if (value[0] && value[0] != '/' && dir) {
    char *joined = rg_path_join(dir, value), abs[PATH_MAX];
    if (joined && rg_path_exists(joined) && realpath(joined, abs)) {
      free(joined);
      return strdup(abs);
    }
    free(joined);
  }
  return strdup(value);
}

/* Errors below start with WHERE: "PATH:LINE" for a line of the file,
 * "--set S.K=V" for an override. */

/* The section NAME, appended when new. NULL with the error set. */
static run_section *section_named(run_config *c, const char *name, const char *where) {
  for (int i = 0; i < c->n_sections; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  if (!known_section(name)) {
    rg_error_set("%s: unknown section [%s] (run, train, capture, geometry, verdict, asr, asr NAME, repro, report)", where,
                 name);
    return NULL;
  }
  run_section *grown = realloc(c->sections, (size_t)(c->n_sections + 1) * sizeof *grown);
  if (!grown) {
    rg_error_set("out of memory");
    return NULL;
  }
  c->sections = grown;
  run_section *s = &c->sections[c->n_sections];
  *s = (run_section){.name = strdup(name)};
  if (!s->name) {
    rg_error_set("out of memory");
    return NULL;
  }
  c->n_sections++;
  return s;
}

/* Sets KEY of section S to VALUE (taken), replacing it when REPLACE, else a
 * second KEY is an error. Returns 0, or -1 with the error set. */
static int set_key(run_section *s, const char *key, char *value, int line, bool replace, const char *where) {
  if (!value) return rg_error_set("out of memory");
  if (strcmp(s->name, "run") == 0) {
    size_t k = 0;
    while (k < sizeof RUN_KEYS / sizeof RUN_KEYS[0] && strcmp(key, RUN_KEYS[k]) != 0) k++;
    if (k == sizeof RUN_KEYS / sizeof RUN_KEYS[0]) {
      free(value);
      return rg_error_set("%s: [run] has no key '%s' (out, stages, train_config, run_dir, manifest, model, threads)",
                          where, key);
    }
  }
  for (int k = 0; k < s->n_keys; k++) {
    if (strcmp(s->keys[k].key, key) != 0) continue;
    if (!replace) {
      free(value);
      return rg_error_set("%s: [%s] %s given twice", where, s->name, key);
    }
    free(s->keys[k].value);
    s->keys[k].value = value;
    return 0;
  }
  run_key *grown = realloc(s->keys, (size_t)(s->n_keys + 1) * sizeof *grown);
  char *k = strdup(key);
  if (!grown || !k) {
    if (grown) s->keys = grown;
    free(k);
    free(value);
    return rg_error_set("out of memory");
  }
  s->keys = grown;
  s->keys[s->n_keys++] = (run_key){.key = k, .value = value, .line = line};
  return 0;
}

static int on_key(reader *r, const char *section, const char *key, const char *value, int line) {
  run_config *c = r->c;
  char where[PATH_MAX + 16];
  snprintf(where, sizeof where, "%s:%d", c->path, line);
  if (!section[0]) return rg_error_set("%s: '%s' is outside any section", where, key);
  /* a section may not come back later in the file (a second [asr] would
   * silently merge with the first) */
  const bool current = c->n_sections > 0 && strcmp(c->sections[c->n_sections - 1].name, section) == 0;
  if (!current && run_config_section(c, section)) return rg_error_set("%s: section [%s] given twice", where, section);
  run_section *s = section_named(c, section, where);
  if (!s) return -1;
  /* `out` is where the user runs, not beside the INI file */
  return set_key(s, key, strcmp(key, "out") == 0 ? strdup(value) : resolve(r->dir, value), line, false, where);
}

static int on_key_counted(void *user, const char *section, const char *key, const char *value) {
  reader *r = user;
  if (r->failed || r->lines.too_long) return 0;
  if (on_key(r, section, key, value, r->lines.line) < 0) r->failed = 1;
  return !r->failed;
}

int run_config_read(run_config *c, const char *path) {
  *c = (run_config){.path = strdup(path)};
  FILE *fp = fopen(path, "r");
  char *dir = strdup(path);
  if (!c->path || !fp || !dir) {
    if (!fp) rg_error_set("%s: %s", path, strerror(errno));
    else rg_error_set("out of memory");
    if (fp) fclose(fp);
    free(dir);
    run_config_free(c);
    return -1;
  }
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  reader r = {.c = c, .dir = slash ? dir : ".", .lines = {.fp = fp, .path = path}};
  int bad_line = ini_parse_stream(rg_ini_read_line, &r.lines, on_key_counted, &r);
  fclose(fp);
  free(dir);
  if (bad_line > 0 && !r.failed && !r.lines.too_long) rg_error_set("%s:%d: this line does not parse", path, bad_line);
  if (bad_line != 0 || r.failed || r.lines.too_long) {
    run_config_free(c);
    return -1;
  }
  return 0;
}

int run_config_override(run_config *c, const char *assignment) {
  const char *eq = strchr(assignment, '='), *dot = strchr(assignment, '.');
  if (!eq || !dot || dot > eq || dot == assignment || eq == dot + 1)
    return rg_error_set("--set '%s': not SECTION.KEY=VALUE", assignment);
  char section[128], key[128], where[300];
  snprintf(section, sizeof section, "%.*s", (int)(dot - assignment), assignment);
  snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
  snprintf(where, sizeof where, "--set %s", assignment);
  run_section *s = section_named(c, section, where);
  return s ? set_key(s, key, strdup(eq + 1), 0, true, where) : -1;
}

void run_config_free(run_config *c) {
  for (int i = 0; i < c->n_sections; i++) {
    for (int k = 0; k < c->sections[i].n_keys; k++) free(c->sections[i].keys[k].key), free(c->sections[i].keys[k].value);
    free(c->sections[i].keys);
    free(c->sections[i].name);
  }
  free(c->sections);
  free(c->path);
  *c = (run_config){0};
}

const run_section *run_config_section(const run_config *c, const char *name) {
  for (int i = 0; i < c->n_sections; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  return NULL;
}

const char *run_section_get(const run_section *s, const char *key) {
  for (int k = 0; s && k < s->n_keys; k++)
    if (strcmp(s->keys[k].key, key) == 0) return s->keys[k].value;
  return NULL;
}
