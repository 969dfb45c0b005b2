/* test_cli_parse: tools/cli.c's flag parser against the contract in cli.h.
 *
 * cli.c is compiled into the CLI only, not into refgeo_core, so the test
 * includes the source itself. Expected values are the flag strings' plain
 * meanings (C's strtol/strtod for numbers), never the parser's own output.
 */
#include "testlib.h"

#include <stdio.h>
#include <string.h>

#include "../tools/cli.c"

typedef struct {
  bool verbose;
  const char *model;
  int layer;
  double alpha;
  cli_list prompts;
} flags;

/* Parses a NULL-terminated argument list (argv[0] = "capture") into F. */
static int parse(flags *f, const char **pos, int max_pos, int *n_pos, ...) {
  static const char *const USAGE = "[FLAGS] MODEL";
  char *argv[32];
  int argc = 0;
  va_list ap;
  va_start(ap, n_pos);
  argv[argc++] = "capture";
  for (char *a; (a = va_arg(ap, char *)) != NULL;) argv[argc++] = a;
  va_end(ap);
  const cli_opt opts[] = {
      {"verbose", CLI_BOOL, &f->verbose, "print progress"},
      {"model", CLI_STRING, &f->model, "model file"},
      {"layer", CLI_INT, &f->layer, "layer index"},
      {"alpha", CLI_FLOAT, &f->alpha, "step size"},
      {"prompts", CLI_MULTI, &f->prompts, "prompt file (repeatable)"},
  };
  rg_error_clear();
  return cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), USAGE, pos, max_pos, n_pos);
}

static void test_all_kinds(void **state) {
  flags f = {0};
  const char *pos[4];
  int n_pos = -1;
  assert_int_equal(parse(&f, pos, 4, &n_pos, "--verbose", "--model", "m.gguf", "--layer=-3", "--alpha", "2.5e-3",
                         "--prompts", "a.json", "first", "--prompts=b.json", "second", NULL),
                   0);
  assert_true(f.verbose);
  assert_string_equal(f.model, "m.gguf");
  assert_int_equal(f.layer, -3);
  assert_true(f.alpha == 2.5e-3); /* exact: the same decimal string through strtod */
  assert_int_equal(f.prompts.n, 2);
  assert_string_equal(f.prompts.items[0], "a.json");
  assert_string_equal(f.prompts.items[1], "b.json");
  assert_int_equal(n_pos, 2);
  assert_string_equal(pos[0], "first");
  assert_string_equal(pos[1], "second");
  cli_list_free(&f.prompts);
  assert_null(f.prompts.items);
  assert_int_equal(f.prompts.n, 0);
}

static void test_positionals(void **state) {
  flags f = {0};
  const char *pos[4];
  int n_pos;
  /* "-" is a positional (stdin), and after "--" everything is. */
  assert_int_equal(parse(&f, pos, 4, &n_pos, "-", "--", "--verbose", "-x", NULL), 0);
  assert_false(f.verbose);
  assert_int_equal(n_pos, 3);
  assert_string_equal(pos[0], "-");
  assert_string_equal(pos[1], "--verbose");
  assert_string_equal(pos[2], "-x");
  /* A value that looks like a flag is still the value. */
  assert_int_equal(parse(&f, pos, 4, &n_pos, "--model", "--verbose", NULL), 0);
  assert_string_equal(f.model, "--verbose");
  assert_false(f.verbose);
  assert_int_equal(n_pos, 0);
}

/* Each bad command line gives -1 and one line naming the flag (cli_fail
 * adds "refgeo CMD: "). */
static void test_errors(void **state) {
  static const struct {
    const char *args[3];
    const char *message;
  } BAD[] = {
      {{"--nope", NULL}, "unknown flag '--nope' (see refgeo capture --help)"},
      {{"--nope=1", NULL}, "unknown flag '--nope' (see refgeo capture --help)"},
      {{"-v", NULL}, "unknown flag '-v' (see refgeo capture --help)"},
      {{"--model", NULL}, "--model needs a value"},
      {{"--verbose=yes", NULL}, "--verbose takes no value"},
      {{"--layer", "12x"}, "--layer expects an integer, got '12x'"},
      {{"--layer", ""}, "--layer expects an integer, got ''"},
      {{"--layer", "99999999999"}, "--layer expects an integer, got '99999999999'"}, /* > INT_MAX */
      {{"--alpha", "fast"}, "--alpha expects a number, got 'fast'"},
      {{"--alpha", "1e999"}, "--alpha expects a number, got '1e999'"}, /* ERANGE */
      {{"one", "two"}, "unexpected argument 'two'"},                    /* max_pos = 1 */
  };
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    flags f = {0};
    const char *pos[1];
    int n_pos;
    assert_int_equal(parse(&f, pos, 1, &n_pos, BAD[i].args[0], BAD[i].args[1], NULL), -1);
    assert_string_equal(rg_error_get(), BAD[i].message);
    cli_list_free(&f.prompts);
  }
}

/* MODEL positionally or as --model, never both (cli_take_model). */
static void test_take_model(void **state) {
  const char *pos[2] = {"m.gguf", "text"}, *model = NULL;
  int n_pos = 2;
  assert_int_equal(cli_take_model(&model, pos, &n_pos), 0);
  assert_string_equal(model, "m.gguf");
  assert_int_equal(n_pos, 1);
  assert_string_equal(pos[0], "text");
  model = "flag.gguf";
  n_pos = 0;
  assert_int_equal(cli_take_model(&model, pos, &n_pos), 0); /* --model alone */
  assert_string_equal(model, "flag.gguf");
  pos[0] = "m.gguf";
  n_pos = 1;
  assert_int_equal(cli_take_model(&model, pos, &n_pos), -1);
  assert_string_equal(rg_error_get(), "MODEL given twice ('m.gguf' and --model 'flag.gguf')");
  model = NULL;
  n_pos = 0;
  assert_int_equal(cli_take_model(&model, pos, &n_pos), 0); /* neither: the command says what is missing */
  assert_null(model);
}

static void test_require_positive(void **state) {
  assert_int_equal(cli_require_positive("batch", 1), 0);
  assert_int_equal(cli_require_positive("batch", 2147483647), 0);
  assert_int_equal(cli_require_positive("batch", 0), -1);
  assert_string_equal(rg_error_get(), "--batch: 0 is not positive");
  assert_int_equal(cli_require_positive("batch", -2147483647), -1);
  assert_string_equal(rg_error_get(), "--batch: -2147483647 is not positive");
}

static void test_help_and_fail(void **state) {
  flags f = {0};
  const char *pos[1];
  int n_pos;
  assert_int_equal(parse(&f, pos, 1, &n_pos, "--help", NULL), 1);
  assert_int_equal(parse(&f, pos, 1, &n_pos, "-h", NULL), 1);
  rg_error_set("capture: something went wrong");
  assert_int_equal(cli_fail(), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_kinds),
      cmocka_unit_test(test_positionals),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_take_model),
      cmocka_unit_test(test_require_positive),
      cmocka_unit_test(test_help_and_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
