/* manifest.h: checksum lists in `sha256sum`'s format, one "HEX  NAME\n"
 * line per file (64 lowercase hex digits, two blanks, a path relative to
 * the manifest's folder), so that `cd DIR && sha256sum -c SHA256SUMS`
 * checks a run directory without refgeo.
 *
 * A run directory and each training state keep one (docs/ARCHITECTURE.md,
 * "Run directory integrity"): every file that is read back later has its
 * digest there, the manifest is written after the files it lists and
 * replaced atomically, and a reader refuses a file whose digest differs.
 *
 * Ownership: an rg_manifest owns its entries; rg_manifest_free releases
 * them. Strings passed in are copied.
 */
#ifndef RG_UTIL_MANIFEST_H
#define RG_UTIL_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>

#define RG_MANIFEST_NAME "SHA256SUMS"

typedef struct {
  char *name;
  char hex[65];
} rg_manifest_entry;

typedef struct {
  rg_manifest_entry *e;
  int n, cap;
} rg_manifest;

/* Reads PATH into M. An absent PATH gives an empty M when MUST_EXIST is
 * false. Returns 0, or -1 with the error set ("PATH: ..."; "PATH:LINE: not
 * a sha256sum line"). */
int rg_manifest_read(rg_manifest *m, const char *path, bool must_exist);
/* The digest listed for NAME, or NULL. */
const char *rg_manifest_get(const rg_manifest *m, const char *name);
/* Adds NAME or replaces its digest. Returns 0 or -1 (out of memory). */
int rg_manifest_set(rg_manifest *m, const char *name, const char hex[65]);
/* Writes M to PATH atomically (a temp file, fsync'd, renamed). */
int rg_manifest_write(const rg_manifest *m, const char *path);
void rg_manifest_free(rg_manifest *m);

/* Checks the file DIR/NAME against M's entry for NAME (MANIFEST_PATH names
 * M in messages). Returns 0, or -1 with one line naming the file: no entry,
 * unreadable, or a digest that differs. */
int rg_manifest_check(const rg_manifest *m, const char *manifest_path, const char *dir, const char *name);
/* The same error for a digest computed elsewhere (while a file was read):
 * 0 when HEX is NAME's entry. */
int rg_manifest_check_hex(const rg_manifest *m, const char *manifest_path, const char *file_path, const char *name,
                          const char *hex);

#endif
