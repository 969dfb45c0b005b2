/* prompt_csv.h: any CSV with a prompt column, read as a set of behaviors so
 * that the HarmBench pipeline (`refgeo asr --prompts`) generates and scores
 * its DirectRequest completions: XSTest's xstest_prompts.csv, a harmless
 * instruction list, a researcher's own prompts.
 *
 * Each data row becomes one behavior: Behavior = the prompt column,
 * BehaviorID = the "id" column when the CSV has one, else the 1-based row
 * number; no categories, tags or context. Group columns (e.g. XSTest's
 * "label": safe / unsafe, or "type") are kept per row for the refusal-rate
 * table (asr_run.h rg_asr_write_prompt_tables).
 *
 * Ownership: the set owns everything; rg_prompt_csv_free releases it.
 */
#ifndef RG_PROMPT_CSV_H
#define RG_PROMPT_CSV_H

#include "harmbench/behaviors.h"
#include "util/csv_table.h"

typedef struct {
  rg_behaviors *behaviors; /* one per row, in file order */
  int n_groups;
  char **group_cols;       /* [n_groups] column names */
  char ***group_values;    /* [n_groups][behaviors->n] */
} rg_prompt_csv;

/* Reads PATH: the prompt text from column PROMPT_COL, group values from the
 * N_GROUPS columns GROUP_COLS. A missing column, an empty prompt, or an
 * empty or duplicate id is an error naming the file (and row). NULL + error. */
rg_prompt_csv *rg_prompt_csv_read(const char *path, const char *prompt_col, const char *const *group_cols,
                                  int n_groups);
void rg_prompt_csv_free(rg_prompt_csv *p);

/* The row of the behavior with this BehaviorID, or -1. */
long rg_prompt_csv_row(const rg_prompt_csv *p, const char *id);

/* Index of column NAME of T, which the user named as ROLE (e.g. "the prompt
 * column"); -1 with the one-line error "PATH: no column 'NAME' (ROLE;
 * columns: a, b, ...)". */
int rg_csv_flag_col(const rg_csv *t, const char *name, const char *role);

#endif
