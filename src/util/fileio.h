/* fileio.h: reading whole files, memory maps, and atomic writes.
 *
 * Every writer of a result file goes through rg_atomic_open/commit so that a
 * killed run never leaves a half-written file: data goes to "PATH.tmp.PID",
 * which is fsync'd and renamed over PATH on commit.
 */
#ifndef RG_FILEIO_H
#define RG_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* Reads a whole file into a NUL-terminated malloc'd buffer (caller frees).
 * Returns NULL and sets the error ("PATH: <strerror>") on failure. */
char *rg_read_file(const char *path, size_t *len_out);

/* A read-only memory map of a whole file. */
typedef struct {
  void *data;
  size_t size;
} rg_mmap;

/* Maps PATH read-only. Returns 0, or -1 with the error set. */
int rg_mmap_open(const char *path, rg_mmap *out);
void rg_mmap_close(rg_mmap *m);

/* Atomic writer: rg_atomic_open gives a FILE* on a temp file next to path. */
typedef struct {
  FILE *fp;
  char *path;
  char *tmp_path;
} rg_atomic_file;

int rg_atomic_open(rg_atomic_file *f, const char *path);
/* Flushes, fsyncs and renames into place. Returns 0 or -1 (error set);
 * the temp file is removed on failure. */
int rg_atomic_commit(rg_atomic_file *f);
/* Discards the temp file (on an error path). */
void rg_atomic_abort(rg_atomic_file *f);

/* Writes a whole buffer atomically. */
int rg_write_file_atomic(const char *path, const void *data, size_t len);

/* For writers that build a temp file themselves (HDF5): fsyncs TMP_PATH and
 * renames it over PATH. Returns 0, or -1 with the error set. */
int rg_fsync_rename(const char *tmp_path, const char *path);

/* Copies SRC to DST byte for byte (DST is created or truncated). Returns 0,
 * or -1 with the error set. */
int rg_copy_file(const char *src, const char *dst);

/* 1 if PATH is a directory, 0 if not or absent. */
int rg_is_dir(const char *path);
/* 1 if PATH exists. */
int rg_path_exists(const char *path);
/* mkdir -p. Returns 0 or -1 with the error set. */
int rg_mkdir_p(const char *path);
/* Removes DIR and the files in it (not subfolders); an absent DIR is no
 * error. Returns 0 or -1 with the error set. */
int rg_remove_flat_dir(const char *dir);
/* Removes the temp files "NAME.tmp.<pid>" (rg_atomic_open's) in DIR, and
 * in its subfolders down to DEPTH levels, whose writer is dead: no process
 * <pid> exists, or only its zombie. A live pid's file is kept (it may be another writer's, or a
 * reused pid: only a dead one proves the file stale). Only a folder's
 * single writer should call this (util/run_lock.h). *N_REMOVED (may be
 * NULL) is increased by the count. Returns 0 or -1 with the error set. */
int rg_remove_stale_temps(const char *dir, int depth, int *n_removed);
/* fsync of a directory, so that the renames in it survive a power loss.
 * Returns 0 or -1 with the error set. */
int rg_sync_dir(const char *dir);
/* Joins a directory and a name into a malloc'd path. */
/* TO as a path relative to the folder FROM (both must exist; both are
 * resolved with realpath first), e.g. "../runs/demo", or "." when they are
 * the same. malloc'd; NULL with the error set. */
char *rg_path_relative(const char *from, const char *to);

char *rg_path_join(const char *dir, const char *name);

#endif
