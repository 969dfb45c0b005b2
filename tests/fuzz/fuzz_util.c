/* fuzz_util.c: what every libFuzzer harness of tests/fuzz/ shares (fuzz_util.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "fuzz_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/dtype.h"
#include "util/error.h"

static char dir[256];
static char path[512];

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

static void remove_dir(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

const char *fuzz_dir(void) {
  if (dir[0]) return dir;
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/refgeo-fuzz.%ld", base, (long)getpid());
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    perror(dir);
    abort();
  }
  atexit(remove_dir); /* a crash leaves it, with the input that caused it */
  return dir;
}

static const char *path_of(const char *name) {
  snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
  return path;
}

void fuzz_remove_tree(const char *name) { nftw(path_of(name), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

const char *fuzz_subdir(const char *name) {
  static char sub[512];
  snprintf(sub, sizeof sub, "%s/%s", fuzz_dir(), name);
  struct stat st;
  if (mkdir(sub, 0700) != 0 && (errno != EEXIST || stat(sub, &st) != 0 || !S_ISDIR(st.st_mode))) return NULL;
  return sub;
}

const char *fuzz_write(const char *name, const uint8_t *data, size_t size) {
  const char *p = path_of(name);
  FILE *f = fopen(p, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror(p);
    abort();
  }
  return p;
}

static const uint8_t SEP[] = "\n@@ ";
enum { SEP_LEN = sizeof SEP - 1 };

/* The next separator at or after FROM, or NULL. */
static const uint8_t *next_sep(const uint8_t *from, const uint8_t *end) {
  while (from && (size_t)(end - from) >= SEP_LEN) {
    const uint8_t *hit = memchr(from, '\n', (size_t)(end - from));
    if (!hit || (size_t)(end - hit) < SEP_LEN) return NULL;
    if (memcmp(hit, SEP, SEP_LEN) == 0) return hit;
    from = hit + 1;
  }
  return NULL;
}

int fuzz_split(const uint8_t *data, size_t size, const char *const *names, int n_names, fuzz_part *parts,
               int max_parts) {
  const uint8_t *end = data + size;
  int n = 0;
  for (const uint8_t *sep = next_sep(data, end); sep && n < max_parts;) {
    const uint8_t *name = sep + SEP_LEN;
    const uint8_t *eol = memchr(name, '\n', (size_t)(end - name));
    if (!eol) break;
    const uint8_t *body = eol + 1;
    const uint8_t *next = next_sep(eol, end);
    const uint8_t *body_end = next ? next : end;
    for (int i = 0; i < n_names; i++)
      if (strlen(names[i]) == (size_t)(eol - name) && memcmp(names[i], name, (size_t)(eol - name)) == 0) {
        parts[n++] = (fuzz_part){names[i], body, body_end > body ? (size_t)(body_end - body) : 0};
        break;
      }
    sep = next;
  }
  return n;
}

void fuzz_check_refusal(const char *where) {
  const char *err = rg_error_get();
  if (!strstr(err, "out of memory")) return;
  fprintf(stderr, "fuzz oracle: %s: refused for lack of memory: %s\n", where, err);
  abort();
}

void fuzz_check_tensor(const rg_tensor *t, const char *where) {
  const char *why = NULL;
  __int128 elems = 1;
  if (t->n_dims < 1 || t->n_dims > RG_MAX_DIMS) why = "n_dims out of range";
  for (int d = 0; !why && d < RG_MAX_DIMS; d++) {
    if (t->ne[d] < 0) why = "negative dimension";
    else if (d >= t->n_dims && t->ne[d] != 1) why = "unused dimension is not 1";
    else if ((elems *= t->ne[d]) > INT64_MAX) why = "element count overflows int64";
  }
  const rg_dtype_info *info = why ? NULL : rg_dtype_get(t->type);
  if (!why && info) {
    __int128 rows = elems == 0 ? 0 : elems / t->ne[0];
    __int128 bytes = t->ne[0] % info->block_elems ? -1 : (__int128)(t->ne[0] / info->block_elems) * info->block_bytes * rows;
    if (bytes != (__int128)t->nbytes) why = "nbytes differs from what dtype and shape imply";
  }
  if (why) {
    fprintf(stderr, "fuzz oracle: %s: tensor '%s' type %d ne [%lld, %lld, %lld, %lld] nbytes %zu: %s\n", where,
            t->name ? t->name : "?", t->type, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
            (long long)t->ne[3], t->nbytes, why);
    abort();
  }
  if (t->nbytes) {
    const volatile uint8_t *p = t->data;
    (void)p[0];
    (void)p[t->nbytes - 1];
  }
}
