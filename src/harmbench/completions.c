/* completions.c: HarmBench's test_cases.json and completions.json (completions.h). */
#include "harmbench/completions.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

int rg_completions_add(rg_completions *c, const char *behavior_id, const char *test_case, const char *generation) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 64;
    rg_completion *grown = realloc(c->items, cap * sizeof *grown);
    if (!grown) return rg_error_set("completions: out of memory");
    c->items = grown;
    c->cap = cap;
  }
  rg_completion *e = &c->items[c->n];
  e->behavior_id = strdup(behavior_id);
  e->test_case = strdup(test_case);
  e->generation = generation ? strdup(generation) : NULL;
  if (!e->behavior_id || !e->test_case || (generation && !e->generation)) {
    free(e->behavior_id);
    free(e->test_case);
    free(e->generation);
    return rg_error_set("completions: out of memory");
  }
  c->n++;
  return 0;
}

void rg_completions_free(rg_completions *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->items[i].behavior_id);
    free(c->items[i].test_case);
    free(c->items[i].generation);
  }
  free(c->items);
  memset(c, 0, sizeof *c);
}

/* Parses PATH as a JSON object whose values are arrays; NULL + error. */
static cJSON *read_object_of_arrays(const char *path) {
  cJSON *root = rg_json_read_file(path);
  if (!root) return NULL;
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    rg_error_set("%s: top level is not an object of BehaviorID keys", path);
    return NULL;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, root) {
    if (!cJSON_IsArray(v)) {
      rg_error_set("%s: value of %s is not a list", path, v->string);
      cJSON_Delete(root);
      return NULL;
    }
  }
  return root;
}

static int read_entries(const char *path, rg_completions *out, int with_generation) {
  memset(out, 0, sizeof *out);
  cJSON *root = read_object_of_arrays(path);
  if (!root) return -1;
  const cJSON *list;
  cJSON_ArrayForEach(list, root) {
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
      const char *tc, *gen = NULL;
      if (with_generation) {
        const cJSON *jt = cJSON_GetObjectItemCaseSensitive(e, "test_case");
        const cJSON *jg = cJSON_GetObjectItemCaseSensitive(e, "generation");
        if (!cJSON_IsString(jt) || !cJSON_IsString(jg)) {
          rg_error_set("%s: a completion of %s lacks string test_case/generation fields", path, list->string);
          goto fail;
        }
        tc = jt->valuestring;
        gen = jg->valuestring;
      } else {
        if (!cJSON_IsString(e)) {
          rg_error_set("%s: a test case of %s is not a string", path, list->string);
          goto fail;
        }
        tc = e->valuestring;
      }
      if (rg_completions_add(out, list->string, tc, gen) != 0) goto fail;
    }
  }
  cJSON_Delete(root);
  return 0;
fail:
  cJSON_Delete(root);
  rg_completions_free(out);
  return -1;
}

int rg_test_cases_read(const char *path, rg_completions *out) { return read_entries(path, out, 0); }
int rg_completions_read(const char *path, rg_completions *out) { return read_entries(path, out, 1); }

/* Builds the JSON object, grouping entries under their BehaviorID key. */
static int write_entries(const char *path, const rg_completions *c, int with_generation) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return rg_error_set("%s: out of memory", path);
  for (size_t i = 0; i < c->n; i++) {
    const rg_completion *e = &c->items[i];
    if (with_generation && !e->generation) {
      cJSON_Delete(root);
      return rg_error_set("%s: completion %zu of %s has no generation", path, i, e->behavior_id);
    }
    cJSON *list = cJSON_GetObjectItemCaseSensitive(root, e->behavior_id);
    if (!list) list = cJSON_AddArrayToObject(root, e->behavior_id);
    cJSON *item;
    if (with_generation) {
      item = cJSON_CreateObject();
      if (item && (!cJSON_AddStringToObject(item, "test_case", e->test_case) ||
                   !cJSON_AddStringToObject(item, "generation", e->generation))) {
        cJSON_Delete(item);
        item = NULL;
      }
    } else {
      item = cJSON_CreateString(e->test_case);
    }
    if (!list || !item || !cJSON_AddItemToArray(list, item)) {
      cJSON_Delete(item);
      cJSON_Delete(root);
      return rg_error_set("%s: out of memory", path);
    }
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return rg_error_set("%s: out of memory", path);
  int rc = rg_write_file_atomic(path, text, strlen(text));
  free(text);
  return rc;
}

int rg_test_cases_write(const char *path, const rg_completions *c) { return write_entries(path, c, 0); }
int rg_completions_write(const char *path, const rg_completions *c) { return write_entries(path, c, 1); }
