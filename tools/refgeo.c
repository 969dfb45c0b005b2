/* refgeo: command-line entry point. Dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const rg_command COMMANDS[] = {
    {"info", cmd_info, "print a model's config, tensor types and parameter count"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"generate", cmd_generate, "generate a continuation of a prompt"},
    {"logits", cmd_logits, "print the top-K next-token logits of a prompt"},
    {"synth-model", cmd_synth_model, "write a random-weight model as sharded bf16 safetensors"},
    {"export", cmd_export, "write a model as a Hugging Face directory (the trainer's checkpoint format)"},
    {"capture", cmd_capture, "capture eoi activations of a checkpoint series into HDF5"},
    {"perturb", cmd_perturb, "write a randomly perturbed copy of a GGUF model"},
    {"geometry", cmd_geometry, "refusal directions, carrier scores and migration of a checkpoint series"},
    {"repro", cmd_repro, "test whether a measured ASR curve reproduces a published one"},
    {"asr", cmd_asr, "HarmBench attack success rate of a model or checkpoint series"},
    {"attack", cmd_attack, "HarmBench GCG test cases for behaviors on a model"},
    {"train", cmd_train, "R2D2 adversarial fine-tuning: a checkpoint series from an INI config"},
    {"islands", cmd_islands, "coordinate an R2D2 run across islands (DiLoCo): quorum outer steps over a shared directory"},
    {"classify", cmd_classify, "label existing completions (JSON or a CSV column) with a refusal classifier"},
    {"report", cmd_report, "a self-contained report.html with plots of a run and its analysis CSVs"},
    {"run", cmd_run, "the whole job from one config: train, capture, geometry, asr, repro, report"},
};
static const int N_COMMANDS = (int)(sizeof COMMANDS / sizeof COMMANDS[0]);

static void usage(FILE *out) {
  fprintf(out, "usage: refgeo COMMAND [ARGS] (refgeo COMMAND --help for details)\n"
               "       refgeo --version\nevery command also takes --quiet (no progress) and --verbose\n\ncommands:\n");
  for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

int main(int argc, char **argv) {
  cli_die_with_parent();
  cli_runtime_env(argv);
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("refgeo %s\n", REFGEO_VERSION);
    return 0;
  }
  for (int i = 0; i < N_COMMANDS; i++) {
    if (strcmp(argv[1], COMMANDS[i].name) != 0) continue;
    cli_set_command(COMMANDS[i].name);
    return COMMANDS[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "refgeo: unknown command '%s' (see refgeo --help)\n", argv[1]);
  return 1;
}
