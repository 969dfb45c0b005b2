/* json.c: reading JSON files with errors that say where and why (json.h). */
#include "util/json.h"

#include <errno.h>
#include <stdlib.h>

#include "util/error.h"
#include "util/fileio.h"

cJSON *rg_json_parse(const char *text, size_t len, const char **end, bool *out_of_memory) {
  errno = 0;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, end, false);
  *out_of_memory = !root && errno == ENOMEM;
  return root;
}

cJSON *rg_json_parse_named(const char *text, size_t len, const char *name) {
  const char *end = NULL;
  bool out_of_memory;
  cJSON *root = rg_json_parse(text, len, &end, &out_of_memory);
  if (root) return root;
  if (out_of_memory) {
    rg_error_set("%s: out of memory parsing JSON", name);
  } else {
    /* cJSON sets END to where it stopped (the last byte for a cut-off text) */
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    rg_error_set("%s: not valid JSON at byte %zu", name, at);
  }
  return NULL;
}

cJSON *rg_json_read_file(const char *path) {
  size_t len = 0;
  char *text = rg_read_file(path, &len);
  if (!text) return NULL;
  cJSON *root = rg_json_parse_named(text, len, path);
  free(text);
  return root;
}
