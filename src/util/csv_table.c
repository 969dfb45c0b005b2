/* csv_table.c: a whole CSV file read into memory with libcsv (csv_table.h). */
#include "util/csv_table.h"

#include <csv.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"

/* Parser state shared with libcsv's callbacks. libcsv reports fields and row
 * ends but not positions, so the file is fed one physical line at a time and
 * `line` is the 1-based number of the line being fed; a row's first line is
 * that number minus the newlines inside its first field. */
typedef struct {
  rg_csv *t;
  char **fields; /* fields of the row being assembled */
  int n_fields;
  int cap_fields;
  size_t cap_rows;
  long line;
  long row_line;   /* first line of the row being assembled */
  int have_header;
  int failed;      /* an error was recorded in a callback; stop */
} csv_reader;

static long count_newlines(const char *s, size_t len) {
  long n = 0;
  for (size_t i = 0; i < len; i++) n += s[i] == '\n';
  return n;
}

static void on_field(void *data, size_t len, void *user) {
  csv_reader *r = user;
  if (r->failed) return;
  if (r->n_fields == r->cap_fields) {
    int cap = r->cap_fields ? 2 * r->cap_fields : 16;
    char **grown = realloc(r->fields, (size_t)cap * sizeof *grown);
    if (!grown) goto oom;
    r->fields = grown;
    r->cap_fields = cap;
  }
  if (r->n_fields == 0) r->row_line = r->line - count_newlines(data, len);
  char *s = malloc(len + 1);
  if (!s) goto oom;
  if (len) memcpy(s, data, len);
  s[len] = '\0';
  r->fields[r->n_fields++] = s;
  return;
oom:
  rg_error_set("%s: out of memory at line %ld", r->t->path, r->line);
  r->failed = 1;
}

static void drop_fields(csv_reader *r) {
  for (int i = 0; i < r->n_fields; i++) free(r->fields[i]);
  r->n_fields = 0;
}

static void on_row(int term, void *user) {
  csv_reader *r = user;
  rg_csv *t = r->t;
  if (r->failed) return;
  if (!r->have_header) {
    t->header = malloc((size_t)r->n_fields * sizeof *t->header);
    if (!t->header) goto oom;
    memcpy(t->header, r->fields, (size_t)r->n_fields * sizeof *t->header);
    t->n_cols = r->n_fields;
    r->n_fields = 0;
    r->have_header = 1;
    return;
  }
  if (r->n_fields != t->n_cols) {
    rg_error_set("%s: line %ld: row has %d fields, header has %d", t->path, r->row_line, r->n_fields,
                 t->n_cols);
    r->failed = 1;
    drop_fields(r);
    return;
  }
  if (t->n_rows == r->cap_rows) {
    size_t cap = r->cap_rows ? 2 * r->cap_rows : 64;
    char ***grown = realloc(t->rows, cap * sizeof *grown);
    if (!grown) goto oom;
    t->rows = grown;
    r->cap_rows = cap;
  }
  char **row = malloc((size_t)t->n_cols * sizeof *row);
  if (!row) goto oom;
  memcpy(row, r->fields, (size_t)t->n_cols * sizeof *row);
  t->rows[t->n_rows++] = row;
  r->n_fields = 0;
  return;
oom:
  rg_error_set("%s: out of memory at line %ld", t->path, r->line);
  r->failed = 1;
  drop_fields(r);
}

/* Python's csv module keeps blanks around unquoted fields; libcsv trims them
 * by default. Treating no character as a space makes the two agree. */
static int never_space(unsigned char c) { return 0; }

rg_csv *rg_csv_read(const char *path) {
  size_t len;
  char *text = rg_read_file(path, &len);
  if (!text) return NULL;
  rg_csv *t = calloc(1, sizeof *t);
  csv_reader r = {.t = t, .line = 1};
  struct csv_parser p;
  int parser_ready = 0;
  if (!t || !(t->path = strdup(path))) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
    rg_error_set("%s: cannot initialise the CSV parser", path);
    goto fail;
  }
  parser_ready = 1;
  csv_set_space_func(&p, never_space);

  const char *s = text;
  const char *end = text + len;
  if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* UTF-8 byte order mark */
  if (s == end) {
    rg_error_set("%s: empty file (no header row)", path);
    goto fail;
  }
  while (s < end && !r.failed) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t chunk = nl ? (size_t)(nl - s) + 1 : (size_t)(end - s);
    if (csv_parse(&p, s, chunk, on_field, on_row, &r) != chunk) {
      rg_error_set("%s: line %ld: %s", path, r.line,
                   csv_error(&p) == CSV_EPARSE ? "malformed quoting" : csv_strerror(csv_error(&p)));
      goto fail;
    }
    s += chunk;
    if (nl) r.line++;
  }
  if (!r.failed && csv_fini(&p, on_field, on_row, &r) != 0) {
    rg_error_set("%s: line %ld: unterminated quoted field (starts on line %ld)", path, r.line,
                 r.n_fields ? r.row_line : r.line);
    goto fail;
  }
  if (r.failed) goto fail;
  if (!r.have_header) {
    rg_error_set("%s: empty file (no header row)", path);
    goto fail;
  }
  csv_free(&p);
  free(r.fields);
  free(text);
  return t;
fail:
  if (parser_ready) csv_free(&p);
  drop_fields(&r);
  free(r.fields);
  free(text);
  rg_csv_free(t);
  return NULL;
}

void rg_csv_free(rg_csv *t) {
  if (!t) return;
  for (size_t r = 0; r < t->n_rows; r++) {
    for (int c = 0; c < t->n_cols; c++) free(t->rows[r][c]);
    free(t->rows[r]);
  }
  free(t->rows);
  for (int c = 0; c < t->n_cols; c++) free(t->header[c]);
  free(t->header);
  free(t->path);
  free(t);
}

int rg_csv_col(const rg_csv *t, const char *name) {
  for (int c = 0; c < t->n_cols; c++)
    if (strcmp(t->header[c], name) == 0) return c;
  return -1;
}

int rg_csv_require_col(const rg_csv *t, const char *name) {
  int c = rg_csv_col(t, name);
  if (c < 0) rg_error_set("%s: missing column %s", t->path, name);
  return c;
}
