/* prompts.c: loading prompt sets for capture and evaluation (prompts.h). */
#include "capture/prompts.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "harmbench/behaviors.h"
#include "util/csv_table.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/rng.h"

void rg_prompts_free(rg_prompt_set *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) {
    free(s->items[i].text);
    free(s->items[i].category);
  }
  free(s->items);
  free(s->path);
  free(s);
}

/* Appends a prompt (copies both strings; category may be NULL). */
static int push(rg_prompt_set *s, int *cap, const char *text, size_t text_len, const char *category) {
  if (s->n == *cap) {
    int new_cap = *cap ? *cap * 2 : 64;
    rg_prompt *p = realloc(s->items, (size_t)new_cap * sizeof *p);
    if (!p) return rg_error_set("%s: out of memory", s->path);
    s->items = p;
    *cap = new_cap;
  }
  rg_prompt *p = &s->items[s->n];
  p->text = strndup(text, text_len);
  p->category = category ? strdup(category) : NULL;
  if (!p->text || (category && !p->category)) {
    free(p->text);
    free(p->category);
    return rg_error_set("%s: out of memory", s->path);
  }
  s->n++;
  return 0;
}

static int load_json(rg_prompt_set *s) {
  cJSON *root = rg_json_read_file(s->path);
  if (!root) return -1;
  int rc = 0, cap = 0, i = 0;
  if (!cJSON_IsArray(root)) {
    rc = rg_error_set("%s: expected a JSON array of {\"instruction\", \"category\"} objects", s->path);
    goto done;
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    const cJSON *instr = cJSON_GetObjectItemCaseSensitive(item, "instruction");
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(item, "category");
    if (!cJSON_IsString(instr)) {
      rc = rg_error_set("%s: element %d has no string \"instruction\"", s->path, i);
      goto done;
    }
    if (cat && !cJSON_IsString(cat) && !cJSON_IsNull(cat)) {
      rc = rg_error_set("%s: element %d has a \"category\" that is neither a string nor null", s->path, i);
      goto done;
    }
    if (push(s, &cap, instr->valuestring, strlen(instr->valuestring), cJSON_IsString(cat) ? cat->valuestring : NULL) != 0) {
      rc = -1;
      goto done;
    }
    i++;
  }
done:
  cJSON_Delete(root);
  return rc;
}

static int load_csv(rg_prompt_set *s) {
  rg_csv *t = rg_csv_read(s->path);
  if (!t) return -1;
  int rc = 0, cap = 0;
  int behavior = rg_csv_require_col(t, "Behavior");
  int category = rg_csv_col(t, "SemanticCategory");
  int context = rg_csv_col(t, "ContextString");
  if (behavior < 0) rc = -1;
  for (size_t r = 0; rc == 0 && r < t->n_rows; r++) {
    if (!*t->rows[r][behavior]) {
      /* line = data row + header, exact unless earlier fields span lines */
      rc = rg_error_set("%s: line %zu: empty Behavior", s->path, r + 2);
      break;
    }
    /* The prompt is what asr and attack give the model for this row. */
    char *text = rg_harmbench_request_text(t->rows[r][behavior], context >= 0 ? t->rows[r][context] : "");
    const char *cat = category >= 0 && *t->rows[r][category] ? t->rows[r][category] : NULL;
    rc = text ? push(s, &cap, text, strlen(text), cat) : rg_error_set("%s: out of memory", s->path);
    free(text);
  }
  rg_csv_free(t);
  return rc;
}

static int load_txt(rg_prompt_set *s) {
  size_t len = 0;
  char *text = rg_read_file(s->path, &len);
  if (!text) return -1;
  int rc = 0, cap = 0;
  for (size_t start = 0; rc == 0 && start < len;) {
    size_t end = start;
    while (end < len && text[end] != '\n') end++;
    size_t n = end - start;
    if (n > 0 && text[start + n - 1] == '\r') n--;
    size_t blank = 0;
    while (blank < n && (text[start + blank] == ' ' || text[start + blank] == '\t')) blank++;
    if (blank < n) rc = push(s, &cap, text + start, n, NULL);
    start = end + 1;
  }
  free(text);
  return rc;
}

static int has_extension(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n > e && strcmp(path + n - e, ext) == 0;
}

rg_prompt_set *rg_prompts_load(const char *path) {
  int (*loader)(rg_prompt_set *) = NULL;
  if (has_extension(path, ".json")) loader = load_json;
  else if (has_extension(path, ".csv")) loader = load_csv;
  else if (has_extension(path, ".txt")) loader = load_txt;
  if (!loader) {
    rg_error_set("%s: unknown prompt file type (expected .json, .csv or .txt)", path);
    return NULL;
  }
  rg_prompt_set *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  if (loader(s) != 0) {
    rg_prompts_free(s);
    return NULL;
  }
  if (s->n == 0) {
    rg_error_set("%s: no prompts", path);
    rg_prompts_free(s);
    return NULL;
  }
  return s;
}

/* Uniform in [0, bound) without modulo bias (rejects the short last cycle). */
static uint64_t uniform_below(uint64_t *state, uint64_t bound) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do x = rg_splitmix64(state);
  while (x >= limit);
  return x % bound;
}

int rg_prompts_subsample(rg_prompt_set *s, int n, uint64_t seed) {
  if (n < 0) return rg_error_set("%s: cannot keep %d prompts", s->path, n);
  if (n >= s->n) return 0;
  /* keep[i] marks the first n entries of a partial Fisher-Yates shuffle. */
  int *idx = malloc((size_t)s->n * sizeof *idx);
  char *keep = calloc((size_t)s->n, 1);
  if (!idx || !keep) {
    free(idx);
    free(keep);
    return rg_error_set("%s: out of memory", s->path);
  }
  for (int i = 0; i < s->n; i++) idx[i] = i;
  uint64_t state = seed;
  for (int i = 0; i < n; i++) {
    int j = i + (int)uniform_below(&state, (uint64_t)(s->n - i));
    int tmp = idx[i];
    idx[i] = idx[j];
    idx[j] = tmp;
    keep[idx[i]] = 1;
  }
  int k = 0;
  for (int i = 0; i < s->n; i++) {
    if (keep[i]) {
      s->items[k++] = s->items[i];
    } else {
      free(s->items[i].text);
      free(s->items[i].category);
    }
  }
  s->n = k;
  free(idx);
  free(keep);
  return 0;
}
