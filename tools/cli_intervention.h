/* cli_intervention.h: the --ablate / --actadd / --coeff flags of `refgeo
 * generate`, `logits` and `asr`. Each names a refusal direction in a
 * directions file that `refgeo geometry` wrote (geometry/directions_h5.h) as
 * FILE or FILE:step=S,pos=P,layer=L; without the suffix the file's selected
 * carrier is used. As in refusal_direction (hook_utils.py):
 *   --ablate   projects the direction out of every block's input, and of the
 *              attention and MLP outputs, at every layer and position;
 *   --actadd   adds coeff * r (r the unnormalised difference in means) to the
 *              input of the direction's own layer, at every position.
 * Both may be given (ablation first). */
#ifndef RG_CLI_INTERVENTION_H
#define RG_CLI_INTERVENTION_H

#include "cli.h"
#include "engine/hooks.h"
#include "model/model.h"

typedef struct {
  const char *ablate, *actadd; /* specs from the flags, NULL = not given */
  double coeff;                /* set to NAN before parsing: NAN = not given (1.0) */
  float *ablate_dir, *actadd_vec;
  rg_intervention iv;
} cli_intervention;

#define CLI_INTERVENTION_OPTS(P)                                                                              \
  {"ablate", CLI_STRING, &(P)->ablate,                                                                        \
   "ablate the direction FILE[:step=S,pos=P,layer=L] at every layer (FILE from refgeo geometry; default: its " \
   "selected carrier)"},                                                                                      \
      {"actadd", CLI_STRING, &(P)->actadd, "add the direction FILE[:...] at its layer, times --coeff"},       \
      {"coeff", CLI_FLOAT, &(P)->coeff, "activation-addition coefficient (1.0; needs --actadd)"}

/* Reads the directions the flags name for model M (its d_model). *IV is the
 * intervention to set on a session, or NULL when neither flag was given.
 * Returns 0, or -1 with one line naming the flag and the problem. */
int cli_intervention_load(cli_intervention *ci, const rg_model *m, const rg_intervention **iv);
void cli_intervention_free(cli_intervention *ci);

/* Whether either flag was given. */
bool cli_intervention_given(const cli_intervention *ci);
/* Resolves the flags' directions in their files (no model needed) and writes
 * a label of what they name into BUF, e.g.
 * "+ablate(step=0;pos=-1;layer=12)+actadd(step=0;pos=-1;layer=12;coeff=1)" (no
 * commas, so that CSV cells need no quoting);
 * "" when no flag was given. Returns 0, or -1 with the error set. */
int cli_intervention_label(const cli_intervention *ci, char *buf, size_t n);

#endif
