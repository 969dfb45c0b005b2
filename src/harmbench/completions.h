/* completions.h: HarmBench's two JSON interchange files.
 *
 *   test_cases.json   {"BehaviorID": ["test case", ...], ...}
 *   completions.json  {"BehaviorID": [{"test_case": "...", "generation": "..."}, ...], ...}
 *
 * (generate_test_cases.py writes the first, generate_completions.py the
 * second; evaluate_completions.py reads it.) Both are held as flat lists of
 * entries in file order; entries of one BehaviorID are written together under
 * one key, keys in order of first appearance. Extra keys inside a completion
 * object (HarmBench adds "label" after judging) are ignored on reading.
 * Files are written atomically with cJSON.
 *
 * Ownership: a list owns all its strings; the *_free functions release them.
 */
#ifndef RG_COMPLETIONS_H
#define RG_COMPLETIONS_H

#include <stddef.h>

typedef struct {
  char *behavior_id;
  char *test_case;
  char *generation; /* NULL in a test-case list */
} rg_completion;

typedef struct {
  size_t n, cap;
  rg_completion *items;
} rg_completions;

/* Appends copies of the strings (generation may be NULL). 0 or -1 (OOM). */
int rg_completions_add(rg_completions *c, const char *behavior_id, const char *test_case, const char *generation);
void rg_completions_free(rg_completions *c); /* frees the contents, not c itself */

/* Readers fill *out (which is zeroed first); 0, or -1 with the error naming
 * the file and the offending BehaviorID. */
int rg_test_cases_read(const char *path, rg_completions *out);
int rg_completions_read(const char *path, rg_completions *out);

/* Writers: test cases ignore the generation field; completions require it. */
int rg_test_cases_write(const char *path, const rg_completions *c);
int rg_completions_write(const char *path, const rg_completions *c);

#endif
