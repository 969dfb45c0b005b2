/* attack_progress.c: what `refgeo attack` has finished, for a rerun to continue (attack_progress.h). */
#include "attack_progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/csv_write.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

int attack_progress_open(attack_progress *p, const char *out, cJSON *settings) {
  memset(p, 0, sizeof *p);
  p->path = malloc(strlen(out) + sizeof ".partial.json");
  if (!p->path) {
    cJSON_Delete(settings);
    return rg_error_set("out of memory");
  }
  sprintf(p->path, "%s.partial.json", out);
  if (rg_path_exists(p->path)) {
    cJSON *old = rg_json_read_file(p->path);
    const cJSON *old_settings = old ? cJSON_GetObjectItemCaseSensitive(old, "settings") : NULL;
    cJSON *done = old ? cJSON_GetObjectItemCaseSensitive(old, "done") : NULL;
    int rc = !old ? -1
             : !cJSON_IsArray(done) || !old_settings
                 ? rg_error_set("%s: not an attack progress file (no settings or done)", p->path)
             : !cJSON_Compare(old_settings, settings, true)
                 ? rg_error_set("%s: an unfinished attack with other settings; rerun it with its flags or delete the "
                                "file", p->path)
                 : 0;
    cJSON_Delete(settings);
    if (rc < 0) {
      cJSON_Delete(old);
      return -1;
    }
    p->root = old;
    p->done = done;
    return 0;
  }
  p->root = cJSON_CreateObject();
  if (p->root) cJSON_AddItemToObject(p->root, "settings", settings);
  else cJSON_Delete(settings);
  p->done = p->root ? cJSON_AddArrayToObject(p->root, "done") : NULL;
  return p->done ? 0 : rg_error_set("out of memory");
}

void attack_progress_free(attack_progress *p) {
  cJSON_Delete(p->root);
  free(p->path);
  memset(p, 0, sizeof *p);
}

static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

const cJSON *attack_progress_find(const attack_progress *p, const char *behavior_id) {
  const cJSON *e;
  cJSON_ArrayForEach(e, p->done) {
    const char *id = str_of(e, "behavior_id");
    if (id && strcmp(id, behavior_id) == 0) return e;
  }
  return NULL;
}

static int write_log(const attack_progress *p, const char *log_path) {
  static const char *const HEADER[] = {"behavior_id", "steps", "final_loss", "stop_reason", "seconds"};
  rg_csv_writer w;
  if (rg_csv_writer_open(&w, log_path, HEADER, 5) < 0) return -1;
  const cJSON *e;
  int rc = 0;
  cJSON_ArrayForEach(e, p->done) {
    const char *id = str_of(e, "behavior_id"), *why = str_of(e, "stop_reason");
    if (rc == 0 && (rg_csv_writer_str(&w, id ? id : "") || rg_csv_writer_int(&w, (long long)num_of(e, "steps")) ||
                    rg_csv_writer_double(&w, num_of(e, "final_loss")) || rg_csv_writer_str(&w, why ? why : "") ||
                    rg_csv_writer_double(&w, num_of(e, "seconds")) || rg_csv_writer_end_row(&w)))
      rc = -1;
  }
  if (rc < 0) {
    rg_csv_writer_abort(&w);
    return -1;
  }
  return rg_csv_writer_close(&w);
}

int attack_progress_add(attack_progress *p, const attack_result *r, const char *log_path) {
  cJSON *e = cJSON_CreateObject();
  if (!e || !cJSON_AddStringToObject(e, "behavior_id", r->behavior_id) ||
      !cJSON_AddStringToObject(e, "test_case", r->test_case) || !cJSON_AddNumberToObject(e, "steps", r->steps) ||
      !cJSON_AddNumberToObject(e, "final_loss", r->final_loss) ||
      !cJSON_AddStringToObject(e, "stop_reason", r->stop_reason) ||
      !cJSON_AddNumberToObject(e, "seconds", r->seconds) || !cJSON_AddItemToArray(p->done, e)) {
    cJSON_Delete(e);
    return rg_error_set("out of memory");
  }
  char *text = cJSON_Print(p->root);
  int rc = text ? rg_write_file_atomic(p->path, text, strlen(text)) : rg_error_set("out of memory");
  free(text);
  return rc == 0 && log_path ? write_log(p, log_path) : rc;
}

int attack_progress_test_cases(const attack_progress *p, rg_completions *out) {
  memset(out, 0, sizeof *out);
  const cJSON *e;
  cJSON_ArrayForEach(e, p->done) {
    const char *id = str_of(e, "behavior_id"), *tc = str_of(e, "test_case");
    if (!id || !tc) return rg_error_set("%s: a finished behavior without behavior_id or test_case", p->path);
    if (rg_completions_add(out, id, tc, NULL) != 0) return rg_error_set("out of memory");
  }
  return 0;
}

int attack_progress_remove(const attack_progress *p) {
  if (remove(p->path) != 0 && errno != ENOENT) return rg_error_set("%s: cannot remove: %s", p->path, strerror(errno));
  return 0;
}
