#include "run_config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/ini_lines.h"

static const char *const RUN_KEYS[] = {"out", "stages", "train_config", "run_dir", "manifest", "model", "threads"};
static const char *const STAGE_SECTIONS[] = {"run", "train", "capture", "geometry", "repro", "report", "asr"};

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

/* VALUE resolved against DIR when DIR/VALUE exists, else a copy. */
static char *resolve(const char *dir, const char *value) {
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

static run_section *section_of(run_config *c, const char *name, int line, int *failed) {
  if (c->n_sections > 0 && strcmp(c->sections[c->n_sections - 1].name, name) == 0)
    return &c->sections[c->n_sections - 1];
  if (run_config_section(c, name)) {
    rg_error_set("%s:%d: section [%s] given twice", c->path, line, name);
    *failed = 1;
    return NULL;
  }
  if (!known_section(name)) {
    rg_error_set("%s:%d: unknown section [%s] (run, train, capture, geometry, asr, asr NAME, repro, report)",
                 c->path, line, name);
    *failed = 1;
    return NULL;
  }
  run_section *grown = realloc(c->sections, (size_t)(c->n_sections + 1) * sizeof *grown);
  if (!grown) return NULL;
  c->sections = grown;
  run_section *s = &c->sections[c->n_sections];
  *s = (run_section){.name = strdup(name)};
  if (!s->name) return NULL;
  c->n_sections++;
  return s;
}

static int on_key(void *user, const char *section, const char *key, const char *value, int line) {
  reader *r = user;
  run_config *c = r->c;
  if (!section[0]) return rg_error_set("%s:%d: '%s' is outside any section", c->path, line, key), r->failed = 1, 0;
  run_section *s = section_of(c, section, line, &r->failed);
  if (!s) {
    if (!r->failed) rg_error_set("out of memory"), r->failed = 1;
    return 0;
  }
  if (run_section_get(s, key)) return rg_error_set("%s:%d: [%s] %s given twice", c->path, line, section, key), r->failed = 1, 0;
  if (strcmp(section, "run") == 0) {
    size_t k = 0;
    while (k < sizeof RUN_KEYS / sizeof RUN_KEYS[0] && strcmp(key, RUN_KEYS[k]) != 0) k++;
    if (k == sizeof RUN_KEYS / sizeof RUN_KEYS[0]) {
      rg_error_set("%s:%d: [run] has no key '%s' (out, stages, train_config, run_dir, manifest, model, threads)",
                   c->path, line, key);
      r->failed = 1;
      return 0;
    }
  }
  run_key *grown = realloc(s->keys, (size_t)(s->n_keys + 1) * sizeof *grown);
  if (!grown) return rg_error_set("out of memory"), r->failed = 1, 0;
  s->keys = grown;
  /* `out` is where the user runs, not beside the INI file */
  run_key kv = {.key = strdup(key), .value = strcmp(key, "out") == 0 ? strdup(value) : resolve(r->dir, value),
                .line = line};
  s->keys[s->n_keys++] = kv;
  if (!kv.key || !kv.value) return rg_error_set("out of memory"), r->failed = 1, 0;
  return 1;
}

static int on_key_counted(void *user, const char *section, const char *key, const char *value) {
  reader *r = user;
  if (r->failed || r->lines.too_long) return 0;
  return on_key(r, section, key, value, r->lines.line);
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
