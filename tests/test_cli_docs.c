/* test_cli_docs: docs/cli.md lists every command's flags as `refgeo CMD
 * --help` prints them, in both directions: each flag of --help has a row
 * with the same type, each row is a flag of --help, each command of
 * `refgeo --help` has a section, and each section is a command. Old main
 * had no such table; a flag added to a command without a row (or a row
 * left behind by a removed flag) fails here, naming both.
 *
 * --help prints "  --NAME[ KIND]\tHELP" per flag, KIND being N (int), X
 * (number), VALUE (string) or VALUE... (repeatable string), none for a
 * switch (tools/cli.c print_usage); docs/cli.md has "## `refgeo CMD`"
 * sections whose table rows are "| `--NAME` | TYPE | DEFAULT | MEANING |".
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

enum { MAX_COMMANDS = 64, MAX_FLAGS = 128 }; /* train has a flag per config key */

typedef struct {
  char name[48], type[32];
} flag;

typedef struct {
  char name[32];
  flag flags[MAX_FLAGS];
  int n_flags;
  bool seen; /* in both lists */
} command;

static const char *type_of_kind(const char *kind) {
  if (strcmp(kind, "") == 0) return "switch";
  if (strcmp(kind, "N") == 0) return "int";
  if (strcmp(kind, "X") == 0) return "number";
  if (strcmp(kind, "VALUE") == 0) return "string";
  if (strcmp(kind, "VALUE...") == 0) return "string (repeatable)";
  return "?";
}

/* The commands of `refgeo --help`: lines "  NAME  summary" after "commands:". */
static int help_commands(command *cmds) {
  char *out = NULL;
  assert_int_equal(t_run_cli("--help", &out, NULL), 0);
  int n = 0;
  const char *p = strstr(out, "commands:\n");
  assert_non_null(p);
  for (p = strchr(p, '\n') + 1; *p; p = strchr(p, '\n') + 1) {
    if (sscanf(p, " %31s", cmds[n].name) == 1) n++;
    if (!strchr(p, '\n') || n == MAX_COMMANDS) break;
  }
  free(out);
  return n;
}

/* The flags of `refgeo CMD --help`. */
static void help_flags(command *c) {
  char args[64], *out = NULL;
  snprintf(args, sizeof args, "%s --help", c->name);
  if (t_run_cli(args, &out, NULL) != 0) fail_msg("refgeo %s --help failed", c->name);
  c->n_flags = 0;
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "  --", 4) != 0) continue;
    char *tab = strchr(line, '\t');
    if (!tab) fail_msg("refgeo %s --help: no tab in '%s'", c->name, line);
    *tab = '\0';
    char *sp = strchr(line + 4, ' ');
    const char *kind = sp ? sp + 1 : "";
    if (sp) *sp = '\0';
    assert_true(c->n_flags < MAX_FLAGS);
    flag *f = &c->flags[c->n_flags++];
    snprintf(f->name, sizeof f->name, "%s", line + 4);
    snprintf(f->type, sizeof f->type, "%s", type_of_kind(kind));
  }
  free(out);
}

/* Trims the blanks around a table cell in place. */
static char *cell(char *s) {
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && s[n - 1] == ' ') s[--n] = '\0';
  return s;
}

/* Parses docs/cli.md into DOCS; returns the number of sections. */
static int doc_commands(command *docs) {
  char *path = t_fixture_path("../../docs/cli.md");
  char *text = rg_read_file(path, NULL);
  if (!text) fail_msg("%s", rg_error_get());
  int n = -1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char section[32];
    if (sscanf(line, "## `refgeo %31[^`]`", section) == 1) {
      assert_true(++n < MAX_COMMANDS);
      snprintf(docs[n].name, sizeof docs[n].name, "%s", section);
      docs[n].n_flags = 0;
      continue;
    }
    if (strncmp(line, "| `--", 5) != 0) continue;
    if (n < 0) fail_msg("%s: flag row before any command section: %s", path, line);
    char *fields[5];
    int k = 0;
    for (char *p = line + 1; k < 5 && p; k++) { /* name, type, default, meaning */
      fields[k] = p;
      p = strchr(p, '|');
      if (p) *p++ = '\0';
    }
    if (k < 4) fail_msg("%s: refgeo %s: a row with fewer than four cells", path, docs[n].name);
    char *name = cell(fields[0]);
    size_t len = strlen(name);
    if (len < 5 || name[len - 1] != '`') fail_msg("%s: refgeo %s: bad flag cell '%s'", path, docs[n].name, name);
    name[len - 1] = '\0';
    assert_true(docs[n].n_flags < MAX_FLAGS);
    flag *f = &docs[n].flags[docs[n].n_flags++];
    snprintf(f->name, sizeof f->name, "%s", name + 3); /* past "`--" */
    snprintf(f->type, sizeof f->type, "%s", cell(fields[1]));
  }
  free(text);
  free(path);
  return n + 1;
}

static const flag *find_flag(const command *c, const char *name) {
  for (int i = 0; i < c->n_flags; i++)
    if (strcmp(c->flags[i].name, name) == 0) return &c->flags[i];
  return NULL;
}

static void test_docs_match_help(void **state) {
  static command help[MAX_COMMANDS], docs[MAX_COMMANDS];
  int n_help = help_commands(help), n_docs = doc_commands(docs), problems = 0;
  assert_true(n_help >= 12);
  for (int i = 0; i < n_help; i++) {
    command *d = NULL;
    for (int j = 0; j < n_docs; j++)
      if (strcmp(docs[j].name, help[i].name) == 0) d = &docs[j];
    if (!d) {
      print_error("docs/cli.md has no section for refgeo %s\n", help[i].name);
      problems++;
      continue;
    }
    d->seen = true;
    help_flags(&help[i]);
    for (int k = 0; k < help[i].n_flags; k++) {
      const flag *h = &help[i].flags[k], *f = find_flag(d, h->name);
      if (!f) print_error("refgeo %s --%s: in --help, not in docs/cli.md\n", d->name, h->name), problems++;
      else if (strcmp(f->type, h->type) != 0)
        print_error("refgeo %s --%s: docs/cli.md says %s, --help says %s\n", d->name, h->name, f->type, h->type),
            problems++;
    }
    for (int k = 0; k < d->n_flags; k++)
      if (!find_flag(&help[i], d->flags[k].name))
        print_error("refgeo %s --%s: in docs/cli.md, not in --help\n", d->name, d->flags[k].name), problems++;
  }
  for (int j = 0; j < n_docs; j++)
    if (!docs[j].seen) print_error("docs/cli.md documents refgeo %s, which is no command\n", docs[j].name), problems++;
  if (problems) fail_msg("%d differences between docs/cli.md and refgeo --help", problems);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_docs_match_help)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
