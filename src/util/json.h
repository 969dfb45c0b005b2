/* json.h: cJSON parsing that tells a full heap from a file that is not JSON.
 *
 * cJSON's parser answers NULL both for text that is not JSON and when one of
 * its mallocs fails, and a loader that reports the second as the first
 * blames a good file. A failed malloc sets errno to ENOMEM (POSIX), and
 * nothing else the parser calls sets that value, so errno after a failed
 * parse says which it was.
 */
#ifndef RG_JSON_H
#define RG_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* cJSON_ParseWithLengthOpts(TEXT, LEN, END, false) (END may be NULL). On
 * NULL, *OUT_OF_MEMORY tells whether memory ran out (else the text is not
 * JSON, and cJSON_GetErrorPtr / *END say where it stops being JSON). */
cJSON *rg_json_parse(const char *text, size_t len, const char **end, bool *out_of_memory);

#endif
