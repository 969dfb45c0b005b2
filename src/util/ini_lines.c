/* ini_lines.c: inih's line reader with line numbers and a length check (ini_lines.h). */
#include "util/ini_lines.h"

#include <string.h>

#include "util/error.h"

char *rg_ini_read_line(char *str, int num, void *stream) {
  rg_ini_lines *x = stream;
  char *r = fgets(str, num, x->fp);
  if (!r) return NULL;
  x->line++;
  x->indented = str[0] == ' ' || str[0] == '\t';
  if (!strchr(str, '\n') && !feof(x->fp)) {
    if (!x->too_long)
      rg_error_set("%s:%d: a line longer than %d bytes (inih's limit; continue a list on indented lines)", x->path,
                   x->line, num - 2);
    x->too_long = true;
    int ch;
    while ((ch = fgetc(x->fp)) != EOF && ch != '\n') {
    }
  }
  return r;
}
