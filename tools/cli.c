/* cli.c: the flag parser and output helpers shared by the subcommands (cli.h). */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/blas_core.h"
#include "util/error.h"
#include "util/fault.h"

static void print_usage(const char *cmd, const char *usage, const cli_opt *opts, int n_opts) {
  printf("usage: refgeo %s %s\n", cmd, usage);
  for (int i = 0; i < n_opts; i++) {
    /* the value's kind, as docs/cli.md's type column names it (test_cli_docs) */
    const cli_kind k = opts[i].kind;
    const char *arg = k == CLI_BOOL    ? ""
                      : k == CLI_INT   ? " N"
                      : k == CLI_FLOAT ? " X"
                      : k == CLI_MULTI ? " VALUE..."
                                       : " VALUE";
    printf("  --%s%s\t%s\n", opts[i].name, arg, opts[i].help);
  }
}

static int parse_value(const cli_opt *o, const char *val) {
  char *end = NULL;
  errno = 0;
  switch (o->kind) {
  case CLI_STRING:
    *(const char **)o->dest = val;
    return 0;
  case CLI_INT: {
    long v = strtol(val, &end, 10);
    if (errno || !*val || *end || v < -2147483647L || v > 2147483647L)
      return rg_error_set("--%s expects an integer, got '%s'", o->name, val);
    *(int *)o->dest = (int)v;
    return 0;
  }
  case CLI_FLOAT: {
    double v = strtod(val, &end);
    if (errno || !*val || *end) return rg_error_set("--%s expects a number, got '%s'", o->name, val);
    *(double *)o->dest = v;
    return 0;
  }
  case CLI_MULTI: {
    cli_list *l = o->dest;
    const char **items = realloc(l->items, sizeof *items * (size_t)(l->n + 1));
    if (!items) return rg_error_set("out of memory");
    items[l->n++] = val;
    l->items = items;
    return 0;
  }
  case CLI_BOOL:
    break;
  }
  return rg_error_set("internal: bad option kind for --%s", o->name);
}

int cli_parse(int argc, char **argv, const cli_opt *opts, int n_opts, const char *usage, const char **pos,
              int max_pos, int *n_pos) {
  const char *cmd = argv[0];
  *n_pos = 0;
  bool only_positional = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_positional || a[0] != '-' || a[1] == '\0') {
      if (*n_pos >= max_pos) return rg_error_set("unexpected argument '%s'", a);
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
    if (a[1] != '-') return rg_error_set("unknown flag '%s' (see refgeo %s --help)", a, cmd);
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_opt *o = NULL;
    for (int k = 0; k < n_opts; k++)
      if (strlen(opts[k].name) == name_len && strncmp(opts[k].name, name, name_len) == 0) o = &opts[k];
    if (!o && !eq && cli_verbosity_flag(a)) continue; /* every command's, unless it has its own */
    if (!o && name_len == 6 && strncmp(name, "device", 6) == 0) { /* so is --device */
      const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
      if (!val) return rg_error_set("--device needs a value");
      if (rg_backend_check_device(val) < 0 || cli_set_device(val) < 0) return -1;
      continue;
    }
    if (!o) return rg_error_set("unknown flag '--%.*s' (see refgeo %s --help)", (int)name_len, name, cmd);
    if (o->kind == CLI_BOOL) {
      if (eq) return rg_error_set("--%s takes no value", o->name);
      *(bool *)o->dest = true;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (!val) {
      if (i + 1 >= argc) return rg_error_set("--%s needs a value", o->name);
      val = argv[++i];
    }
    if (parse_value(o, val) != 0) return -1;
  }
  if (!cli_check_only()) return 0;
  rg_fault_point("check-flags"); /* tests: a stage child killed while `refgeo run` checks its flags */
  return 1; /* checked: stop as after --help */
}

void cli_die_with_parent(void) {
  const char *v = getenv("REFGEO_STAGE_PARENT");
  if (!v || !*v) return;
  const long parent = strtol(v, NULL, 10);
  unsetenv("REFGEO_STAGE_PARENT"); /* this process's own children are not stages */
  /* SIGKILL when the parent ends, however it ends: a killed `refgeo run`
   * leaves no stage writing its run directory. The parent may have died
   * before the call; then the child is orphaned already and ends now. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != (pid_t)parent) raise(SIGKILL);
}

void cli_runtime_env(char **argv) {
  bool changed = false;
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
    changed |= setenv("GOMP_SPINCOUNT", "10000", 1) == 0;
  changed |= rg_blas_core_select();
  if (changed) execv("/proc/self/exe", argv); /* returns only on failure: run on as we are */
}

int cli_set_device(const char *name) {
  /* in the environment, as the verbosity: `refgeo run`'s stages inherit it */
  if (setenv("REFGEO_DEVICE", name, 1) != 0) return rg_error_set("--device: cannot set REFGEO_DEVICE");
  return 0;
}

bool cli_verbosity_flag(const char *arg) {
  /* In the environment, so that `refgeo run`'s stages (child processes)
   * and util/progress.h see it too. */
  if (strcmp(arg, "--quiet") == 0) return setenv("REFGEO_VERBOSITY", "quiet", 1) == 0;
  if (strcmp(arg, "--verbose") == 0) return setenv("REFGEO_VERBOSITY", "verbose", 1) == 0;
  return false;
}

FILE *cli_log(void) {
  const char *v = getenv("REFGEO_VERBOSITY");
  return v && strcmp(v, "quiet") == 0 ? NULL : stderr;
}

bool cli_check_only(void) {
  const char *v = getenv("REFGEO_CHECK_FLAGS");
  return v && strcmp(v, "1") == 0;
}

void cli_list_free(cli_list *l) {
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

static const char *g_command; /* the running subcommand, for cli_fail */

void cli_set_command(const char *name) { g_command = name; }

int cli_fail(void) {
  fprintf(stderr, "refgeo%s%s: %s\n", g_command ? " " : "", g_command ? g_command : "", rg_error_get());
  return 1;
}

int cli_take_model(const char **model, const char **pos, int *n_pos) {
  if (*n_pos == 0) return 0;
  if (*model) return rg_error_set("MODEL given twice ('%s' and --model '%s')", pos[0], *model);
  *model = pos[0];
  for (int i = 1; i < *n_pos; i++) pos[i - 1] = pos[i];
  (*n_pos)--;
  return 0;
}

int cli_require_positive(const char *flag, int v) {
  return v >= 1 ? 0 : rg_error_set("--%s: %d is not positive", flag, v);
}

int cli_print_json(cJSON *o) {
  char *text = o ? cJSON_Print(o) : NULL;
  cJSON_Delete(o);
  if (!text) return rg_error_set("out of memory printing JSON");
  printf("%s\n", text);
  free(text);
  return 0;
}
