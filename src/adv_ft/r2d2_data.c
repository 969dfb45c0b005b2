/* r2d2_data.c: R2D2's behaviors and away targets (see r2d2_data.h). */
#include "adv_ft/r2d2_data.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/behaviors.h"
#include "util/error.h"
#include "util/json.h"

typedef struct {
  const char *path;
  cJSON *root;
} target_file;

/* Every value must be a string or an array of strings; the root an object. */
static int check_target_file(const target_file *f) {
  if (!cJSON_IsObject(f->root))
    return rg_error_set("%s: expected a JSON object of BehaviorID -> target string or array of strings", f->path);
  const cJSON *v;
  cJSON_ArrayForEach(v, f->root) {
    bool ok = cJSON_IsString(v) || cJSON_IsArray(v);
    const cJSON *t;
    if (cJSON_IsArray(v)) cJSON_ArrayForEach(t, v) ok = ok && cJSON_IsString(t);
    if (!ok)
      return rg_error_set("%s: key \"%s\": the targets must be a string or an array of strings", f->path, v->string);
  }
  return 0;
}

/* The targets of ID: its value in the last file that has the key (Python's
 * dict merge; within a file, the last duplicate key, as Python's json
 * keeps); NULL when no file has it. */
static const cJSON *find_targets(const target_file *files, int n, const char *id) {
  for (int i = n - 1; i >= 0; i--) {
    const cJSON *found = NULL, *v;
    cJSON_ArrayForEach(v, files[i].root) if (strcmp(v->string, id) == 0) found = v;
    if (found) return found;
  }
  return NULL;
}

static int count_non_empty(const cJSON *value, int *n_empty) {
  int n = 0;
  *n_empty = 0;
  if (cJSON_IsString(value)) {
    n = value->valuestring[0] != '\0';
    *n_empty = !n;
    return n;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, value) {
    if (t->valuestring[0]) n++;
    else (*n_empty)++;
  }
  return n;
}

static bool id_seen(const rg_r2d2_data *d, const char *id) {
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->items[i].id, id) == 0) return true;
  for (int i = 0; i < d->n_excluded; i++)
    if (strcmp(d->excluded_ids[i], id) == 0) return true;
  return false;
}

/* Appends B with its n_targets non-empty strings of VALUE. */
static int add_behavior(rg_r2d2_data *d, const rg_behavior *b, const cJSON *value, int n_targets) {
  rg_r2d2_behavior *x = &d->items[d->n];
  memset(x, 0, sizeof *x);
  d->n++; /* counted at once so that rg_r2d2_data_free releases a partial entry */
  x->id = strdup(b->id);
  x->behavior = strdup(b->behavior);
  x->contextual = strstr(b->tags, "context") != NULL;
  x->eligible_init = !x->contextual;
  x->targets = calloc((size_t)n_targets, sizeof *x->targets);
  if (!x->id || !x->behavior || !x->targets) return -1;
  if (cJSON_IsString(value)) {
    x->targets[x->n_targets++] = strdup(value->valuestring);
  } else {
    const cJSON *t;
    cJSON_ArrayForEach(t, value) if (t->valuestring[0]) x->targets[x->n_targets++] = strdup(t->valuestring);
  }
  for (int i = 0; i < x->n_targets; i++)
    if (!x->targets[i]) return -1;
  if (x->eligible_init) d->init[d->n_init++] = d->n - 1;
  return 0;
}

/* Adds the behaviors of one CSV. */
static int add_file(rg_r2d2_data *d, const char *path, const target_file *files, int n_files) {
  rg_behaviors *b = rg_behaviors_read(path);
  if (!b) return -1;
  int rc = 0, kept = 0;
  size_t cap = (size_t)d->n + (size_t)d->n_excluded + b->n + 1;
  rg_r2d2_behavior *items = realloc(d->items, cap * sizeof *items);
  if (items) d->items = items;
  int *init = items ? realloc(d->init, cap * sizeof *init) : NULL;
  if (init) d->init = init;
  char **excluded = init ? realloc(d->excluded_ids, cap * sizeof *excluded) : NULL;
  if (excluded) d->excluded_ids = excluded;
  if (!excluded) {
    rc = rg_error_set("%s: out of memory", path);
    goto done;
  }
  for (size_t i = 0; i < b->n; i++) {
    const rg_behavior *x = &b->items[i];
    if (id_seen(d, x->id)) {
      rc = rg_error_set("%s: BehaviorID %s is also in an earlier behaviors file", path, x->id);
      goto done;
    }
    const cJSON *value = find_targets(files, n_files, x->id);
    int n_empty = 0, n = value ? count_non_empty(value, &n_empty) : 0;
    if (n == 0) {
      if (!(d->excluded_ids[d->n_excluded] = strdup(x->id))) {
        rc = rg_error_set("%s: out of memory", path);
        goto done;
      }
      d->n_excluded++;
      continue;
    }
    if (add_behavior(d, x, value, n) < 0) {
      rc = rg_error_set("%s: out of memory", path);
      goto done;
    }
    d->n_empty_dropped += n_empty;
    kept++;
  }
  if (kept == 0) rc = rg_error_set("%s: a behaviors file without targets (none of its BehaviorIDs has a non-empty target)", path);
done:
  rg_behaviors_free(b);
  return rc;
}

rg_r2d2_data *rg_r2d2_data_load(const char *const *behavior_csvs, int n_csvs, const char *const *target_jsons,
                                int n_jsons) {
  if (n_csvs < 1 || n_jsons < 1) {
    rg_error_set("R2D2 data: at least one behaviors CSV and one targets JSON are needed");
    return NULL;
  }
  rg_r2d2_data *d = calloc(1, sizeof *d);
  target_file *files = calloc((size_t)n_jsons, sizeof *files);
  if (!d || !files) {
    rg_error_set("R2D2 data: out of memory");
    goto fail;
  }
  for (int i = 0; i < n_jsons; i++) {
    files[i].path = target_jsons[i];
    if (!(files[i].root = rg_json_read_file(target_jsons[i])) || check_target_file(&files[i]) < 0) goto fail;
  }
  for (int i = 0; i < n_csvs; i++)
    if (add_file(d, behavior_csvs[i], files, n_jsons) < 0) goto fail;
  for (int i = 0; i < n_jsons; i++) cJSON_Delete(files[i].root);
  free(files);
  return d;
fail:
  for (int i = 0; files && i < n_jsons; i++) cJSON_Delete(files[i].root);
  free(files);
  rg_r2d2_data_free(d);
  return NULL;
}

void rg_r2d2_data_free(rg_r2d2_data *d) {
  if (!d) return;
  for (int i = 0; i < d->n; i++) {
    rg_r2d2_behavior *x = &d->items[i];
    for (int t = 0; t < x->n_targets; t++) free(x->targets[t]);
    free(x->targets);
    free(x->id);
    free(x->behavior);
  }
  for (int i = 0; i < d->n_excluded; i++) free(d->excluded_ids[i]);
  free(d->items);
  free(d->init);
  free(d->excluded_ids);
  free(d);
}
