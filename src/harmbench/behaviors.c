/* behaviors.c: HarmBench behavior CSVs and the DirectRequest test case (behaviors.h). */
#include "harmbench/behaviors.h"

#include <stdlib.h>
#include <string.h>

#include "util/csv_table.h"
#include "util/error.h"

/* Takes ownership of row[col] (the table's copy is replaced by NULL so that
 * rg_csv_free does not free it), or returns a fresh "" when col < 0. */
static char *take_field(rg_csv *t, size_t r, int col) {
  if (col < 0) return strdup("");
  char *s = t->rows[r][col];
  t->rows[r][col] = NULL;
  return s;
}

rg_behaviors *rg_behaviors_read(const char *path) {
  rg_csv *t = rg_csv_read(path);
  if (!t) return NULL;
  rg_behaviors *b = NULL;
  int c_behavior = rg_csv_require_col(t, "Behavior");
  int c_tags = c_behavior < 0 ? -1 : rg_csv_require_col(t, "Tags");
  int c_context = c_tags < 0 ? -1 : rg_csv_require_col(t, "ContextString");
  int c_id = c_context < 0 ? -1 : rg_csv_require_col(t, "BehaviorID");
  if (c_id < 0) goto fail;
  int c_functional = rg_csv_col(t, "FunctionalCategory");
  int c_semantic = rg_csv_col(t, "SemanticCategory");
  if (c_semantic < 0) c_semantic = rg_csv_col(t, "Category");

  b = calloc(1, sizeof *b);
  if (!b || !(b->path = strdup(path)) || !(b->items = calloc(t->n_rows ? t->n_rows : 1, sizeof *b->items))) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  for (size_t r = 0; r < t->n_rows; r++) {
    if (t->rows[r][c_id][0] == '\0') {
      rg_error_set("%s: behavior %zu has an empty BehaviorID", path, r + 1);
      goto fail;
    }
    if (rg_behaviors_find(b, t->rows[r][c_id])) {
      rg_error_set("%s: duplicate BehaviorID %s", path, t->rows[r][c_id]);
      goto fail;
    }
    rg_behavior *x = &b->items[b->n++];
    x->behavior = take_field(t, r, c_behavior);
    x->functional_category = take_field(t, r, c_functional);
    x->semantic_category = take_field(t, r, c_semantic);
    x->tags = take_field(t, r, c_tags);
    x->context = take_field(t, r, c_context);
    x->id = take_field(t, r, c_id);
    if (!x->functional_category || !x->semantic_category) {
      rg_error_set("%s: out of memory", path);
      goto fail;
    }
  }
  rg_csv_free(t);
  return b;
fail:
  rg_csv_free(t);
  rg_behaviors_free(b);
  return NULL;
}

void rg_behaviors_free(rg_behaviors *b) {
  if (!b) return;
  for (size_t i = 0; i < b->n; i++) {
    rg_behavior *x = &b->items[i];
    free(x->behavior);
    free(x->functional_category);
    free(x->semantic_category);
    free(x->tags);
    free(x->context);
    free(x->id);
  }
  free(b->items);
  free(b->path);
  free(b);
}

const rg_behavior *rg_behaviors_find(const rg_behaviors *b, const char *id) {
  for (size_t i = 0; i < b->n; i++)
    if (strcmp(b->items[i].id, id) == 0) return &b->items[i];
  return NULL;
}

bool rg_behavior_is_contextual(const rg_behavior *b) { return strcmp(b->functional_category, "contextual") == 0; }

bool rg_behavior_is_copyright(const rg_behavior *b) { return strcmp(b->functional_category, "copyright") == 0; }

bool rg_behavior_has_tag(const rg_behavior *b, const char *tag) {
  size_t n = strlen(tag);
  for (const char *s = b->tags;;) {
    const char *sep = strstr(s, ", ");
    size_t len = sep ? (size_t)(sep - s) : strlen(s);
    if (len == n && memcmp(s, tag, n) == 0) return true;
    if (!sep) return false;
    s = sep + 2;
  }
}

char *rg_harmbench_request_text(const char *behavior, const char *context) {
  if (context[0] == '\0') return strdup(behavior);
  static const char SEPARATOR[] = "\n\n---\n\n";
  size_t nc = strlen(context), ns = sizeof SEPARATOR - 1, nb = strlen(behavior);
  char *s = malloc(nc + ns + nb + 1);
  if (!s) return NULL;
  memcpy(s, context, nc);
  memcpy(s + nc, SEPARATOR, ns);
  memcpy(s + nc + ns, behavior, nb + 1);
  return s;
}

char *rg_behavior_direct_request(const rg_behavior *b) { return rg_harmbench_request_text(b->behavior, b->context); }
