/* fileio.c: reading whole files, memory maps, and atomic writes (fileio.h). */
#include "util/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fault.h"

char *rg_read_file(const char *path, size_t *len_out) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    rg_error_set("%s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
    rg_error_set("%s: is a directory, expected a file", path);
    fclose(fp);
    return NULL;
  }
  if (fseek(fp, 0, SEEK_END) != 0) {
    rg_error_set("%s: cannot seek: %s", path, strerror(errno));
    fclose(fp);
    return NULL;
  }
  long size = ftell(fp);
  rewind(fp);
  if (size < 0) {
    rg_error_set("%s: cannot tell size", path);
    fclose(fp);
    return NULL;
  }
  char *buf = malloc((size_t)size + 1);
  if (!buf) {
    rg_error_set("%s: out of memory reading %ld bytes", path, size);
    fclose(fp);
    return NULL;
  }
  size_t got = fread(buf, 1, (size_t)size, fp);
  fclose(fp);
  if (got != (size_t)size) {
    rg_error_set("%s: short read (%zu of %ld bytes)", path, got, size);
    free(buf);
    return NULL;
  }
  buf[size] = '\0';
  if (len_out) *len_out = (size_t)size;
  return buf;
}

int rg_mmap_open(const char *path, rg_mmap *out) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return rg_error_set("%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return rg_error_set("%s: %s", path, strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return rg_error_set("%s: is a directory, expected a file", path);
  }
  if (st.st_size == 0) {
    close(fd);
    return rg_error_set("%s: empty file", path);
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return rg_error_set("%s: mmap failed: %s", path, strerror(errno));
  out->data = p;
  out->size = (size_t)st.st_size;
  return 0;
}

void rg_mmap_close(rg_mmap *m) {
  if (m->data) munmap(m->data, m->size);
  m->data = NULL;
  m->size = 0;
}

int rg_atomic_open(rg_atomic_file *f, const char *path) {
  memset(f, 0, sizeof *f);
  size_t n = strlen(path) + 32;
  f->path = strdup(path);
  f->tmp_path = malloc(n);
  if (!f->path || !f->tmp_path) {
    free(f->path);
    free(f->tmp_path);
    return rg_error_set("%s: out of memory", path);
  }
  snprintf(f->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
  f->fp = fopen(f->tmp_path, "wb");
  if (!f->fp) {
    rg_error_set("%s: cannot create: %s", f->tmp_path, strerror(errno));
    free(f->path);
    free(f->tmp_path);
    memset(f, 0, sizeof *f);
    return -1;
  }
  return 0;
}

static void atomic_release(rg_atomic_file *f) {
  free(f->path);
  free(f->tmp_path);
  memset(f, 0, sizeof *f);
}

int rg_atomic_commit(rg_atomic_file *f) {
  int rc = 0;
  if (fflush(f->fp) != 0 || ferror(f->fp)) rc = rg_error_set("%s: write failed: %s", f->path, strerror(errno));
  if (rc == 0 && fsync(fileno(f->fp)) != 0) rc = rg_error_set("%s: fsync failed: %s", f->path, strerror(errno));
  if (fclose(f->fp) != 0 && rc == 0) rc = rg_error_set("%s: close failed: %s", f->path, strerror(errno));
  if (rc == 0 && rename(f->tmp_path, f->path) != 0) rc = rg_error_set("%s: rename failed: %s", f->path, strerror(errno));
  if (rc != 0) unlink(f->tmp_path);
  atomic_release(f);
  return rc;
}

void rg_atomic_abort(rg_atomic_file *f) {
  if (f->fp) fclose(f->fp);
  if (f->tmp_path) unlink(f->tmp_path);
  atomic_release(f);
}

int rg_fsync_rename(const char *tmp_path, const char *path) {
  int fd = open(tmp_path, O_RDONLY);
  if (fd < 0) return rg_error_set("%s: %s", tmp_path, strerror(errno));
  int rc = fsync(fd) == 0 ? 0 : rg_error_set("%s: fsync failed: %s", tmp_path, strerror(errno));
  close(fd);
  if (rc == 0 && rename(tmp_path, path) != 0) rc = rg_error_set("%s: rename failed: %s", path, strerror(errno));
  return rc;
}

int rg_copy_file(const char *src, const char *dst) {
  FILE *in = fopen(src, "rb");
  if (!in) return rg_error_set("%s: %s", src, strerror(errno));
  FILE *out = fopen(dst, "wb");
  if (!out) {
    fclose(in);
    return rg_error_set("%s: cannot create: %s", dst, strerror(errno));
  }
  enum { CHUNK = 1 << 20 };
  char *buf = malloc(CHUNK);
  int rc = buf ? 0 : rg_error_set("%s: out of memory", src);
  size_t n;
  while (rc == 0 && (n = fread(buf, 1, CHUNK, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = rg_error_set("%s: write failed: %s", dst, strerror(errno));
  if (rc == 0 && ferror(in)) rc = rg_error_set("%s: read failed", src);
  free(buf);
  fclose(in);
  if (fclose(out) != 0 && rc == 0) rc = rg_error_set("%s: close failed: %s", dst, strerror(errno));
  return rc;
}

int rg_write_file_atomic(const char *path, const void *data, size_t len) {
  rg_atomic_file f;
  if (rg_atomic_open(&f, path) != 0) return -1;
  if (len && fwrite(data, 1, len, f.fp) != len) {
    rg_error_set("%s: write failed: %s", path, strerror(errno));
    rg_atomic_abort(&f);
    return -1;
  }
  return rg_atomic_commit(&f);
}

int rg_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int rg_path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int rg_mkdir_p(const char *path) {
  char *tmp = strdup(path);
  if (!tmp) return rg_error_set("%s: out of memory", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
      rg_error_set("%s: cannot create directory: %s", tmp, strerror(errno));
      free(tmp);
      return -1;
    }
    *p = '/';
  }
  int rc = 0;
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) rc = rg_error_set("%s: cannot create directory: %s", tmp, strerror(errno));
  free(tmp);
  return rc;
}

char *rg_path_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) return NULL;
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

int rg_remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? 0 : rg_error_set("%s: %s", dir, strerror(errno));
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *p = rg_path_join(dir, e->d_name);
    rg_fault_point("remove-file"); /* tests: a kill with a folder half deleted */
    if (!p || unlink(p) != 0) rc = rg_error_set("%s: cannot remove: %s", p ? p : dir, p ? strerror(errno) : "out of memory");
    free(p);
  }
  closedir(d);
  if (rc == 0 && rmdir(dir) != 0) rc = rg_error_set("%s: cannot remove: %s", dir, strerror(errno));
  return rc;
}

/* The writer's pid of a temp name "NAME.tmp.<pid>", or -1. */
static long temp_owner(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot || dot - name < 5 || strncmp(dot - 4, ".tmp", 4) != 0 || !dot[1]) return -1;
  for (const char *q = dot + 1; *q; q++)
    if (*q < '0' || *q > '9') return -1;
  return strtol(dot + 1, NULL, 10);
}

/* Whether process PID has ended: none exists, or only its zombie (its files
 * closed, its exit not yet collected by its parent). */
static bool process_ended(long pid) {
  if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
  char path[64], text[256] = "";
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return false;
  const size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  const char *paren = strrchr(text, ')'); /* "PID (COMM) STATE ..." */
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

int rg_remove_stale_temps(const char *dir, int depth, int *n_removed) {
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT || errno == ENOTDIR ? 0 : rg_error_set("%s: %s", dir, strerror(errno));
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *p = rg_path_join(dir, e->d_name);
    if (!p) {
      rc = rg_error_set("out of memory");
      break;
    }
    struct stat st;
    const long pid = temp_owner(e->d_name);
    if (lstat(p, &st) != 0) {
      /* gone meanwhile */
    } else if (S_ISDIR(st.st_mode)) {
      if (depth > 0) rc = rg_remove_stale_temps(p, depth - 1, n_removed);
    } else if (S_ISREG(st.st_mode) && pid > 0 && pid != (long)getpid() && process_ended(pid)) {
      /* its writer is dead: a kill between the temp file and its rename */
      if (unlink(p) != 0 && errno != ENOENT) rc = rg_error_set("%s: cannot remove: %s", p, strerror(errno));
      else if (n_removed) (*n_removed)++;
    }
    free(p);
  }
  closedir(d);
  return rc;
}

int rg_sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return rg_error_set("%s: cannot sync: %s", dir, strerror(err));
  }
  close(fd);
  return 0;
}

char *rg_path_relative(const char *from, const char *to) {
  char *a = realpath(from, NULL), *b = realpath(to, NULL), *out = NULL;
  if (!a || !b) {
    rg_error_set("%s: %s", a ? to : from, strerror(errno));
    goto end;
  }
  /* the longest common prefix that ends at a component boundary */
  size_t common = 0;
  for (size_t i = 0; a[i] && a[i] == b[i]; i++)
    if (a[i] == '/') common = i;
  size_t la = strlen(a), lb = strlen(b);
  if (strcmp(a, b) == 0 || (strncmp(a, b, la) == 0 && b[la] == '/')) common = la;
  else if (strncmp(a, b, lb) == 0 && a[lb] == '/') common = lb;
  size_t ups = 0; /* FROM's components below the common prefix */
  for (size_t i = common; i < la;) {
    while (a[i] == '/') i++;
    if (a[i]) ups++;
    while (a[i] && a[i] != '/') i++;
  }
  const char *rest = b + common + (b[common] == '/');
  size_t n = 3 * ups + strlen(rest) + 2;
  if (!(out = malloc(n))) {
    rg_error_set("out of memory");
    goto end;
  }
  out[0] = '\0';
  for (size_t i = 0; i < ups; i++) strcat(out, i + 1 < ups || *rest ? "../" : "..");
  strcat(out, rest);
  if (!*out) strcpy(out, ".");
end:
  free(a);
  free(b);
  return out;
}
