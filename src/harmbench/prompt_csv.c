/* prompt_csv.c: a prompt CSV as behaviors (see prompt_csv.h). */
#include "harmbench/prompt_csv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int rg_csv_flag_col(const rg_csv *t, const char *name, const char *role) {
  int c = rg_csv_col(t, name);
  if (c >= 0) return c;
  /* The columns the file does have, so the user can fix the name at once;
   * clipped to a line. */
  char cols[512] = "";
  size_t len = 0;
  for (int i = 0; i < t->n_cols && len < sizeof cols; i++)
    len += (size_t)snprintf(cols + len, sizeof cols - len, "%s%s", i ? ", " : "", t->header[i]);
  if (len >= sizeof cols) strcpy(cols + sizeof cols - 4, "...");
  return rg_error_set("%s: no column '%s' (%s; columns: %s)", t->path, name, role, cols);
}

void rg_prompt_csv_free(rg_prompt_csv *p) {
  if (!p) return;
  size_t n = p->behaviors ? p->behaviors->n : 0;
  for (int g = 0; g < p->n_groups; g++) {
    free(p->group_cols[g]);
    for (size_t r = 0; p->group_values && p->group_values[g] && r < n; r++) free(p->group_values[g][r]);
    if (p->group_values) free(p->group_values[g]);
  }
  free(p->group_cols);
  free(p->group_values);
  rg_behaviors_free(p->behaviors);
  free(p);
}

long rg_prompt_csv_row(const rg_prompt_csv *p, const char *id) {
  const rg_behavior *b = rg_behaviors_find(p->behaviors, id);
  return b ? (long)(b - p->behaviors->items) : -1;
}

/* Fills behavior R of P from row R of T. */
static int add_row(rg_prompt_csv *p, const rg_csv *t, size_t r, int c_prompt, int c_id) {
  rg_behaviors *b = p->behaviors;
  const char *prompt = t->rows[r][c_prompt];
  char number[32];
  snprintf(number, sizeof number, "%zu", r + 1);
  const char *id = c_id >= 0 ? t->rows[r][c_id] : number;
  if (prompt[0] == '\0') return rg_error_set("%s: row %zu has an empty prompt", t->path, r + 1);
  if (id[0] == '\0') return rg_error_set("%s: row %zu has an empty id", t->path, r + 1);
  if (rg_behaviors_find(b, id)) return rg_error_set("%s: row %zu repeats the id '%s'", t->path, r + 1, id);
  rg_behavior *x = &b->items[b->n];
  *x = (rg_behavior){strdup(prompt), strdup(""), strdup(""), strdup(""), strdup(""), strdup(id)};
  b->n++; /* counted even when a copy failed, so that rg_behaviors_free releases the others */
  if (!x->behavior || !x->functional_category || !x->semantic_category || !x->tags || !x->context || !x->id)
    return rg_error_set("%s: out of memory", t->path);
  return 0;
}

rg_prompt_csv *rg_prompt_csv_read(const char *path, const char *prompt_col, const char *const *group_cols,
                                  int n_groups) {
  rg_csv *t = rg_csv_read(path);
  if (!t) return NULL;
  rg_prompt_csv *p = calloc(1, sizeof *p);
  int c_prompt = rg_csv_flag_col(t, prompt_col, "the prompt column"), c_id = rg_csv_col(t, "id");
  int *c_group = calloc((size_t)n_groups + 1, sizeof *c_group);
  if (!p || !c_group) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  if (c_prompt < 0) goto fail;
  for (int g = 0; g < n_groups; g++)
    if ((c_group[g] = rg_csv_flag_col(t, group_cols[g], "a group column")) < 0) goto fail;
  size_t rows = t->n_rows ? t->n_rows : 1;
  if (!(p->behaviors = calloc(1, sizeof *p->behaviors)) || !(p->behaviors->path = strdup(path)) ||
      !(p->behaviors->items = calloc(rows, sizeof *p->behaviors->items)) ||
      !(p->group_cols = calloc((size_t)n_groups + 1, sizeof *p->group_cols)) ||
      !(p->group_values = calloc((size_t)n_groups + 1, sizeof *p->group_values))) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  p->n_groups = n_groups;
  for (int g = 0; g < n_groups; g++)
    if (!(p->group_cols[g] = strdup(group_cols[g])) || !(p->group_values[g] = calloc(rows, sizeof(char *)))) {
      rg_error_set("%s: out of memory", path);
      goto fail;
    }
  for (size_t r = 0; r < t->n_rows; r++) {
    if (add_row(p, t, r, c_prompt, c_id) < 0) goto fail;
    for (int g = 0; g < n_groups; g++)
      if (!(p->group_values[g][r] = strdup(t->rows[r][c_group[g]]))) {
        rg_error_set("%s: out of memory", path);
        goto fail;
      }
  }
  free(c_group);
  rg_csv_free(t);
  return p;
fail:
  free(c_group);
  rg_csv_free(t);
  rg_prompt_csv_free(p);
  return NULL;
}
