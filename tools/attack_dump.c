/* attack_dump.c: the JSON-lines record of every GCG step of `refgeo attack
 * --dump-steps` (attack_dump.h). */
#include "attack_dump.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"

int attack_dump_open(attack_dump *d, const char *path) {
  d->behavior_id = NULL;
  return rg_atomic_open(&d->file, path) < 0 ? rg_error_prefix("--dump-steps") : 0;
}

static cJSON *id_array(const int32_t *ids, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
  return a;
}

/* [[position, id], ...] where CAND differs from SUFFIX */
static cJSON *changes(const int32_t *cand, const int32_t *suffix, int L) {
  cJSON *a = cJSON_CreateArray();
  for (int p = 0; a && p < L; p++)
    if (cand[p] != suffix[p]) {
      const int32_t pair[2] = {p, cand[p]};
      cJSON_AddItemToArray(a, id_array(pair, 2));
    }
  return a;
}

static cJSON *step_json(const char *behavior_id, const rg_gcg_step_view *v) {
  const int L = v->n_suffix;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "behavior_id", behavior_id ? behavior_id : "");
  cJSON_AddNumberToObject(o, "step", v->step + 1);
  cJSON_AddItemToObject(o, "suffix", id_array(v->suffix, L));
  cJSON_AddNumberToObject(o, "loss", v->loss);
  if (v->top) {
    cJSON *top = cJSON_AddArrayToObject(o, "top_k");
    for (int p = 0; top && p < L; p++) cJSON_AddItemToArray(top, id_array(v->top + (size_t)p * v->top_k, v->top_k));
  } else {
    cJSON_AddNullToObject(o, "top_k");
  }
  cJSON *cands = cJSON_AddArrayToObject(o, "candidates"), *losses = cJSON_AddArrayToObject(o, "losses");
  cJSON *verified = v->verified ? cJSON_AddArrayToObject(o, "verified") : NULL;
  for (int j = 0; j < v->n_cands; j++) {
    cJSON_AddItemToArray(cands, changes(v->cands + (size_t)j * L, v->suffix, L));
    const bool evaluated = !v->evaluated || v->evaluated[j];
    cJSON_AddItemToArray(losses, evaluated && !isnan(v->losses[j]) ? cJSON_CreateNumber(v->losses[j])
                                                                  : cJSON_CreateNull());
    if (verified) cJSON_AddItemToArray(verified, cJSON_CreateNumber(v->verified[j]));
  }
  cJSON_AddNumberToObject(o, "removed", v->n_removed);
  cJSON_AddNumberToObject(o, "chosen", v->best);
  cJSON_AddNumberToObject(o, "chosen_loss", v->losses[v->best]);
  return o;
}

int attack_dump_step(void *user, const rg_gcg_step_view *v) {
  attack_dump *d = user;
  cJSON *o = step_json(d->behavior_id, v);
  char *line = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (!line) return rg_error_set("--dump-steps: out of memory at step %d", v->step + 1);
  const int rc = fputs(line, d->file.fp) < 0 || fputc('\n', d->file.fp) == EOF
                     ? rg_error_set("%s: write failed", d->file.path)
                     : 0;
  free(line);
  return rc;
}

int attack_dump_close(attack_dump *d) { return rg_atomic_commit(&d->file); }

void attack_dump_abort(attack_dump *d) { rg_atomic_abort(&d->file); }
