/* train_config.h: the settings of one R2D2 training run (`refgeo train`).
 *
 * A run is configured by an INI file (read with inih) whose keys are listed
 * in one table (train_config.c), each with its section, type, default and
 * meaning; docs/training.md prints the same table. Every key can also be
 * given as a flag, --KEY VALUE with '-' for '_' (--lr 1e-5), which wins
 * over the file. Rules a researcher can rely on:
 *   - an unknown key, a key in the wrong section, a value of the wrong type
 *     or out of range is an error naming the file, line and key;
 *   - a key without a default (model) must be given;
 *   - relative paths in the file are relative to the file's folder, a
 *     leading "~/" is the home folder; paths given as flags are relative to
 *     the working folder;
 *   - the resolved configuration (every key, defaults included) is written
 *     to RUN_DIR/config.ini, and --resume refuses a run dir whose config
 *     differs in any key but threads (rg_train_config_diff).
 * The defaults are HarmBench's R2D2 constants where refgeo has them
 * (../docs/training.md cites each), scaled down only where a key says so.
 *
 * Ownership: an rg_train_config owns its strings; rg_train_config_free
 * frees them.
 */
#ifndef RG_ADV_FT_TRAIN_CONFIG_H
#define RG_ADV_FT_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

enum { RG_TRAIN_MAX_SAVE_STEPS = 64 };

typedef struct {
  /* [model] */
  char *model;          /* GGUF file or HF directory */
  char *chat_template;  /* "" = the model's own */
  char *mode;           /* "full" or "lora" */
  int lora_rank;
  double lora_alpha;
  char *lora_targets;   /* "q,k,v,o" among q k v o gate up down */
  int threads;          /* 0 = all cores */
  int recompute;        /* rg_recompute: 0 none, 1 full (gradient checkpointing), 2 all but attention; -1 auto */
  int sp;               /* ranks a micro-batch is split over (sequence parallelism) */
  char *sp_attention;   /* "auto", "ulysses" or "allgather" (forward.h rg_sp_mode) */
  int zero;             /* ZeRO stage over the data-parallel ranks: 0, 1 or 2 (adv_ft/zero.h) */
  char *checkpoint_dtype; /* "bf16" or "f32" */
  /* [optim] */
  char *optimizer;      /* "adamw" or "sgd" */
  double lr;
  int warmup;           /* updates of linear warmup */
  char *schedule;       /* "cosine" or "constant" */
  int schedule_updates; /* the cosine's horizon in updates; 0 = updates */
  double weight_decay, beta1, beta2, eps;
  double clip;          /* global L2 norm; 0 = no clipping (HarmBench) */
  int grad_accum;       /* micro-batches per update */
  int updates;          /* optimizer updates of the run */
  char *save_steps;     /* updates after which a checkpoint is written */
  int state_every;      /* updates between resume states (and at each save step) */
  int seed;
  /* [pool] */
  int pool_size;        /* live test cases */
  int cases_per_step;   /* test cases updated and trained on per micro-batch */
  int gcg_steps, search_width, top_k;
  int gcg_batch;        /* candidates evaluated together */
  int reset_every;      /* updates between pool resets; 0 = never */
  double reset_fraction;
  /* [loss] */
  double w_utility, w_away, w_toward;
  double away_threshold; /* log p below which an away token adds nothing */
  char *refusal_target;  /* the toward target; EOS is appended */
  /* [data] */
  char *behaviors;      /* behavior CSVs, space-separated */
  char *targets;        /* away-target JSONs, space-separated */
  char *utility;        /* "harmless" (base-model completions) or a JSONL file */
  char *utility_prompts_file; /* the harmless prompts for "harmless" */
  int utility_prompts;  /* how many of them */
  int utility_max_new_tokens;
  int utility_per_step; /* utility examples per micro-batch */
  char *utility_labels; /* "assistant" or "all" */
  char *utility_packing; /* "off", or "on": sequences of max_utility_tokens (utility_data.h rg_utility_pack) */
  int max_case_tokens;  /* a test case with its longest target */
  int max_utility_tokens;
  /* [islands] (docs/training.md, "Islands"): empty sync_dir, no islands */
  char *sync_dir;       /* the shared directory of the run's islands */
  int island, islands;  /* this island's id; K */
  int inner_steps;      /* H: inner updates between outer steps */
  int quorum;           /* islands an outer step waits for; 0: ceil(K / 2) */
  double deadline_s;    /* the coordinator's wait for a quorum */
  double outer_lr, outer_momentum;
  int nesterov;
  char *compression;    /* "f32", "bf16", "int8" or "int4" */
  int block_size;       /* floats per scale of int8 and int4 */
  int max_staleness;    /* versions a late pseudo-gradient may be behind; 0: late ones dropped */
  int run_updates;      /* > 0: the run ends once this many inner updates are merged; 0: when every island is done */
  char *weighting;      /* "tokens" or "micro_batches" */
  char *island_data;    /* "own" (each island its own stream) or "shard" (micro-batches k = island mod K of one stream) */

  /* derived from save_steps by rg_train_config_check */
  long save[RG_TRAIN_MAX_SAVE_STEPS];
  int n_save;
} rg_train_config;

/* Defaults for every key with one (model stays NULL); the data files'
 * defaults are relative to DATA_DIR (refgeo's data/). Returns 0 or -1 with
 * the error set (out of memory). */
int rg_train_config_init(rg_train_config *c, const char *data_dir);
void rg_train_config_free(rg_train_config *c);

/* Reads the INI file PATH over C. Returns 0, or -1 with the error set. */
int rg_train_config_read(rg_train_config *c, const char *path);

/* Sets key NAME (as written in the file, or as a flag with '-' for '_') to
 * VALUE. Returns 0; 1 when NAME is no key; -1 with the error set (a bad
 * value). */
int rg_train_config_set(rg_train_config *c, const char *name, const char *value);

/* Checks what a run needs after file and flags are applied: required keys,
 * ranges, choices; parses save_steps. Returns 0, or -1 with the error set
 * naming the key. */
int rg_train_config_check(rg_train_config *c);

/* Writes every key as an INI file (sections and keys in table order). */
int rg_train_config_write(const rg_train_config *c, FILE *fp);

/* The first key, other than threads, whose values differ (NULL: none). */
const char *rg_train_config_diff(const rg_train_config *a, const rg_train_config *b);

/* The key table, for usage texts and docs: key i's name, section, help,
 * default ("" when required) and value kind ("N" integer, "X" number,
 * "VALUE" text); NULL past the end. Any out-pointer may be NULL. */
const char *rg_train_config_key(int i, const char **section, const char **help, const char **def, const char **kind);

#endif
