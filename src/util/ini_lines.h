/* ini_lines.h: inih's line reader with line numbers and a length check.
 *
 * Debian's libinih is built without INI_HANDLER_LINENO, so a handler cannot
 * be told which line it is handling; and a line longer than inih's buffer
 * (INI_MAX_LINE, 200 bytes there) would be read as two lines. Passed as the
 * reader of ini_parse_stream, this counts lines (inih calls the handler
 * right after reading a key's line, so LINE is that key's line), notes
 * whether the line is indented (inih's continuation of the key before), and
 * turns an over-long line into an error naming the file and line.
 */
#ifndef RG_INI_LINES_H
#define RG_INI_LINES_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
  FILE *fp;
  const char *path;
  int line;      /* lines read so far */
  bool indented; /* the last line starts with a blank */
  bool too_long; /* a line did not fit; the error is set */
} rg_ini_lines;

/* ini_reader for ini_parse_stream; STREAM is an rg_ini_lines. */
char *rg_ini_read_line(char *str, int num, void *stream);

#endif
