/* checkpoints.c: a series of model checkpoints of one fine-tuning run (checkpoints.h). */
#include "model/checkpoints.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/manifest.h"

/* While a series is built each entry remembers where it came from ("line 4",
 * "checkpoint-50", "the base model"), so a duplicate step can name both places. */
typedef struct {
  long step;
  char *path;
  char origin[64];
} entry;

typedef struct {
  const char *source; /* the run directory or manifest, for messages */
  entry *e;
  int n, cap;
} builder;

static void builder_release(builder *b) {
  for (int i = 0; i < b->n; i++) free(b->e[i].path);
  free(b->e);
}

/* Takes ownership of PATH (also on failure). */
static int builder_add(builder *b, long step, char *path, const char *origin) {
  if (!path) return rg_error_set("%s: out of memory", b->source);
  if (b->n == b->cap) {
    int cap = b->cap ? b->cap * 2 : 16;
    entry *e = realloc(b->e, (size_t)cap * sizeof *e);
    if (!e) {
      free(path);
      return rg_error_set("%s: out of memory", b->source);
    }
    b->e = e;
    b->cap = cap;
  }
  entry *e = &b->e[b->n++];
  e->step = step;
  e->path = path;
  snprintf(e->origin, sizeof e->origin, "%s", origin);
  return 0;
}

/* A step is one or more decimal digits (no sign, no blanks) that fit a long. */
static int parse_step(const char *s, long *out) {
  if (!*s) return -1;
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  errno = 0;
  long v = strtol(s, NULL, 10);
  if (errno == ERANGE) return -1;
  *out = v;
  return 0;
}

static int add_base(builder *b, const char *base) {
  if (!base) return 0;
  if (!rg_path_exists(base)) return rg_error_set("%s: base model does not exist", base);
  return builder_add(b, 0, strdup(base), "the base model");
}

static int by_step(const void *a, const void *b) {
  long x = ((const entry *)a)->step, y = ((const entry *)b)->step;
  return (x > y) - (x < y);
}

/* Sorts, validates and hands the paths over to a series (NULL on error). */
static rg_checkpoint_series *builder_finish(builder *b) {
  rg_checkpoint_series *s = NULL;
  if (b->n == 0) {
    rg_error_set("%s: no checkpoints", b->source);
    goto done;
  }
  qsort(b->e, (size_t)b->n, sizeof *b->e, by_step);
  for (int i = 1; i < b->n; i++) {
    if (b->e[i].step == b->e[i - 1].step) {
      rg_error_set("%s: step %ld given twice (%s and %s)", b->source, b->e[i].step, b->e[i - 1].origin, b->e[i].origin);
      goto done;
    }
  }
  if (b->e[0].step != 0) {
    rg_error_set("%s: no step 0 (give the base model, or a step-0 checkpoint); first step is %ld", b->source,
                 b->e[0].step);
    goto done;
  }
  s = calloc(1, sizeof *s);
  if (s) s->items = malloc((size_t)b->n * sizeof *s->items);
  if (!s || !s->items) {
    free(s);
    s = NULL;
    rg_error_set("%s: out of memory", b->source);
    goto done;
  }
  for (int i = 0; i < b->n; i++) {
    s->items[i] = (rg_checkpoint){b->e[i].step, b->e[i].path};
    b->e[i].path = NULL;
  }
  s->n = b->n;
done:
  builder_release(b);
  return s;
}

/* With DIR/SHA256SUMS (a run refgeo train wrote): every file of each
 * checkpoint found is checked against it; a checkpoint none of whose files
 * is listed is refused too (its writer was killed before listing it, and
 * `refgeo train --resume` lists it). Without one (another trainer's run):
 * nothing to check. */
static int check_sums(const char *dir, const builder *b) {
  char *sums_path = rg_path_join(dir, RG_MANIFEST_NAME);
  if (!sums_path) return rg_error_set("out of memory");
  rg_manifest m;
  int rc = rg_manifest_read(&m, sums_path, false);
  if (rc == 0 && !rg_path_exists(sums_path)) {
    free(sums_path);
    return 0;
  }
  for (int i = 0; rc == 0 && i < b->n; i++) {
    if (strncmp(b->e[i].origin, "checkpoint-", 11) != 0) continue; /* the base model */
    const size_t k = strlen(b->e[i].origin);
    int listed = 0;
    for (int j = 0; rc == 0 && j < m.n; j++) {
      if (strncmp(m.e[j].name, b->e[i].origin, k) != 0 || m.e[j].name[k] != '/') continue;
      listed++;
      rc = rg_manifest_check(&m, sums_path, dir, m.e[j].name);
    }
    if (rc == 0 && listed == 0)
      rc = rg_error_set("%s/%s: not listed in %s (its writer was killed before listing it; refgeo train --resume "
                        "lists it)",
                        dir, b->e[i].origin, sums_path);
  }
  rg_manifest_free(&m);
  free(sums_path);
  return rc;
}

rg_checkpoint_series *rg_checkpoints_from_run_dir(const char *dir, const char *base) {
  builder b = {.source = dir};
  DIR *d = opendir(dir);
  if (!d) {
    rg_error_set("%s: %s", dir, strerror(errno));
    return NULL;
  }
  const char prefix[] = "checkpoint-";
  int rc = add_base(&b, base);
  struct dirent *de;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, prefix, sizeof prefix - 1) != 0) continue;
    /* a checkpoint a killed writer left half written (checkpoint-N.tmp;
     * and rg_atomic_open's NAME.tmp.<pid>) is not part of the run */
    const size_t len = strlen(de->d_name);
    if ((len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0) || strstr(de->d_name, ".tmp.")) continue;
    long step;
    if (parse_step(de->d_name + sizeof prefix - 1, &step) != 0) {
      rc = rg_error_set("%s: %s: step is not a non-negative integer", dir, de->d_name);
      break;
    }
    char *path = rg_path_join(dir, de->d_name);
    char *config = path ? rg_path_join(path, "config.json") : NULL;
    int is_model = path && rg_is_dir(path) && config && rg_path_exists(config);
    free(config);
    if (path && !is_model) {
      rc = rg_error_set("%s: %s is not a Hugging Face model directory (no config.json)", dir, de->d_name);
      free(path);
      break;
    }
    rc = builder_add(&b, step, path, de->d_name);
  }
  closedir(d);
  if (rc == 0) rc = check_sums(dir, &b);
  if (rc != 0) {
    builder_release(&b);
    return NULL;
  }
  return builder_finish(&b);
}

/* The manifest's directory ("." for a bare file name), malloc'd. */
static char *parent_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

rg_checkpoint_series *rg_checkpoints_from_manifest(const char *csv_path, const char *base) {
  rg_csv *t = rg_csv_read(csv_path);
  if (!t) return NULL;
  builder b = {.source = csv_path};
  char *root = parent_dir(csv_path);
  int step_col = rg_csv_require_col(t, "step");
  int path_col = step_col < 0 ? -1 : rg_csv_require_col(t, "path");
  int rc = root ? add_base(&b, base) : rg_error_set("%s: out of memory", csv_path);
  if (path_col < 0) rc = -1;
  for (size_t r = 0; rc == 0 && r < t->n_rows; r++) {
    size_t line = r + 2; /* header is line 1; exact unless a quoted field spans lines */
    const char *step_text = t->rows[r][step_col], *rel = t->rows[r][path_col];
    long step;
    if (parse_step(step_text, &step) != 0) {
      rc = rg_error_set("%s: line %zu: step '%s' is not a non-negative integer", csv_path, line, step_text);
      break;
    }
    if (!*rel) {
      rc = rg_error_set("%s: line %zu: empty path", csv_path, line);
      break;
    }
    char *path = rel[0] == '/' ? strdup(rel) : rg_path_join(root, rel);
    if (path && !rg_path_exists(path)) {
      rc = rg_error_set("%s: line %zu: %s does not exist", csv_path, line, path);
      free(path);
      break;
    }
    char origin[32];
    snprintf(origin, sizeof origin, "line %zu", line);
    rc = builder_add(&b, step, path, origin);
  }
  free(root);
  rg_csv_free(t);
  if (rc != 0) {
    builder_release(&b);
    return NULL;
  }
  return builder_finish(&b);
}

rg_checkpoint_series *rg_checkpoints_open(const char *path, const char *base) {
  if (rg_is_dir(path)) return rg_checkpoints_from_run_dir(path, base);
  if (!rg_path_exists(path)) {
    rg_error_set("%s: no such run directory or manifest", path);
    return NULL;
  }
  return rg_checkpoints_from_manifest(path, base);
}

void rg_checkpoints_free(rg_checkpoint_series *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) free(s->items[i].path);
  free(s->items);
  free(s);
}

rg_checkpoint_series *rg_checkpoints_single(const char *path) {
  rg_checkpoint_series *s = calloc(1, sizeof *s);
  if (s) s->items = calloc(1, sizeof *s->items);
  if (s && s->items) s->items[0].path = strdup(path);
  if (!s || !s->items || !s->items[0].path) {
    if (s) free(s->items);
    free(s);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  s->n = 1;
  return s;
}
