/* cli.h: the small flag parser and output helpers shared by subcommands.
 *
 * Each subcommand lists its flags in a cli_opt table; cli_parse fills the
 * destinations, collects positional arguments and rejects unknown flags or
 * missing/ill-formed values with a one-line error (set via rg_error_set).
 *
 * Conventions every subcommand keeps (docs/cli.md lists each one's flags):
 *   - a command that takes a model takes it as the positional MODEL or as
 *     --model PATH (cli_take_model);
 *   - every error is one line "refgeo CMD: problem" on stderr, exit 1
 *     (cli_fail; main names CMD with cli_set_command), so messages never
 *     repeat the command's name;
 *   - --json prints one JSON object on stdout instead of the text report;
 *   - counts such as --batch are positive (cli_require_positive).
 */
#ifndef RG_CLI_H
#define RG_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

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

/* The model the --help examples name: where scripts/fetch-model.sh caches
 * SmolLM2-135M-Instruct. */
#define CLI_EXAMPLE_MODEL "~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* The environment that libgomp and OpenBLAS read once, as they load; a
 * process started without it restarts itself once with it set (execv of
 * /proc/self/exe). A value the user set is kept. Returns only when no restart
 * happened.
 *
 * GOMP_SPINCOUNT=10000: Debian's OpenBLAS runs its own threads beside
 * libgomp's, and libgomp's idle threads spin for ~300000 rounds by default,
 * taking the cores from the BLAS threads (a training step's backward then
 * varied by 50%). Not spinning at all (OMP_WAIT_POLICY=PASSIVE) halves
 * decoding, whose steps start a few hundred short parallel regions per token,
 * each then a futex wake-up (SmolLM2, batch 1, 2 threads: 36.6 tok/s
 * passive, 68 with 10000 rounds, 75 unbounded; the LoRA training step is
 * 2.20 s either way). So libgomp spins 10000 rounds, then sleeps. Left alone
 * when OMP_WAIT_POLICY or GOMP_SPINCOUNT is set.
 *
 * OPENBLAS_CORETYPE, only where OpenBLAS fell back to kernels without AVX2 on
 * a CPU that has it (backend/cpu/blas_core.h). */
void cli_runtime_env(char **argv);

/* Parses argv[1..argc-1] (argv[0] is the subcommand name). Positional
 * arguments go to pos[0..*n_pos-1] (at most max_pos). Returns 0 or -1 with
 * the error set. --help prints the usage and returns 1. */
int cli_parse(int argc, char **argv, const cli_opt *opts, int n_opts, const char *usage, const char **pos,
              int max_pos, int *n_pos);
void cli_list_free(cli_list *l);

/* --quiet and --verbose, which every command takes (cli_parse handles
 * them; cmd_train's own parser calls this): sets REFGEO_VERBOSITY to
 * "quiet" or "verbose" in the environment and returns true, or returns
 * false for any other ARG. Quiet: no progress bars or progress lines, only
 * results and errors. Verbose: progress lines in logs too, at every tenth
 * of a loop (util/progress.h). */
bool cli_verbosity_flag(const char *arg);
/* --device NAME, which every command takes too (cli_parse handles it):
 * the backend every model of the command runs on ("cpu", the default;
 * "cuda[:N]", "hip[:N]" in a GPU build), as REFGEO_DEVICE in the
 * environment (backend/backend.h rg_backend_default_name). 0 or -1. */
int cli_set_device(const char *name);
/* Where progress and per-step lines go: stderr, or NULL under --quiet. */
FILE *cli_log(void);

/* A stage child of `refgeo run` (REFGEO_STAGE_PARENT names its pid) dies
 * with it: PR_SET_PDEATHSIG, so that killing `run` never leaves a stage
 * writing the run directory. A no-op for any other process. First in main. */
void cli_die_with_parent(void);

/* With REFGEO_CHECK_FLAGS=1 in the environment a command only checks its
 * flags: cli_parse returns 1 (as for --help) once they parse, and the
 * command exits 0 without doing any work. `refgeo run` checks every stage's
 * flags this way before the first stage starts. */
bool cli_check_only(void);

/* Names the running subcommand for cli_fail (refgeo.c's dispatcher; a
 * process runs one subcommand). */
void cli_set_command(const char *name);

/* Prints "refgeo CMD: <error>" ("refgeo: <error>" before cli_set_command)
 * on stderr and returns the exit code 1. */
int cli_fail(void);

/* The model of a command that takes one as the positional MODEL (the first
 * of POS[0..*N_POS)) or as --model (*MODEL, NULL when not given): moves the
 * positional one into *MODEL and drops it from POS. Giving both is an error;
 * giving neither leaves *MODEL NULL (the command says what is missing).
 * Returns 0, or -1 with the error set. */
int cli_take_model(const char **model, const char **pos, int *n_pos);

/* 0 when V >= 1, else -1 with the error "--FLAG: V is not positive". */
int cli_require_positive(const char *flag, int v);

/* Prints O (formatted) and a newline on stdout and deletes it. Returns 0,
 * or -1 with the error set when it cannot be printed (out of memory). */
int cli_print_json(cJSON *o);

#endif
