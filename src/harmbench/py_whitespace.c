/* py_whitespace.c: Python's str.isspace() and str.strip() on UTF-8 text
 * (py_whitespace.h). */
#include "harmbench/py_whitespace.h"

#include <string.h>

/* The UTF-8 forms of the non-ASCII code points for which Python's
 * str.isspace() is true (U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000); tools/reference/make_xstest_fixtures.py
 * checks this set against Python over every code point. */
static const char *const PY_SPACE_UTF8[] = {
    "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82",
    "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88",
    "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
    "\xE3\x80\x80",
};

/* ASCII: \t \n \v \f \r, U+001C..U+001F (Python counts the information
 * separators as space) and ' '. */
size_t rg_py_space_len(const char *s) {
  unsigned char c = (unsigned char)*s;
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  for (size_t i = 0; i < sizeof PY_SPACE_UTF8 / sizeof PY_SPACE_UTF8[0]; i++) {
    size_t n = strlen(PY_SPACE_UTF8[i]);
    if (strncmp(s, PY_SPACE_UTF8[i], n) == 0) return n;
  }
  return 0;
}

void rg_py_strip(char *s) {
  const char *start = s;
  for (size_t k; (k = rg_py_space_len(start)) > 0;) start += k;
  /* the end of the last character that is not whitespace: walked forward,
   * since a multi-byte space cannot be recognised from its last byte */
  const char *end = start;
  for (const char *p = start; *p;) {
    const size_t k = rg_py_space_len(p);
    if (k > 0) {
      p += k;
      continue;
    }
    /* one character: its lead byte and its continuation bytes (a stray
     * byte of invalid UTF-8 counts as a character of its own) */
    for (p++; ((unsigned char)*p & 0xC0) == 0x80; p++) {}
    end = p;
  }
  const size_t n = (size_t)(end - start);
  memmove(s, start, n);
  s[n] = '\0';
}
