/* manifest.c: sha256sum-format checksum lists (manifest.h). */
#include "util/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

static bool is_hex64(const char *s) {
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

int rg_manifest_read(rg_manifest *m, const char *path, bool must_exist) {
  memset(m, 0, sizeof *m);
  if (!must_exist && !rg_path_exists(path)) return 0;
  size_t len = 0;
  char *text = rg_read_file(path, &len);
  if (!text) return -1;
  int rc = 0, line = 1;
  for (char *p = text; rc == 0 && *p; line++) {
    char *nl = strchr(p, '\n');
    if (!nl) {
      rc = rg_error_set("%s:%d: no newline at the end (cut short?)", path, line);
      break;
    }
    *nl = '\0';
    /* sha256sum's text mode: "HEX  NAME"; its binary mode "HEX *NAME" */
    if (nl - p < 67 || !is_hex64(p) || p[64] != ' ' || (p[65] != ' ' && p[65] != '*'))
      rc = rg_error_set("%s:%d: not a sha256sum line (HEX  NAME)", path, line);
    if (rc == 0) {
      char hex[65];
      memcpy(hex, p, 64);
      hex[64] = '\0';
      rc = rg_manifest_set(m, p + 66, hex);
    }
    p = nl + 1;
  }
  free(text);
  if (rc < 0) rg_manifest_free(m);
  return rc;
}

const char *rg_manifest_get(const rg_manifest *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->e[i].name, name) == 0) return m->e[i].hex;
  return NULL;
}

int rg_manifest_set(rg_manifest *m, const char *name, const char hex[65]) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->e[i].name, name) == 0) {
      memcpy(m->e[i].hex, hex, 65);
      return 0;
    }
  if (m->n == m->cap) {
    const int cap = m->cap ? 2 * m->cap : 8;
    rg_manifest_entry *e = realloc(m->e, (size_t)cap * sizeof *e);
    if (!e) return rg_error_set("out of memory");
    m->e = e, m->cap = cap;
  }
  if (!(m->e[m->n].name = strdup(name))) return rg_error_set("out of memory");
  memcpy(m->e[m->n].hex, hex, 65);
  m->n++;
  return 0;
}

int rg_manifest_write(const rg_manifest *m, const char *path) {
  rg_atomic_file f;
  if (rg_atomic_open(&f, path) < 0) return -1;
  for (int i = 0; i < m->n; i++) fprintf(f.fp, "%s  %s\n", m->e[i].hex, m->e[i].name);
  return rg_atomic_commit(&f);
}

void rg_manifest_free(rg_manifest *m) {
  for (int i = 0; i < m->n; i++) free(m->e[i].name);
  free(m->e);
  memset(m, 0, sizeof *m);
}

int rg_manifest_check_hex(const rg_manifest *m, const char *manifest_path, const char *file_path, const char *name,
                          const char *hex) {
  const char *want = rg_manifest_get(m, name);
  if (!want) return rg_error_set("%s: not listed in %s (written by an interrupted run, or added by hand)", file_path,
                                 manifest_path);
  if (strcmp(want, hex) != 0)
    return rg_error_set("%s: sha256 %.12s... differs from %.12s... in %s: the file changed after it was written "
                        "(corrupted?)",
                        file_path, hex, want, manifest_path);
  return 0;
}

int rg_manifest_check(const rg_manifest *m, const char *manifest_path, const char *dir, const char *name) {
  char *path = rg_path_join(dir, name), hex[65];
  int rc = path ? 0 : rg_error_set("out of memory");
  if (rc == 0 && !rg_manifest_get(m, name)) rc = rg_manifest_check_hex(m, manifest_path, path, name, "");
  if (rc == 0) rc = rg_sha256_file(path, hex);
  if (rc == 0) rc = rg_manifest_check_hex(m, manifest_path, path, name, hex);
  free(path);
  return rc;
}
