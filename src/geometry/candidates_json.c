/* candidates_json.c: reading refusal_direction's direction_evaluations.json. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/selection.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* Python's json module writes the non-standard tokens NaN, Infinity and
 * -Infinity; cJSON rejects them. Outside string literals they are rewritten
 * to null (which reads back as NaN below). Returns a malloc'd copy. */
static char *python_json_to_json(const char *text, size_t len) {
  char *out = malloc(len * 2 + 1); /* "NaN" -> "null" grows by 1 per 3 bytes */
  if (!out) return NULL;
  size_t o = 0;
  int in_string = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = text[i];
    if (in_string) {
      out[o++] = ch;
      if (ch == '\\' && i + 1 < len) out[o++] = text[++i];
      else if (ch == '"') in_string = 0;
      continue;
    }
    if (ch == '"') in_string = 1;
    const char *tokens[] = {"-Infinity", "Infinity", "NaN"};
    int replaced = 0;
    for (int t = 0; t < 3 && !replaced; t++) {
      size_t tl = strlen(tokens[t]);
      if (len - i >= tl && memcmp(text + i, tokens[t], tl) == 0) {
        memcpy(out + o, "null", 4);
        o += 4;
        i += tl - 1;
        replaced = 1;
      }
    }
    if (!replaced) out[o++] = ch;
  }
  out[o] = '\0';
  return out;
}

static int read_number(const cJSON *obj, const char *key, double *v) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (cJSON_IsNull(item)) {
    *v = NAN;
    return 0;
  }
  if (!cJSON_IsNumber(item)) return -1;
  *v = item->valuedouble;
  return 0;
}

static int read_int(const cJSON *obj, const char *key, int *v) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(item) || item->valuedouble != floor(item->valuedouble) || fabs(item->valuedouble) > 1e6) return -1;
  *v = (int)item->valuedouble;
  return 0;
}

rg_candidate *rg_candidates_read_json(const char *path, int *n) {
  *n = 0;
  size_t len = 0;
  char *raw = rg_read_file(path, &len);
  if (!raw) return NULL;
  char *text = python_json_to_json(raw, len);
  free(raw);
  if (!text) {
    rg_error_set("%s: out of memory", path);
    return NULL;
  }
  /* The byte of a parse error is counted in the rewritten text: past a NaN
   * it is one more than the file's, past an Infinity 4 (5 for -Infinity) less. */
  cJSON *root = rg_json_parse_named(text, strlen(text), path);
  free(text);
  rg_candidate *c = NULL;
  if (!root) goto done;
  if (!cJSON_IsArray(root)) {
    rg_error_set("%s: expected a JSON array of candidates", path);
    goto done;
  }
  int count = cJSON_GetArraySize(root);
  c = malloc((size_t)(count > 0 ? count : 1) * sizeof *c);
  if (!c) {
    rg_error_set("%s: out of memory for %d candidates", path, count);
    goto done;
  }
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    rg_candidate *ci = &c[i];
    if (!cJSON_IsObject(item) || read_int(item, "position", &ci->pos) != 0 || read_int(item, "layer", &ci->layer) != 0 ||
        read_number(item, "refusal_score", &ci->bypass) != 0 || read_number(item, "steering_score", &ci->induce) != 0 ||
        read_number(item, "kl_div_score", &ci->kl) != 0) {
      rg_error_set("%s: candidate %d lacks an integer position/layer or a numeric "
                   "refusal_score/steering_score/kl_div_score", path, i);
      free(c);
      c = NULL;
      goto done;
    }
    i++;
  }
  *n = count;
done:
  cJSON_Delete(root);
  return c;
}
