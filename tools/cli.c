#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void print_usage(const char *cmd, const char *usage, const cli_opt *opts, int n_opts) {
  printf("usage: refgeo %s %s\n", cmd, usage);
  for (int i = 0; i < n_opts; i++) {
    const char *arg = opts[i].kind == CLI_BOOL ? "" : opts[i].kind == CLI_INT ? " N" : opts[i].kind == CLI_FLOAT ? " X" : " VALUE";
    printf("  --%s%s\t%s\n", opts[i].name, arg, opts[i].help);
  }
}

static int parse_value(const char *cmd, const cli_opt *o, const char *val) {
  char *end = NULL;
  errno = 0;
  switch (o->kind) {
  case CLI_STRING:
    *(const char **)o->dest = val;
    return 0;
  case CLI_INT: {
    long v = strtol(val, &end, 10);
    if (errno || !*val || *end || v < -2147483647L || v > 2147483647L)
      return rg_error_set("%s: --%s expects an integer, got '%s'", cmd, o->name, val);
    *(int *)o->dest = (int)v;
    return 0;
  }
  case CLI_FLOAT: {
    double v = strtod(val, &end);
    if (errno || !*val || *end) return rg_error_set("%s: --%s expects a number, got '%s'", cmd, o->name, val);
    *(double *)o->dest = v;
    return 0;
  }
  case CLI_MULTI: {
    cli_list *l = o->dest;
    const char **items = realloc(l->items, sizeof *items * (size_t)(l->n + 1));
    if (!items) return rg_error_set("%s: out of memory", cmd);
    items[l->n++] = val;
    l->items = items;
    return 0;
  }
  case CLI_BOOL:
    break;
  }
  return rg_error_set("%s: internal: bad option kind for --%s", cmd, o->name);
}

int cli_parse(int argc, char **argv, const cli_opt *opts, int n_opts, const char *usage, const char **pos,
              int max_pos, int *n_pos) {
  const char *cmd = argv[0];
  *n_pos = 0;
  bool only_positional = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_positional || a[0] != '-' || a[1] == '\0') {
      if (*n_pos >= max_pos) return rg_error_set("%s: unexpected argument '%s'", cmd, a);
      pos[(*n_pos)++] = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      only_positional = true;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      print_usage(cmd, usage, opts, n_opts);
      return 1;
    }
    if (a[1] != '-') return rg_error_set("%s: unknown flag '%s' (see refgeo %s --help)", cmd, a, cmd);
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_opt *o = NULL;
    for (int k = 0; k < n_opts; k++)
      if (strlen(opts[k].name) == name_len && strncmp(opts[k].name, name, name_len) == 0) o = &opts[k];
    if (!o) return rg_error_set("%s: unknown flag '--%.*s' (see refgeo %s --help)", cmd, (int)name_len, name, cmd);
    if (o->kind == CLI_BOOL) {
      if (eq) return rg_error_set("%s: --%s takes no value", cmd, o->name);
      *(bool *)o->dest = true;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (!val) {
      if (i + 1 >= argc) return rg_error_set("%s: --%s needs a value", cmd, o->name);
      val = argv[++i];
    }
    if (parse_value(cmd, o, val) != 0) return -1;
  }
  return 0;
}

void cli_list_free(cli_list *l) {
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

int cli_fail(void) {
  fprintf(stderr, "refgeo: %s\n", rg_error_get());
  return 1;
}
