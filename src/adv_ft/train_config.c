/* train_config.c: the settings of one R2D2 training run, read from its INI file (train_config.h). */
#include "adv_ft/train_config.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/ini_lines.h"

typedef enum { K_STR, K_INT, K_DBL } key_kind;

/* What separates the paths of a list value (inih strips these at a value's
 * ends, so a path cannot keep one). */
#define LIST_BLANKS " \t\r\n\v\f"

typedef struct {
  const char *section, *name;
  key_kind kind;
  size_t offset;
  const char *def;     /* NULL: required */
  double min;          /* numbers: the smallest value allowed */
  const char *choices; /* strings: "a|b" or NULL for any; "path" marks a path */
  const char *help;
} key_def;

#define F(field) offsetof(rg_train_config, field)
/* The defaults are HarmBench's (../../docs/training.md, "Keys"), except
 * where the help says "refgeo". */
static const key_def KEYS[] = {
    {"model", "model", K_STR, F(model), NULL, 0, "path", "GGUF file or Hugging Face directory"},
    {"model", "chat_template", K_STR, F(chat_template), "", 0, NULL, "chat format name; empty: the model's own"},
    {"model", "mode", K_STR, F(mode), "full", 0, "full|lora", "full fine-tune or LoRA adapters"},
    {"model", "lora_rank", K_INT, F(lora_rank), "64", 1, NULL, "LoRA rank (HarmBench's config_lora.yaml: 64)"},
    {"model", "lora_alpha", K_DBL, F(lora_alpha), "16", 1e-30, NULL, "LoRA alpha; the scale is alpha / rank"},
    {"model", "lora_targets", K_STR, F(lora_targets), "q,k,v,o", 0, NULL, "modules with adapters, among q k v o gate up down"},
    {"model", "threads", K_INT, F(threads), "0", 0, NULL, "CPU threads; 0: all cores"},
    {"model", "recompute", K_INT, F(recompute), "auto", 0, "auto",
     "what the backward recomputes (gradient checkpointing): 0 nothing; 1 each block from its input (HarmBench: "
     "on); 2 all but attention (keeps the queries and attention's output); auto: the least that fits this "
     "machine's memory per rank (refgeo)"},
    {"model", "sp", K_INT, F(sp), "1", 1, NULL,
     "refgeo: ranks each micro-batch's tokens are split over (sequence parallelism); mpirun -np a multiple of SP, the multiple being data-parallel groups"},
    {"model", "sp_attention", K_STR, F(sp_attention), "auto", 0, "auto|ulysses|allgather",
     "refgeo: attention over the ranks: Ulysses where the heads divide, else all-gather KV (auto)"},
    {"model", "zero", K_INT, F(zero), "0", 0, NULL,
     "refgeo: ZeRO stage over the data-parallel ranks (DeepSpeed's): 0 everything replicated; 1 AdamW's moments "
     "sharded; 2 the gradients too (HarmBench's run: 2); needs at least 2 data-parallel groups"},
    {"model", "checkpoint_dtype", K_STR, F(checkpoint_dtype), "bf16", 0, "bf16|f32", "dtype of checkpoint weights"},
    {"optim", "optimizer", K_STR, F(optimizer), "adamw", 0, "adamw|sgd",
     "the inner optimizer: adamw (HarmBench), or sgd (refgeo: theta -= lr (g + weight_decay theta), "
     "torch.optim.SGD without momentum; for checks that need a linear update)"},
    {"optim", "lr", K_DBL, F(lr), "2e-5", 0, NULL, "peak learning rate"},
    {"optim", "warmup", K_INT, F(warmup), "0", 0, NULL, "updates of linear warmup"},
    {"optim", "schedule", K_STR, F(schedule), "cosine", 0, "cosine|constant", "learning-rate schedule"},
    {"optim", "schedule_updates", K_INT, F(schedule_updates), "0", 0, NULL,
     "the cosine's horizon in updates; 0: updates (HarmBench's run: 812)"},
    {"optim", "weight_decay", K_DBL, F(weight_decay), "0", 0, NULL, "AdamW decoupled weight decay"},
    {"optim", "beta1", K_DBL, F(beta1), "0.9", 0, NULL, "AdamW beta1"},
    {"optim", "beta2", K_DBL, F(beta2), "0.999", 0, NULL, "AdamW beta2"},
    {"optim", "eps", K_DBL, F(eps), "1e-8", 0, NULL, "AdamW epsilon"},
    {"optim", "clip", K_DBL, F(clip), "0", 0, NULL, "clip the gradient to this global L2 norm; 0: off (HarmBench)"},
    {"optim", "grad_accum", K_INT, F(grad_accum), "4", 1, NULL, "micro-batches per optimizer update"},
    {"optim", "updates", K_INT, F(updates), "500", 1, NULL, "optimizer updates (a step is one update)"},
    {"optim", "save_steps", K_STR, F(save_steps), "0 50 100 250 500", 0, NULL, "steps written as checkpoint-<step>/"},
    {"optim", "state_every", K_INT, F(state_every), "10", 1, NULL, "refgeo: updates between resume states"},
    {"optim", "seed", K_INT, F(seed), "42", 0, NULL, "seed of every random draw"},
    {"pool", "pool_size", K_INT, F(pool_size), "8", 1, NULL, "live test cases in the pool"},
    {"pool", "cases_per_step", K_INT, F(cases_per_step), "8", 1, NULL, "test cases GCG-updated and trained on per micro-batch"},
    {"pool", "gcg_steps", K_INT, F(gcg_steps), "5", 0, NULL, "GCG steps per test case per micro-batch"},
    {"pool", "search_width", K_INT, F(search_width), "512", 1, NULL, "GCG candidates per step"},
    {"pool", "top_k", K_INT, F(top_k), "256", 1, NULL, "GCG tokens per position to sample from"},
    {"pool", "gcg_batch", K_INT, F(gcg_batch), "32", 1, NULL, "refgeo: GCG candidates evaluated together"},
    {"pool", "reset_every", K_INT, F(reset_every), "50", 0, NULL, "updates between pool resets; 0: never"},
    {"pool", "reset_fraction", K_DBL, F(reset_fraction), "0.2", 0, NULL, "fraction of the pool reset (at least one)"},
    {"loss", "w_utility", K_DBL, F(w_utility), "1", 0, NULL, "weight of the utility (SFT) loss"},
    {"loss", "w_away", K_DBL, F(w_away), "0.5", 0, NULL, "weight of the away loss"},
    {"loss", "w_toward", K_DBL, F(w_toward), "0.5", 0, NULL, "weight of the toward loss"},
    {"loss", "away_threshold", K_DBL, F(away_threshold), "-5", -1e30, NULL, "log p below which an away token adds 0"},
    {"loss", "refusal_target", K_STR, F(refusal_target), "Sorry, I can't do that.", 0, NULL,
     "the toward target (EOS appended)"},
    {"data", "behaviors", K_STR, F(behaviors), "harmbench/adv_training_behaviors.csv harmbench/harmbench_behaviors_text_val.csv",
     0, "paths", "behavior CSVs, space-separated"},
    {"data", "targets", K_STR, F(targets), "harmbench/adv_training_targets.json harmbench/adv_training_val_targets.json", 0,
     "paths", "away-target JSONs (BehaviorID -> strings), space-separated"},
    {"data", "utility", K_STR, F(utility), "harmless", 0, NULL,
     "\"harmless\": harmless prompts with the base model's greedy replies; or a JSONL of chats"},
    {"data", "utility_prompts_file", K_STR, F(utility_prompts_file), "prompts/harmless_train.json", 0, "path",
     "the harmless prompts of utility = harmless"},
    {"data", "utility_prompts", K_INT, F(utility_prompts), "256", 1, NULL, "refgeo: how many harmless prompts"},
    {"data", "utility_max_new_tokens", K_INT, F(utility_max_new_tokens), "128", 1, NULL, "refgeo: reply length cap"},
    {"data", "utility_per_step", K_INT, F(utility_per_step), "8", 0, NULL, "utility examples per micro-batch"},
    {"data", "utility_labels", K_STR, F(utility_labels), "all", 0, "all|assistant",
     "supervised utility tokens: all (HarmBench) or the replies only"},
    {"data", "utility_packing", K_STR, F(utility_packing), "off", 0, "off|on",
     "on: the utility examples, each closed by EOS, packed into sequences of max_utility_tokens (HarmBench's TRL "
     "packing; needs utility_labels = all)"},
    {"data", "max_case_tokens", K_INT, F(max_case_tokens), "256", 8, NULL, "refgeo: longest test case with its target"},
    {"data", "max_utility_tokens", K_INT, F(max_utility_tokens), "2048", 8, NULL, "longest utility example (HarmBench: 2048)"},
    {"islands", "sync_dir", K_STR, F(sync_dir), "", 0, "path",
     "refgeo: the shared directory of a run across islands (DiLoCo; `refgeo islands` coordinates it); empty: no islands"},
    {"islands", "island", K_INT, F(island), "0", 0, NULL, "refgeo: this island's id, 0 .. islands - 1"},
    {"islands", "islands", K_INT, F(islands), "2", 1, NULL, "refgeo: K, the islands of the run"},
    {"islands", "inner_steps", K_INT, F(inner_steps), "50", 1, NULL, "refgeo: H, inner updates between outer steps"},
    {"islands", "quorum", K_INT, F(quorum), "0", 0, NULL,
     "refgeo: islands whose pseudo-gradients make an outer step; 0: ceil(islands / 2)"},
    {"islands", "deadline_s", K_DBL, F(deadline_s), "600", 0, NULL,
     "refgeo: seconds the coordinator waits for a quorum before stepping with the islands it has"},
    {"islands", "outer_lr", K_DBL, F(outer_lr), "0.7", 0, NULL, "refgeo: the outer SGD's learning rate (DiLoCo: 0.7)"},
    {"islands", "outer_momentum", K_DBL, F(outer_momentum), "0.9", 0, NULL, "refgeo: the outer SGD's momentum (DiLoCo: 0.9)"},
    {"islands", "nesterov", K_INT, F(nesterov), "1", 0, NULL, "refgeo: 1: Nesterov momentum (DiLoCo), 0: plain"},
    {"islands", "compression", K_STR, F(compression), "bf16", 0, "f32|bf16|int8|int4",
     "refgeo: encoding of the pseudo-gradients and outer updates (int8, int4: per-block absmax scales)"},
    {"islands", "block_size", K_INT, F(block_size), "128", 1, NULL, "refgeo: floats per scale of int8 and int4"},
    {"islands", "max_staleness", K_INT, F(max_staleness), "1", 0, NULL,
     "refgeo: outer steps a late pseudo-gradient may be behind and still be applied; 0: late ones dropped"},
    {"islands", "weighting", K_STR, F(weighting), "tokens", 0, "tokens|micro_batches",
     "refgeo: weight of an island's pseudo-gradient in the mean: its trained tokens, or its micro-batches"},
    {"islands", "run_updates", K_INT, F(run_updates), "0", 0, NULL,
     "refgeo: the run ends once this many inner updates are merged, whichever islands made them (each island "
     "trains until then, up to its updates); 0: when every island has made its updates"},
    {"islands", "island_data", K_STR, F(island_data), "own", 0, "own|shard",
     "refgeo: own: each island its own pool and data order; shard: one stream, island i trains micro-batches k with "
     "k mod islands = i, as data-parallel groups do"},
};
#undef F
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };

static const key_def *find(const char *name) {
  char norm[64];
  size_t n = strlen(name);
  if (n >= sizeof norm) return NULL;
  for (size_t i = 0; i <= n; i++) norm[i] = name[i] == '-' ? '_' : name[i];
  for (int i = 0; i < N_KEYS; i++)
    if (strcmp(KEYS[i].name, norm) == 0) return &KEYS[i];
  return NULL;
}

static int parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < -2147483647L || v > 2147483647L) return -1;
  *out = (int)v;
  return 0;
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static bool in_choices(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return true;
    p += len + (bar ? 1 : 0);
  }
  return false;
}

static bool is_path_key(const key_def *k) { return k->choices && strncmp(k->choices, "path", 4) == 0; }

/* Sets K from VALUE; the error names the key, the caller adds the place. */
static int set_key(rg_train_config *c, const key_def *k, const char *value) {
  void *dst = (char *)c + k->offset;
  switch (k->kind) {
  case K_INT: {
    int v;
    if (k->choices && strcmp(k->choices, "auto") == 0 && strcmp(value, "auto") == 0) { /* stored as -1 */
      *(int *)dst = -1;
      return 0;
    }
    if (parse_int(value, &v) < 0) return rg_error_set("%s: \"%s\" is not an integer", k->name, value);
    if (v < k->min) return rg_error_set("%s: %d is below %g", k->name, v, k->min);
    *(int *)dst = v;
    return 0;
  }
  case K_DBL: {
    double v;
    if (parse_double(value, &v) < 0) return rg_error_set("%s: \"%s\" is not a number", k->name, value);
    if (v < k->min) return rg_error_set("%s: %g is below %g", k->name, v, k->min);
    *(double *)dst = v;
    return 0;
  }
  case K_STR:
    if (k->choices && !is_path_key(k) && !in_choices(k->choices, value))
      return rg_error_set("%s: \"%s\" is not one of %s", k->name, value, k->choices);
    char *copy = strdup(value);
    if (!copy) return rg_error_set("out of memory");
    free(*(char **)dst);
    *(char **)dst = copy;
    return 0;
  }
  return rg_error_set("%s: unknown key kind", k->name);
}

static bool is_list_key(const key_def *k) { return k->choices && strcmp(k->choices, "paths") == 0; }

/* Path values in a file: "~/x" is $HOME/x, a relative path is relative to
 * the file's folder DIR. A list (K) holds blank-separated paths; a single
 * path is taken whole (it may hold blanks). */
static char *resolve_paths(const key_def *k, const char *value, const char *dir) {
  const char *const sep = is_list_key(k) ? LIST_BLANKS : "";
  size_t cap = 1;
  const char *home = getenv("HOME");
  for (const char *p = value; *p; p++) cap += 1 + strlen(dir) + (home ? strlen(home) : 0) + 1;
  char *out = malloc(cap + strlen(value));
  if (!out) return NULL;
  out[0] = '\0';
  const char *p = value;
  while (*p) {
    p += strspn(p, sep);
    if (!*p) break;
    size_t len = strcspn(p, sep);
    if (out[0]) strcat(out, " ");
    if (p[0] == '~' && p[1] == '/' && home) {
      strcat(out, home);
      strncat(out, p + 1, len - 1);
    } else if (p[0] != '/' && dir[0]) {
      strcat(out, dir);
      if (dir[strlen(dir) - 1] != '/') strcat(out, "/");
      strncat(out, p, len);
    } else {
      strncat(out, p, len);
    }
    p += len;
  }
  return out;
}

int rg_train_config_init(rg_train_config *c, const char *data_dir) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < N_KEYS; i++) {
    if (!KEYS[i].def) continue;
    char *resolved = is_path_key(&KEYS[i]) ? resolve_paths(&KEYS[i], KEYS[i].def, data_dir) : NULL;
    if (is_path_key(&KEYS[i]) && !resolved) return rg_error_set("out of memory");
    const int rc = set_key(c, &KEYS[i], resolved ? resolved : KEYS[i].def);
    free(resolved);
    if (rc < 0) return -1;
  }
  return 0;
}

void rg_train_config_free(rg_train_config *c) {
  for (int i = 0; i < N_KEYS; i++)
    if (KEYS[i].kind == K_STR) {
      char **p = (char **)((char *)c + KEYS[i].offset);
      free(*p);
      *p = NULL;
    }
}

int rg_train_config_set(rg_train_config *c, const char *name, const char *value) {
  const key_def *k = find(name);
  if (!k) return 1;
  return set_key(c, k, value);
}

typedef struct {
  rg_train_config *c;
  const char *path;
  char *dir;
  rg_ini_lines lines; /* the reader's file, line number and indentation */
  char last[64];    /* the key of the last key line */
  int failed;
} ini_ctx;

/* Appends VALUE (resolved) to the list key K: a continuation line. */
static int append_paths(ini_ctx *x, const key_def *k, const char *value) {
  char **dst = (char **)((char *)x->c + k->offset);
  char *more = resolve_paths(k, value, x->dir);
  char *joined = more ? malloc(strlen(*dst) + strlen(more) + 2) : NULL;
  if (!joined) {
    free(more);
    return rg_error_set("out of memory");
  }
  sprintf(joined, "%s%s%s", *dst, (*dst)[0] ? " " : "", more);
  free(more);
  free(*dst);
  *dst = joined;
  return 0;
}

static int on_key(void *user, const char *section, const char *name, const char *value) {
  ini_ctx *x = user;
  const int line = x->lines.line;
  if (x->failed || x->lines.too_long) return 0;
  const key_def *k = find(name);
  const bool continued = x->lines.indented && strcmp(name, x->last) == 0;
  const size_t name_len = strlen(name);
  if (name_len < sizeof x->last)
    memcpy(x->last, name, name_len + 1);
  else
    x->last[0] = '\0'; /* no key is that long */
  if (continued) {
    if (k && is_list_key(k)) {
      if (append_paths(x, k, value) == 0) return 1;
    } else {
      rg_error_set("%s:%d: an indented line continues \"%s\", which is not a list (behaviors, targets)", x->path, line,
                   name);
    }
  } else if (!k || strchr(name, '-')) {
    rg_error_set("%s:%d: unknown key \"%s\"", x->path, line, name);
  } else if (strcmp(section, k->section) != 0) {
    rg_error_set("%s:%d: key \"%s\" belongs in section [%s], not [%s]", x->path, line, name, k->section, section);
  } else {
    char *resolved = is_path_key(k) ? resolve_paths(k, value, x->dir) : NULL;
    if (is_path_key(k) && !resolved) {
      rg_error_set("out of memory");
    } else if (set_key(x->c, k, resolved ? resolved : value) == 0) {
      free(resolved);
      return 1;
    } else {
      rg_error_prefix("%s:%d", x->path, line);
    }
    free(resolved);
  }
  x->failed = 1;
  return 0;
}

int rg_train_config_read(rg_train_config *c, const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return rg_error_set("%s: %s", path, strerror(errno));
  ini_ctx x = {.c = c, .path = path, .dir = strdup(path), .lines = {.fp = fp, .path = path}};
  if (!x.dir) {
    fclose(fp);
    return rg_error_set("out of memory");
  }
  /* The file's folder, absolute, so that RUN_DIR/config.ini holds paths
   * that mean the same from any working folder. */
  char *slash = strrchr(x.dir, '/');
  if (slash)
    *slash = '\0';
  else
    strcpy(x.dir, ".");
  char *abs_dir = realpath(x.dir[0] ? x.dir : "/", NULL);
  free(x.dir);
  x.dir = abs_dir;
  if (!x.dir) {
    fclose(fp);
    return rg_error_set("%s: cannot resolve its folder", path);
  }
  const int rc = ini_parse_stream(rg_ini_read_line, &x.lines, on_key, &x);
  fclose(fp);
  free(x.dir);
  if (x.failed || x.lines.too_long) return -1;
  if (rc != 0) return rg_error_set("%s:%d: not an INI line (\"key = value\" or \"[section]\")", path, rc);
  return 0;
}

static int parse_save_steps(rg_train_config *c) {
  c->n_save = 0;
  const char *p = c->save_steps;
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || (*end && *end != ' ' && *end != ','))
      return rg_error_set("save_steps: \"%s\" is not a list of steps >= 0", c->save_steps);
    if (c->n_save == RG_TRAIN_MAX_SAVE_STEPS)
      return rg_error_set("save_steps: more than %d steps", RG_TRAIN_MAX_SAVE_STEPS);
    if (c->n_save && v <= c->save[c->n_save - 1]) return rg_error_set("save_steps: not increasing at %ld", v);
    c->save[c->n_save++] = v;
    p = end;
  }
  return 0;
}

/* Whether string value V of key K reads back from RUN_DIR/config.ini as it
 * is (rg_train_config_write): inih ends a value at a ';' that follows a
 * blank (an inline comment), and a list key's continuation line that starts
 * with ';' or '#' is a comment line. A value from a file cannot hold the
 * former, but one from a flag can (fuzz finding: a value that starts with
 * ';', read from "key =;...", came back empty after "key = ;..."; the writer
 * now leaves out that blank). */
static bool writable(const key_def *k, const char *v) {
  for (const char *p = v; *p; p++)
    if (*p == ';' && p > v && strchr(LIST_BLANKS, p[-1])) return false;
  if (is_list_key(k))
    for (const char *p = v + strspn(v, LIST_BLANKS); *p; p += strcspn(p, LIST_BLANKS), p += strspn(p, LIST_BLANKS))
      if (*p == ';' || *p == '#') return false;
  return true;
}

int rg_train_config_check(rg_train_config *c) {
  for (int i = 0; i < N_KEYS; i++) {
    if (KEYS[i].kind != K_STR) continue;
    const char *v = *(char **)((char *)c + KEYS[i].offset);
    if (!v) return rg_error_set("missing key \"%s\" (section [%s]): %s", KEYS[i].name, KEYS[i].section, KEYS[i].help);
    if (!writable(&KEYS[i], v))
      return rg_error_set("%s: \"%s\" has a ';' after a blank%s, which the run's config.ini would read as a comment",
                          KEYS[i].name, v, is_list_key(&KEYS[i]) ? " or an entry that starts with ';' or '#'" : "");
  }
  if (parse_save_steps(c) < 0) return -1;
  if (c->cases_per_step > c->pool_size)
    return rg_error_set("cases_per_step: %d is more than pool_size %d", c->cases_per_step, c->pool_size);
  if (c->reset_fraction > 1) return rg_error_set("reset_fraction: %g is above 1", c->reset_fraction);
  if (c->recompute > 2) return rg_error_set("recompute: %d is not 0, 1 or 2", c->recompute);
  if (c->zero > 2) return rg_error_set("zero: %d is not 0, 1 or 2 (ZeRO-3, which shards the parameters, is not built)", c->zero);
  if (c->beta1 >= 1 || c->beta2 >= 1) return rg_error_set("beta1, beta2: must be below 1");
  if (strcmp(c->refusal_target, "") == 0) return rg_error_set("refusal_target: empty");
  if (strcmp(c->optimizer, "sgd") == 0 && c->zero > 0)
    return rg_error_set("optimizer: sgd is not built with ZeRO (zero = %d); use zero = 0", c->zero);
  if (c->islands > 4096) return rg_error_set("islands: %d; at most 4096", c->islands); /* islands_coord.c counts them in an array */
  if (c->sync_dir[0]) {
    if (c->island >= c->islands) return rg_error_set("island: %d is not below islands %d", c->island, c->islands);
    if (c->quorum > c->islands) return rg_error_set("quorum: %d is more than islands %d", c->quorum, c->islands);
    if (c->nesterov > 1) return rg_error_set("nesterov: %d is not 0 or 1", c->nesterov);
    if ((long long)c->run_updates > (long long)c->islands * c->updates)
      return rg_error_set("run_updates: %d is more than islands x updates (%d x %d): the islands would stop first",
                          c->run_updates, c->islands, c->updates);
    if (strcmp(c->island_data, "shard") == 0 && c->grad_accum % c->islands != 0)
      return rg_error_set("island_data: shard splits grad_accum %d micro-batches over islands %d: make it a multiple",
                          c->grad_accum, c->islands);
  } else if (c->quorum > c->islands) {
    return rg_error_set("quorum: %d is more than islands %d", c->quorum, c->islands);
  }
  if (strcmp(c->utility_packing, "on") == 0 && strcmp(c->utility_labels, "all") != 0)
    return rg_error_set("utility_packing: a packed sequence supervises every token; set utility_labels = all");
  return 0;
}

int rg_train_config_write(const rg_train_config *c, FILE *fp) {
  const char *section = "";
  for (int i = 0; i < N_KEYS; i++) {
    const key_def *k = &KEYS[i];
    if (strcmp(section, k->section) != 0) fprintf(fp, "%s[%s]\n", i ? "\n" : "", section = k->section);
    const void *v = (const char *)c + k->offset;
    switch (k->kind) {
    case K_INT:
      if (k->choices && *(const int *)v == -1) fprintf(fp, "%s = auto\n", k->name);
      else fprintf(fp, "%s = %d\n", k->name, *(const int *)v);
      break;
    case K_DBL: fprintf(fp, "%s = %.17g\n", k->name, *(const double *)v); break;
    case K_STR: {
      const char *str = *(char *const *)v ? *(char *const *)v : "";
      if (is_list_key(k)) {
        /* one path per line, the rest indented (inih's continuation), so
         * that no line outgrows inih's 200 bytes however deep the folder */
        fprintf(fp, "%s =", k->name);
        bool first = true;
        for (const char *p = str + strspn(str, LIST_BLANKS); *p;) {
          const size_t len = strcspn(p, LIST_BLANKS);
          fprintf(fp, "%s%.*s", first ? " " : "\n  ", (int)len, p);
          first = false;
          p += len;
          p += strspn(p, LIST_BLANKS);
        }
        fputc('\n', fp);
      } else {
        fprintf(fp, str[0] == ';' ? "%s =%s\n" : "%s = %s\n", k->name, str); /* writable() */
      }
      break;
    }
    }
  }
  return ferror(fp) ? rg_error_set("cannot write the configuration") : 0;
}

const char *rg_train_config_diff(const rg_train_config *a, const rg_train_config *b) {
  for (int i = 0; i < N_KEYS; i++) {
    const key_def *k = &KEYS[i];
    /* the threads, and the recompute policy (the gradients are bitwise
     * the same under every one, test_recompute), may change on resume */
    if (strcmp(k->name, "threads") == 0 || strcmp(k->name, "recompute") == 0) continue;
    const void *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
    bool same = true;
    switch (k->kind) {
    case K_INT: same = *(const int *)x == *(const int *)y; break;
    case K_DBL: same = *(const double *)x == *(const double *)y; break;
    case K_STR: {
      const char *s = *(char *const *)x, *t = *(char *const *)y;
      same = (s && t) ? strcmp(s, t) == 0 : s == t;
      break;
    }
    }
    if (!same) return k->name;
  }
  return NULL;
}

const char *rg_train_config_key(int i, const char **section, const char **help, const char **def, const char **kind) {
  if (i < 0 || i >= N_KEYS) return NULL;
  if (section) *section = KEYS[i].section;
  if (help) *help = KEYS[i].help;
  if (def) *def = KEYS[i].def ? KEYS[i].def : "";
  if (kind) *kind = KEYS[i].kind == K_INT ? "N" : KEYS[i].kind == K_DBL ? "X" : "VALUE";
  return KEYS[i].name;
}
