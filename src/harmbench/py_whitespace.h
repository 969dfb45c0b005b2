/* py_whitespace.h: whitespace as Python's str.isspace() defines it, on UTF-8
 * text, for the rules HarmBench and XSTest write in Python:
 * generate_completions.py's .strip() of every completion and XSTest's
 * .strip() before startswith.
 *
 * The set (Python 3: bidirectional class WS, B or S, or category Zs):
 * \t \n \v \f \r, U+001C..U+001F, ' ', U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; not U+200B,
 * U+180E or U+FEFF. tools/reference/make_xstest_fixtures.py and
 * make_strip_fixtures.py check it against Python.
 */
#ifndef RG_PY_WHITESPACE_H
#define RG_PY_WHITESPACE_H

#include <stddef.h>

/* The length in bytes of the whitespace character at S, or 0. */
size_t rg_py_space_len(const char *s);

/* Python's S.strip() in place: leading and trailing whitespace removed. */
void rg_py_strip(char *s);

#endif
