/* commands.h: the subcommands of the refgeo CLI, one file each (cmd_*.c).
 * Each takes argv with argv[0] = the subcommand name and returns the exit
 * code (0 success, 1 failure, 2 for "not reproduced" style verdicts where a
 * command documents it). */
#ifndef RG_COMMANDS_H
#define RG_COMMANDS_H

typedef int (*rg_command_fn)(int argc, char **argv);

typedef struct {
  const char *name;
  rg_command_fn run;
  const char *summary;
} rg_command;

int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_synth_model(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_capture(int argc, char **argv);
int cmd_perturb(int argc, char **argv);
int cmd_geometry(int argc, char **argv);
int cmd_repro(int argc, char **argv); /* exit 0 reproduced, 1 not reproduced, 2 cannot compare */
int cmd_asr(int argc, char **argv);
int cmd_attack(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_islands(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
