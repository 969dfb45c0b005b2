/* error.c: the thread's last error message and its helpers (error.h). */
#include "util/error.h"

#include <stdio.h>
#include <string.h>

enum { RG_ERROR_MAX = 1024 };
static _Thread_local char g_message[RG_ERROR_MAX];

/* Messages quote file contents and names, which may hold newlines or other
 * control characters; shown as '?' (as ls does), a message stays one line. */
static void make_one_line(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int rg_error_set(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof g_message, fmt, ap);
  va_end(ap);
  make_one_line(g_message);
  return -1;
}

int rg_error_prefix(const char *fmt, ...) {
  char prefix[RG_ERROR_MAX], old[RG_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, g_message, sizeof old);
  /* Written in two steps so that an over-long prefix or message truncates
   * cleanly (the tail of the old message is what is cut). */
  int n = snprintf(g_message, sizeof g_message, "%s: ", prefix);
  if (n > 0 && (size_t)n < sizeof g_message) {
    size_t len = strnlen(old, sizeof g_message - (size_t)n - 1);
    memcpy(g_message + n, old, len);
    g_message[(size_t)n + len] = '\0';
  }
  make_one_line(g_message);
  return -1;
}

const char *rg_error_get(void) { return g_message; }

void rg_error_clear(void) { g_message[0] = '\0'; }
