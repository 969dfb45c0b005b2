/* json.h: reading JSON files with errors that say where and why.
 *
 * cJSON's parser answers NULL both for text that is not JSON and when one of
 * its mallocs fails, and a loader that reports the second as the first
 * blames a good file. A failed malloc sets errno to ENOMEM (POSIX), and
 * nothing else the parser calls sets that value, so errno after a failed
 * parse says which it was.
 *
 * Every loader of a JSON file goes through rg_json_read_file (or
 * rg_json_parse_named for text it has already read or rewritten), so that
 * every bad file gets the same one-line error "NAME: not valid JSON at byte
 * N", N counted from 0 where the parser stopped.
 */
#ifndef RG_JSON_H
#define RG_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* cJSON_ParseWithLengthOpts(TEXT, LEN, END, false) (END may be NULL). On
 * NULL, *OUT_OF_MEMORY tells whether memory ran out (else the text is not
 * JSON, and *END says where it stops being JSON). */
cJSON *rg_json_parse(const char *text, size_t len, const char **end, bool *out_of_memory);

/* Parses TEXT[0..LEN) as one JSON value (trailing bytes are ignored, as
 * cJSON_Parse does). NULL with the error "NAME: not valid JSON at byte N" or
 * "NAME: out of memory parsing JSON". */
cJSON *rg_json_parse_named(const char *text, size_t len, const char *name);

/* Reads the file PATH and parses it (rg_json_parse_named). NULL with the
 * error set (the read error, or the parse error naming PATH). */
cJSON *rg_json_read_file(const char *path);

#endif
