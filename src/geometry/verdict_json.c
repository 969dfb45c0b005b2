/* verdict_json.c: the verdict and its evidence as one JSON file. */
#include "geometry/verdict_json.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"

static const char *const SPLITS[4] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};

/* JSON has no NaN: a missing number is null. */
static void add_number(cJSON *o, const char *key, double v) {
  if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}

static cJSON *step_object(const rg_migration_row *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)r->step);
  cJSON_AddStringToObject(o, "status", r->status);
  if (r->best_layer >= 0) {
    cJSON_AddNumberToObject(o, "layer", r->best_layer);
    cJSON_AddNumberToObject(o, "pos", r->best_pos);
  } else {
    cJSON_AddNullToObject(o, "layer");
    cJSON_AddNullToObject(o, "pos");
  }
  cJSON_AddStringToObject(o, "band", r->label);
  add_number(o, "layer_lo", r->layer_lo);
  add_number(o, "layer_hi", r->layer_hi);
  add_number(o, "carrier_share", r->carrier_share);
  add_number(o, "bypass", r->bypass);
  add_number(o, "induce", r->induce);
  add_number(o, "kl", r->kl);
  add_number(o, "null_bypass_p5", r->null_bypass_p5);
  add_number(o, "erank_sigma", r->spectrum.erank_sigma);
  cJSON_AddStringToObject(o, "refusal_tokens", r->refusal_tokens ? r->refusal_tokens : "");
  add_number(o, "score_auroc", r->score_auroc);
  cJSON *kept = cJSON_AddObjectToObject(o, "kept");
  for (int k = 0; k < 4; k++) {
    cJSON *pair = cJSON_CreateIntArray((const int[]){r->kept[k], r->total[k]}, 2);
    cJSON_AddItemToObject(kept, SPLITS[k], pair);
  }
  return o;
}

int rg_verdict_write_json(const char *path, const char *plan_sha256, const rg_verdict *v, const rg_lan_claim *claims,
                          const rg_migration_row *rows, int n_steps, int n_layers) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return rg_error_set("%s: out of memory", path);
  cJSON_AddStringToObject(o, "format", "refgeo-verdict/1");
  cJSON_AddStringToObject(o, "plan_sha256", plan_sha256);
  cJSON_AddStringToObject(o, "verdict", v->verdict);
  cJSON_AddStringToObject(o, "reason", v->reason);
  if (v->from_step >= 0) cJSON_AddNumberToObject(o, "from_step", (double)v->from_step);
  else cJSON_AddNullToObject(o, "from_step");
  if (v->to_step >= 0) cJSON_AddNumberToObject(o, "to_step", (double)v->to_step);
  else cJSON_AddNullToObject(o, "to_step");
  cJSON_AddNumberToObject(o, "n_layers", n_layers);
  cJSON *steps = cJSON_AddArrayToObject(o, "steps");
  for (int i = 0; i < n_steps; i++) cJSON_AddItemToArray(steps, step_object(&rows[i]));
  cJSON *lan = cJSON_AddArrayToObject(o, "lan2026");
  for (int i = 0; i < RG_LAN_CLAIMS; i++) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "claim", claims[i].claim);
    cJSON_AddStringToObject(c, "outcome", claims[i].outcome);
    cJSON_AddStringToObject(c, "why", claims[i].why);
    cJSON_AddItemToArray(lan, c);
  }
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text) return rg_error_set("%s: out of memory", path);
  size_t len = strlen(text);
  text[len] = '\n'; /* cJSON's buffer has room for its NUL: end the file with a newline */
  int rc = rg_write_file_atomic(path, text, len + 1);
  free(text);
  return rc;
}
