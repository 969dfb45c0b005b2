/* provenance.c: where a report's numbers come from (provenance.h). */
#include "report/provenance.h"

#include <dirent.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

#ifndef REFGEO_VERSION
#error "REFGEO_VERSION comes from CMakeLists.txt's project() version"
#endif

static int on_key(void *user, const char *section, const char *name, const char *value) {
  char **model = user;
  if (strcmp(section, "model") == 0 && strcmp(name, "model") == 0 && !*model) *model = strdup(value);
  return 1;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "HEX  NAME\n" for each regular file of DIR, sorted by name. */
static char *hash_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    rg_error_set("%s: cannot list the model folder", dir);
    return NULL;
  }
  char **names = NULL;
  size_t n = 0;
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char **grown = realloc(names, (n + 1) * sizeof *names);
    if (!grown || !(grown[n] = strdup(e->d_name))) rc = rg_error_set("out of memory");
    if (grown) names = grown, n += rc == 0;
  }
  closedir(d);
  qsort(names, n, sizeof *names, compare_names);
  char *text = NULL;
  size_t size = 0;
  FILE *out = rc == 0 ? open_memstream(&text, &size) : NULL;
  if (rc == 0 && !out) rc = rg_error_set("out of memory");
  for (size_t i = 0; i < n && rc == 0; i++) {
    char *path = rg_path_join(dir, names[i]), hex[65];
    if (!path) rc = rg_error_set("out of memory");
    else if (!rg_is_dir(path) && (rc = rg_sha256_file(path, hex)) == 0) fprintf(out, "%s  %s\n", hex, names[i]);
    free(path);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  if (out) fclose(out);
  if (rc == 0) return text;
  free(text);
  return NULL;
}

static char *hash_model(const char *model) {
  if (rg_is_dir(model)) return hash_dir(model);
  char hex[65];
  if (rg_sha256_file(model, hex) < 0) return NULL;
  const char *base = strrchr(model, '/');
  size_t len = 64 + 2 + strlen(base ? base + 1 : model) + 2;
  char *line = malloc(len);
  if (!line) rg_error_set("out of memory");
  else snprintf(line, len, "%s  %s\n", hex, base ? base + 1 : model);
  return line;
}

int rg_provenance_collect(rg_provenance *p, const char *config_ini) {
  *p = (rg_provenance){0};
  char date[32];
  time_t now = time(NULL);
  struct tm utc;
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
  if (!(p->version = strdup(REFGEO_VERSION)) || !(p->date_utc = strdup(date))) goto oom;
  if (config_ini) {
    int line = ini_parse_string(config_ini, on_key, &p->model);
    if (line != 0) {
      rg_provenance_free(p);
      return rg_error_set("config.ini: line %d does not parse", line);
    }
  }
  if (!p->model) return 0;
  if (!rg_path_exists(p->model)) {
    if (!(p->model_note = strdup("not on this machine: no sha256"))) goto oom;
    return 0;
  }
  if (!(p->model_sha256 = hash_model(p->model))) {
    rg_provenance_free(p);
    return -1;
  }
  return 0;
oom:
  rg_provenance_free(p);
  return rg_error_set("out of memory");
}

void rg_provenance_free(rg_provenance *p) {
  free(p->version);
  free(p->date_utc);
  free(p->model);
  free(p->model_sha256);
  free(p->model_note);
  *p = (rg_provenance){0};
}
