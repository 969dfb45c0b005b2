/* backend/cpu/fail.c: cpu_fail, how every CPU kernel file records an
 * operation's failure for rg_backend_status (backend.h, "Errors"). A file of
 * its own, below the files that call it, so that the kernel files and the
 * operation table (cpu.c) do not call each other both ways. */
#include <stdarg.h>
#include <stdio.h>

#include "backend/cpu/cpu_internal.h"

void cpu_fail(rg_backend *be, const char *fmt, ...) {
  cpu_backend *c = cpu(be);
  if (c->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
  c->failed = true;
}
