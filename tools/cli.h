/* cli.h: the small flag parser and output helpers shared by subcommands.
 *
 * Each subcommand lists its flags in a cli_opt table; cli_parse fills the
 * destinations, collects positional arguments and rejects unknown flags or
 * missing/ill-formed values with a one-line error (set via rg_error_set).
 */
#ifndef RG_CLI_H
#define RG_CLI_H

#include <stdbool.h>

typedef enum {
  CLI_BOOL,   /* --name            sets bool* to true */
  CLI_STRING, /* --name VALUE      sets const char** */
  CLI_INT,    /* --name N          sets int* */
  CLI_FLOAT,  /* --name X          sets double* */
  CLI_MULTI   /* --name VALUE ...  appends to a cli_list* (repeatable) */
} cli_kind;

typedef struct {
  const char **items;
  int n;
} cli_list;

typedef struct {
  const char *name; /* without the leading "--" */
  cli_kind kind;
  void *dest;
  const char *help;
} cli_opt;

/* Parses argv[1..argc-1] (argv[0] is the subcommand name). Positional
 * arguments go to pos[0..*n_pos-1] (at most max_pos). Returns 0 or -1 with
 * the error set. --help prints the usage and returns 1. */
int cli_parse(int argc, char **argv, const cli_opt *opts, int n_opts, const char *usage, const char **pos,
              int max_pos, int *n_pos);
void cli_list_free(cli_list *l);

/* Prints "refgeo: <error>" on stderr and returns the exit code 1. */
int cli_fail(void);

#endif
