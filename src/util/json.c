#include "util/json.h"

#include <errno.h>

cJSON *rg_json_parse(const char *text, size_t len, const char **end, bool *out_of_memory) {
  errno = 0;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, end, false);
  *out_of_memory = !root && errno == ENOMEM;
  return root;
}
