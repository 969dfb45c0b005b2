/* error.h: how refgeo reports failures.
 *
 * Functions that can fail return an error indicator (NULL, or a negative
 * int) and record one line describing the problem with rg_error_set(). The
 * caller that finally gives up (usually the CLI) prints rg_error_get().
 * Messages name the file or flag and the problem, e.g.
 *   "model.gguf: bad magic 0x46554747 (not a GGUF file)".
 * The message buffer is thread-local; a new rg_error_set() replaces the old.
 * Messages are cut at 1023 characters (a prefix that does not fit cuts the
 * tail of the older message). Control characters (a newline quoted from a
 * file, say) are replaced by '?', so a message is always one line.
 */
#ifndef RG_ERROR_H
#define RG_ERROR_H

#include <stdarg.h>

/* Records a printf-formatted message. Always returns -1 so that callers can
 * write `return rg_error_set(...)`. */
int rg_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prepends "prefix: " to the current message (adds context on the way up). */
int rg_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The current message; "" when none was set. Owned by refgeo. */
const char *rg_error_get(void);

void rg_error_clear(void);

#endif
