/* pool.c: R2D2's persistent pool of GCG test cases (pool.h). */
#include "adv_ft/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/test_case.h"
#include "util/error.h"
#include "util/rng.h"

/* HarmBench: "! " * n, trailing space stripped, n in [15, 20] (ATU:138). */
enum { SUFFIX_MARKS_MIN = 15, SUFFIX_MARKS_MAX = 20 };

int rg_pool_draw(uint64_t *rng, int n) {
  /* Lemire's multiply-shift maps 64 random bits onto [0, n) with a bias
   * below n / 2^64. */
  return (int)(((unsigned __int128)rg_splitmix64(rng) * (uint64_t)n) >> 64);
}

void rg_pool_pick(uint64_t *rng, int *items, int n, int k) {
  for (int i = 0; i < k; i++) {
    const int j = i + rg_pool_draw(rng, n - i), t = items[i];
    items[i] = items[j];
    items[j] = t;
  }
}

/* The tokens of the initial suffix of MARKS marks (malloc'd into *ids). */
static int suffix_tokens(const rg_model *m, int marks, int32_t **ids, int *n) {
  char text[2 * SUFFIX_MARKS_MAX];
  for (int i = 0; i < marks; i++) memcpy(text + 2 * i, "! ", 2);
  text[2 * marks - 1] = '\0';
  if (rg_test_case_tokens(m, text, ids, n) < 0) return -1;
  if (*n < 1) {
    free(*ids);
    *ids = NULL;
    return rg_error_set("pool: the initial suffix \"%s\" has no tokens", text);
  }
  return 0;
}

int rg_pool_check_lengths(const rg_model *m, const rg_test_case_frame *f, const rg_r2d2_data *d, const char *refusal,
                          int max_case_tokens) {
  int32_t *longest = NULL;
  int n_longest = 0, rc = 0;
  for (int marks = SUFFIX_MARKS_MIN; rc == 0 && marks <= SUFFIX_MARKS_MAX; marks++) {
    int32_t *ids = NULL;
    int n = 0;
    rc = suffix_tokens(m, marks, &ids, &n);
    if (rc == 0 && n > n_longest) free(longest), longest = ids, n_longest = n;
    else free(ids);
  }
  for (int i = 0; rc == 0 && i < d->n_init; i++) {
    const rg_r2d2_behavior *b = &d->items[d->init[i]];
    for (int k = 0; rc == 0 && k <= b->n_targets; k++) { /* the away targets, then the toward one */
      const bool toward = k == b->n_targets;
      rg_test_case_seq q;
      if (rg_test_case_build(m, f, b->behavior, longest, n_longest, toward ? refusal : b->targets[k], toward, &q) < 0) {
        rc = -1;
        break;
      }
      if (q.n > max_case_tokens)
        rc = rg_error_set("behavior %s: %d tokens with a %d-token suffix and its %s target %d, over max_case_tokens %d "
                          "(raise it, or leave the behavior out)",
                          b->id, q.n, n_longest, toward ? "toward" : "away", toward ? 0 : k + 1, max_case_tokens);
      rg_test_case_seq_free(&q);
    }
  }
  free(longest);
  return rc;
}

/* Fills E with behavior B, a random target and a fresh "! ! ..." suffix. */
static int fill_entry(rg_pool_entry *e, const rg_model *m, const rg_r2d2_data *d, int b, uint64_t *rng) {
  const int marks = SUFFIX_MARKS_MIN + rg_pool_draw(rng, SUFFIX_MARKS_MAX - SUFFIX_MARKS_MIN + 1);
  int32_t *ids = NULL;
  int n = 0;
  if (suffix_tokens(m, marks, &ids, &n) < 0) return -1;
  free(e->suffix);
  *e = (rg_pool_entry){.behavior = b, .target = rg_pool_draw(rng, d->items[b].n_targets), .suffix = ids,
                       .n_suffix = n, .loss = NAN};
  return 0;
}

int rg_pool_init(rg_pool *p, const rg_model *m, const rg_r2d2_data *d, int n, uint64_t *rng) {
  memset(p, 0, sizeof *p);
  if (n < 1 || n > d->n_init)
    return rg_error_set("pool: %d entries, but %d behaviors are eligible (not contextual, with targets)", n, d->n_init);
  p->data = d;
  if (!(p->items = calloc((size_t)n, sizeof *p->items))) return rg_error_set("pool: out of memory");
  p->n = n;
  /* n distinct behaviors of the eligible list */
  int *order = malloc((size_t)d->n_init * sizeof *order);
  if (!order) return rg_error_set("pool: out of memory");
  memcpy(order, d->init, (size_t)d->n_init * sizeof *order);
  rg_pool_pick(rng, order, d->n_init, n);
  int rc = 0;
  for (int i = 0; rc == 0 && i < n; i++) rc = fill_entry(&p->items[i], m, d, order[i], rng);
  free(order);
  if (rc < 0) rg_pool_free(p);
  return rc;
}

void rg_pool_free(rg_pool *p) {
  for (int i = 0; p->items && i < p->n; i++) free(p->items[i].suffix);
  free(p->items);
  memset(p, 0, sizeof *p);
}

int rg_pool_reset(rg_pool *p, const rg_model *m, double fraction, uint64_t *rng) {
  if (fraction <= 0) return 0;
  int k = (int)floor(fraction * p->n);
  if (k < 1) k = 1;
  if (k > p->n) k = p->n;
  int *order = malloc((size_t)p->n * sizeof *order);
  if (!order) return rg_error_set("pool: out of memory");
  for (int i = 0; i < p->n; i++) order[i] = i;
  rg_pool_pick(rng, order, p->n, k);
  int rc = 0;
  for (int i = 0; rc == 0 && i < k; i++) {
    const int b = p->data->init[rg_pool_draw(rng, p->data->n_init)];
    rc = fill_entry(&p->items[order[i]], m, p->data, b, rng);
  }
  free(order);
  return rc < 0 ? -1 : k;
}

cJSON *rg_pool_to_json(const rg_pool *p) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < p->n; i++) {
    const rg_pool_entry *e = &p->items[i];
    cJSON *o = cJSON_CreateObject(), *suffix = cJSON_CreateArray();
    if (!o || !suffix) {
      cJSON_Delete(o), cJSON_Delete(suffix), cJSON_Delete(arr);
      return NULL;
    }
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "behavior_id", p->data->items[e->behavior].id);
    cJSON_AddNumberToObject(o, "target", e->target);
    for (int k = 0; k < e->n_suffix; k++) cJSON_AddItemToArray(suffix, cJSON_CreateNumber(e->suffix[k]));
    cJSON_AddItemToObject(o, "suffix", suffix);
    if (isfinite(e->loss))
      cJSON_AddNumberToObject(o, "loss", e->loss);
    else
      cJSON_AddNullToObject(o, "loss");
  }
  return arr;
}

static int behavior_index(const rg_r2d2_data *d, const char *id) {
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->items[i].id, id) == 0) return i;
  return -1;
}

int rg_pool_from_json(rg_pool *p, const rg_model *m, const rg_r2d2_data *d, const cJSON *j, const char *what) {
  memset(p, 0, sizeof *p);
  const int n = cJSON_GetArraySize(j);
  if (!cJSON_IsArray(j) || n < 1) return rg_error_set("%s: the pool is not a non-empty array", what);
  if (!(p->items = calloc((size_t)n, sizeof *p->items))) return rg_error_set("out of memory");
  p->data = d;
  p->n = n;
  const int vocab = m->cfg.vocab_size;
  for (int i = 0; i < n; i++) {
    const cJSON *o = cJSON_GetArrayItem(j, i);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "behavior_id");
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(o, "target");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(o, "suffix");
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(o, "loss");
    rg_pool_entry *e = &p->items[i];
    e->behavior = cJSON_IsString(id) ? behavior_index(d, id->valuestring) : -1;
    e->n_suffix = cJSON_IsArray(suffix) ? cJSON_GetArraySize(suffix) : 0;
    if (e->behavior < 0 || !cJSON_IsNumber(target) || target->valueint < 0 ||
        target->valueint >= d->items[e->behavior].n_targets || e->n_suffix < 1) {
      rg_pool_free(p);
      return rg_error_set("%s: pool entry %d names no behavior, target or suffix of this run's data", what, i);
    }
    e->target = target->valueint;
    e->loss = cJSON_IsNumber(loss) ? loss->valuedouble : NAN;
    if (!(e->suffix = malloc((size_t)e->n_suffix * sizeof *e->suffix))) {
      rg_pool_free(p);
      return rg_error_set("out of memory");
    }
    for (int k = 0; k < e->n_suffix; k++) {
      const cJSON *t = cJSON_GetArrayItem(suffix, k);
      if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble >= vocab) {
        rg_pool_free(p);
        return rg_error_set("%s: pool entry %d: suffix token %d is not an id below %d", what, i, k, vocab);
      }
      e->suffix[k] = (int32_t)t->valueint;
    }
  }
  return 0;
}
