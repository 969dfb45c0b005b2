/* trainer.c: R2D2 adversarial fine-tuning on refgeo's engine (trainer.h). */
#include "adv_ft/trainer.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adv_ft/gcg.h"
#include "adv_ft/islands_member.h"
#include "adv_ft/islands_quant.h"
#include "adv_ft/islands_sync.h"
#include "adv_ft/optimizer.h"
#include "adv_ft/pool.h"
#include "adv_ft/r2d2_data.h"
#include "adv_ft/r2d2_loss.h"
#include "adv_ft/r2d2_step.h"
#include "adv_ft/test_case.h"
#include "adv_ft/train_plan.h"
#include "adv_ft/train_state.h"
#include "adv_ft/utility_data.h"
#include "backend/plan.h"
#include "engine/backward.h"
#include "dist/comm.h"
#include "engine/forward.h"
#include "engine/hf_write.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/progress.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/manifest.h"
#include "util/rng.h"
#include "util/run_lock.h"
#include "util/sha256.h"

/* train_log.csv's columns (docs/csv-formats.md). */
enum {
  COL_STEP, COL_LR, COL_LOSS_TOTAL, COL_LOSS_UTILITY, COL_LOSS_AWAY, COL_LOSS_TOWARD, COL_GRAD_NORM,
  COL_GCG_LOSS, COL_POOL_RESETS, COL_TOKENS_PER_S, COL_SECONDS, N_LOG_COLUMNS
};
static const char *const LOG_COLUMNS[N_LOG_COLUMNS] = {
    [COL_STEP] = "step",           [COL_LR] = "lr",
    [COL_LOSS_TOTAL] = "loss_total", [COL_LOSS_UTILITY] = "loss_utility",
    [COL_LOSS_AWAY] = "loss_away", [COL_LOSS_TOWARD] = "loss_toward",
    [COL_GRAD_NORM] = "grad_norm", [COL_GCG_LOSS] = "gcg_target_loss_mean",
    [COL_POOL_RESETS] = "pool_resets", [COL_TOKENS_PER_S] = "tokens_per_s",
    [COL_SECONDS] = "seconds"};

typedef struct {
  double v[N_LOG_COLUMNS];
} log_row;

struct rg_trainer {
  rg_train_config cfg;
  char *run_dir;
  rg_model *m;
  rg_chat_template tmpl;
  char *before, *after;
  rg_test_case_frame frame;
  rg_weights *w;
  rg_session *train; /* the batch's forward/backward, and GCG's token gradient */
  rg_session *gcg_train; /* with sequence parallelism: GCG's token gradient, this process's own */
  rg_session *cand;  /* GCG's candidate losses */
  /* Ranks from mpirun (NULL: one process). The world is split as
   * DeepSpeed splits it: sequence-parallel groups of cfg.sp consecutive
   * ranks, which split every micro-batch, and data-parallel groups across
   * them (the ranks at the same place in every group), which take turns at
   * the update's micro-batches. */
  rg_comm *world;
  rg_comm *sp;       /* this rank's sequence-parallel group (NULL: sp 1) */
  rg_comm *dp;       /* this rank's data-parallel group (NULL: one sequence-parallel group) */
  /* On a GPU, the same groups for collectives on device buffers (NCCL:
   * attention's gathers, the gradient sum); the MPI ones above keep those
   * on host arrays. NULL on the CPU, where MPI carries both. */
  rg_comm *world_dev, *sp_dev, *dp_dev;
  int group, n_groups; /* this rank's sequence-parallel group, and how many there are */
  bool writer;       /* this process writes the run dir (rank 0) */
  int lock_fd;       /* the writer's lock of the run dir (util/run_lock.h); -1: none */
  char recompute_note[256]; /* recompute = auto: what it chose and why (printed when the run starts) */
  rg_grads *g;
  rg_zero *zero; /* zero > 0: the partition of the optimizer state (and gradients) over dp */
  rg_optimizer *opt;
  /* ZeRO-2 reduces each block's gradient over the data-parallel ranks
   * during the backward, so the groups train their micro-batches of a
   * round (micro-batches j * n_groups .. j * n_groups + n_groups - 1)
   * together, after every rank's GCG of the round: this rank's micro-batch
   * of the round waits here, its suffixes copied (a later GCG of the round
   * may change the pool entry). */
  struct {
    bool held;
    rg_r2d2_case *cases;
    int32_t **suffix;
    const rg_utility_example **utility;
  } pending;
  uint64_t run_id; /* ZeRO: names the run in its shard files (train_state.h) */
  unsigned char *disallowed;
  rg_r2d2_data *data;
  rg_utility_set *utility;
  rg_pool pool;
  uint64_t rng;        /* every draw: pool, order, GCG sampling */
  long step;           /* updates done */
  long utility_cursor; /* utility examples used so far */
  int *utility_order;  /* this epoch's order of the utility examples */
  long utility_epoch;  /* the epoch utility_order belongs to; -1: none */
  log_row *log;
  long n_log, cap_log;
  rg_r2d2_step stepper; /* the micro-batch's two halves, with its batch buffers */
  double run_seconds;   /* updates timed by this process (for the time left) */
  long run_updates;
  const rg_train_plan *plan; /* rg_trainer_plan: the weights go on its plan backend */
  /* Islands (cfg.sync_dir; islands_member.h): this island's link to the
   * run, and its pseudo-gradient's weight since the last outer step */
  rg_isl_member *isl;
  double isl_weight;
  char isl_run[24];   /* the islands run of the state resumed from ("" none) */
  float loss_scale;   /* of each micro-batch: 1 / grad_accum, or with island_data = shard 1 / its share */
  uint64_t data_seed; /* seeds the utility order: the config's, or with island_data = own the island's own */
};

/* ---------------------------------------------------------------- setup */

static char **split_words(const char *s, int *n) {
  *n = 0;
  char *copy = strdup(s);
  char **out = copy ? calloc(strlen(s) / 2 + 2, sizeof *out) : NULL;
  if (!out) {
    free(copy);
    return NULL;
  }
  for (char *tok = strtok(copy, " \t\r\n\v\f"); tok; tok = strtok(NULL, " \t\r\n\v\f")) out[(*n)++] = tok;
  if (*n == 0) out[0] = copy; /* keeps the buffer reachable for free_words */
  return out;
}

static void free_words(char **w) {
  if (w) free(w[0]);
  free(w);
}

static int load_data(rg_trainer *t) {
  int nb = 0, nt = 0;
  char **b = split_words(t->cfg.behaviors, &nb), **tg = split_words(t->cfg.targets, &nt);
  int rc = b && tg ? 0 : rg_error_set("out of memory");
  if (rc == 0 && (nb < 1 || nt < 1)) rc = rg_error_set("behaviors, targets: at least one file each");
  if (rc == 0 && !(t->data = rg_r2d2_data_load((const char *const *)b, nb, (const char *const *)tg, nt))) rc = -1;
  free_words(b);
  free_words(tg);
  return rc;
}

/* The sessions and the batch buffers, sized from the config's caps: what
 * the memory plan (--plan) reports comes from these same sizes. */
static int open_sessions(rg_trainer *t) {
  const rg_train_config *c = &t->cfg;
  const int n_seqs = 2 * c->cases_per_step + c->utility_per_step;
  const long tokens = 2L * c->cases_per_step * c->max_case_tokens + (long)c->utility_per_step * c->max_utility_tokens;
  if (tokens > 1 << 24) return rg_error_set("max_case_tokens, max_utility_tokens: %ld tokens per micro-batch", tokens);
  const int max_ctx = c->max_case_tokens > c->max_utility_tokens ? c->max_case_tokens : c->max_utility_tokens;
  /* with sequence parallelism a rank holds at most 1/sp of a micro-batch */
  const int part = (int)((tokens + c->sp - 1) / c->sp);
  const rg_sp_mode sp_mode = strcmp(c->sp_attention, "ulysses") == 0     ? RG_SP_ULYSSES
                             : strcmp(c->sp_attention, "allgather") == 0 ? RG_SP_ALLGATHER
                                                                         : RG_SP_AUTO;
  rg_session_opts to = {.max_batch_tokens = part,
                        .max_logit_rows = part,
                        .train = true,
                        .recompute = (rg_recompute)c->recompute,
                        .sp = t->sp_dev ? t->sp_dev : t->sp,
                        .sp_mode = sp_mode};
  /* GCG's candidates: gcg_batch whole test cases per call, their target
   * rows only (a target is at most half a test case) */
  rg_session_opts co = {.max_batch_tokens = c->gcg_batch * c->max_case_tokens,
                        .max_logit_rows = c->gcg_batch * (c->max_case_tokens / 2)};
  if (!(t->train = rg_session_new(t->w, n_seqs, max_ctx, &to))) return -1;
  /* GCG's token gradient is one test case's, computed by every rank alone */
  const rg_session_opts go = {.max_batch_tokens = c->max_case_tokens,
                              .max_logit_rows = c->max_case_tokens,
                              .train = true,
                              .recompute = (rg_recompute)c->recompute};
  if (t->sp && c->gcg_steps > 0 && !(t->gcg_train = rg_session_new(t->w, 1, c->max_case_tokens, &go))) return -1;
  /* sequence 0 holds the shared prefix (rg_gcg_candidate_losses) */
  if (c->gcg_steps > 0 && !(t->cand = rg_session_new(t->w, c->gcg_batch + 1, c->max_case_tokens, &co))) return -1;
  /* ZeRO-2 takes each block's gradient away after its backward */
  if (!(t->g = c->zero == 2 ? rg_grads_new_per_block(t->train) : rg_grads_new(t->train))) return -1;
  if (!(t->disallowed = malloc((size_t)t->m->cfg.vocab_size))) return rg_error_set("out of memory");
  t->stepper = (rg_r2d2_step){.m = t->m,
                              .frame = &t->frame,
                              .train = t->train,
                              .gcg_train = t->gcg_train,
                              .sp = t->sp_dev ? t->sp_dev : t->sp,
                              .cand = t->cand,
                              .disallowed = t->disallowed,
                              .refusal = c->refusal_target,
                              .max_case_tokens = c->max_case_tokens};
  return rg_r2d2_step_init(&t->stepper, (int)tokens);
}

static int open_weights(rg_trainer *t) {
  const rg_train_config *c = &t->cfg;
  /* memory committed at allocation: the run holds its planned peak from
   * the start, and one that does not fit fails before the first update */
  rg_backend_opts bo = {.threads = c->threads, .commit = true};
  rg_weight_mode mode = RG_WEIGHTS_AUTO;
  if (t->plan) { /* a GPU keeps frozen matrices in their file dtype (backend/plan.h) */
    bo.name = t->plan->gpu ? "plan-gpu" : "plan-cpu";
    mode = t->plan->gpu ? RG_WEIGHTS_TILED : RG_WEIGHTS_AUTO;
  }
  if (!(t->w = rg_weights_open(t->m, &bo, mode))) return -1;
  if (strcmp(c->mode, "lora") == 0) {
    rg_lora_opts lo = {.rank = c->lora_rank, .alpha = (float)c->lora_alpha};
    if (rg_lora_targets_parse(c->lora_targets, &lo.targets) < 0) return rg_error_prefix("lora_targets");
    return rg_weights_add_lora(t->w, &lo, rg_mix64((uint64_t)c->seed ^ 0x4c6f5241ull));
  }
  return rg_weights_make_trainable(t->w);
}

static int open_optimizer(rg_trainer *t) {
  rg_adamw_hparams h = {.beta1 = t->cfg.beta1, .beta2 = t->cfg.beta2, .eps = t->cfg.eps, .weight_decay = t->cfg.weight_decay};
  if (t->cfg.zero == 0) {
    if (!(t->opt = rg_optimizer_new(t->w, t->g, &h))) return -1;
    return strcmp(t->cfg.optimizer, "sgd") == 0 ? rg_optimizer_use_sgd(t->opt) : 0;
  }
  const rg_zero_opts zo = {.stage = t->cfg.zero, .dp = t->dp_dev ? t->dp_dev : t->dp, .sp = t->sp_dev ? t->sp_dev : t->sp};
  if (!(t->zero = rg_zero_new(t->w, t->g, &zo))) return -1;
  if (!(t->opt = rg_optimizer_new_zero(t->w, t->g, &h, t->zero))) return -1;
  if (t->cfg.zero < 2) return 0;
  const rg_train_config *c = &t->cfg;
  t->pending.cases = calloc((size_t)c->cases_per_step, sizeof *t->pending.cases);
  t->pending.suffix = calloc((size_t)c->cases_per_step, sizeof *t->pending.suffix);
  t->pending.utility = calloc((size_t)(c->utility_per_step > 0 ? c->utility_per_step : 1), sizeof *t->pending.utility);
  return t->pending.cases && t->pending.suffix && t->pending.utility ? 0 : rg_error_set("out of memory");
}

/* ------------------------------------------------------ run manifest */

/* RUN/SHA256SUMS lists the run's files that a later start or stage reads
 * back: utility.jsonl and every file of each checkpoint-N/. The trainer's
 * states carry their own (train_state.h). */
static char *manifest_path(const rg_trainer *t) { return rg_path_join(t->run_dir, RG_MANIFEST_NAME); }

/* Adds the digests of the run dir's files NAMES[0..N) to RUN/SHA256SUMS. */
static int manifest_add(const rg_trainer *t, char *const *names, int n) {
  char *path = manifest_path(t);
  rg_manifest m;
  int rc = path ? rg_manifest_read(&m, path, false) : rg_error_set("out of memory");
  for (int i = 0; rc == 0 && i < n; i++) {
    char *file = rg_path_join(t->run_dir, names[i]), hex[65];
    rc = file ? rg_sha256_file(file, hex) : rg_error_set("out of memory");
    if (rc == 0) rc = rg_manifest_set(&m, names[i], hex);
    free(file);
  }
  if (rc == 0) rc = rg_manifest_write(&m, path);
  rg_manifest_free(&m);
  free(path);
  return rc;
}

/* The run's utility.jsonl, when a start left one: checked against
 * RUN/SHA256SUMS. One that is not listed was written by a start killed
 * before it listed it: removed, to be generated again (the same replies:
 * the base model, greedy). Returns 0, or -1 with the error set. */
static int check_utility_cache(const rg_trainer *t, const char *cache) {
  if (!rg_path_exists(cache)) return 0;
  char *path = manifest_path(t);
  rg_manifest m;
  int rc = path ? rg_manifest_read(&m, path, false) : rg_error_set("out of memory");
  if (rc == 0 && !rg_manifest_get(&m, "utility.jsonl")) {
    if (remove(cache) != 0) rc = rg_error_set("%s: cannot remove: %s", cache, strerror(errno));
  } else if (rc == 0) {
    rc = rg_manifest_check(&m, path, t->run_dir, "utility.jsonl");
  }
  rg_manifest_free(&m);
  free(path);
  return rc;
}

static int open_utility(rg_trainer *t) {
  const rg_train_config *c = &t->cfg;
  if (c->utility_per_step == 0) return 0;
  const rg_utility_labels labels = strcmp(c->utility_labels, "all") == 0 ? RG_UTILITY_LABELS_ALL : RG_UTILITY_LABELS_ASSISTANT;
  /* packed, a conversation is not cut at max_utility_tokens but continues
   * into the next sequence (TRL) */
  const bool pack = strcmp(c->utility_packing, "on") == 0;
  const int max_len = pack ? 1 << 24 : c->max_utility_tokens;
  if (strcmp(c->utility, "harmless") == 0) {
    /* every rank generates the same replies (the same model, greedy, the
     * same threads); ranks other than the writer read the run's cache when
     * it is there (a resume) and otherwise keep theirs in a temporary file */
    char *cache = rg_path_join(t->run_dir, "utility.jsonl"), own[64] = "";
    if (!cache) return rg_error_set("out of memory");
    if (t->writer && check_utility_cache(t, cache) < 0) {
      free(cache);
      return -1;
    }
    const bool generated = t->writer && !rg_path_exists(cache);
    if (!t->writer && !rg_path_exists(cache)) {
      const char *tmp = getenv("TMPDIR");
      free(cache);
      snprintf(own, sizeof own, "refgeo-utility-%ld.jsonl", (long)getpid());
      if (!(cache = rg_path_join(tmp && *tmp ? tmp : "/tmp", own))) return rg_error_set("out of memory");
    }
    const rg_utility_completions_opts go = {.prompts_path = c->utility_prompts_file,
                                            .max_prompts = c->utility_prompts,
                                            .max_new_tokens = c->utility_max_new_tokens,
                                            .cache_path = cache,
                                            .max_len = max_len,
                                            .labels = labels,
                                            .progress = t->writer ? stderr : NULL};
    t->utility = rg_utility_from_completions(t->w, &t->tmpl, &go, NULL);
    if (own[0]) remove(cache);
    free(cache);
    char *const listed[] = {"utility.jsonl"};
    if (t->utility && generated && manifest_add(t, listed, 1) < 0) return -1;
  } else {
    t->utility = rg_utility_from_jsonl(t->m, &t->tmpl, c->utility, max_len, labels);
  }
  if (!t->utility) return -1;
  if (pack) {
    if (rg_tokenizer_eos(t->m->tokenizer) < 0)
      return rg_error_set("utility_packing: the tokenizer has no EOS to close each example with");
    rg_utility_set *packed = rg_utility_pack(t->utility, c->max_utility_tokens, rg_tokenizer_eos(t->m->tokenizer));
    rg_utility_free(t->utility);
    if (!(t->utility = packed)) return rg_error_prefix("%s", c->utility);
  }
  if (rg_utility_count(t->utility) < 1) return rg_error_set("%s: no utility examples", c->utility);
  return 0;
}

static int write_config(const rg_trainer *t) {
  char *path = rg_path_join(t->run_dir, "config.ini");
  rg_atomic_file f;
  int rc = path ? rg_atomic_open(&f, path) : rg_error_set("out of memory");
  if (rc == 0) {
    fprintf(f.fp, "# refgeo train: the resolved configuration of this run (every key)\n");
    rc = rg_train_config_write(&t->cfg, f.fp);
    if (rc == 0)
      rc = rg_atomic_commit(&f);
    else
      rg_atomic_abort(&f);
  }
  free(path);
  return rc;
}

/* Removes what killed writers of the run dir left: their temp files
 * (rg_atomic_open's NAME.tmp.<pid>, of dead pids) and half-written
 * checkpoint-N.tmp/ folders. Called with the run dir's lock held. */
static int remove_leftovers(const rg_trainer *t) {
  int rc = rg_remove_stale_temps(t->run_dir, 1, NULL);
  DIR *d = rc == 0 ? opendir(t->run_dir) : NULL;
  if (rc == 0 && !d) return rg_error_set("%s: %s", t->run_dir, strerror(errno));
  struct dirent *e;
  while (rc == 0 && d && (e = readdir(d)) != NULL) {
    const size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "checkpoint-", 11) != 0 || n < 5 || strcmp(e->d_name + n - 4, ".tmp") != 0) continue;
    char *p = rg_path_join(t->run_dir, e->d_name);
    rc = p ? rg_remove_flat_dir(p) : rg_error_set("out of memory");
    free(p);
  }
  if (d) closedir(d);
  return rc;
}

/* A new run dir must not hold a run (its config.ini, written once the run
 * has opened); a resumed one must hold this run. Either way the run dir's
 * lock is taken first (one writer at a time), and what killed writers left
 * is removed. */
static int check_run_dir(rg_trainer *t, bool resume) {
  char *cfg_path = rg_path_join(t->run_dir, "config.ini");
  char *cache = rg_path_join(t->run_dir, "utility.jsonl");
  char *sums = manifest_path(t);
  int rc = cfg_path && cache && sums ? 0 : rg_error_set("out of memory");
  if (rc == 0 && !resume) {
    if (rg_path_exists(cfg_path))
      rc = rg_error_set("%s: already holds a run (--resume continues it)", t->run_dir);
    else if (rg_mkdir_p(t->run_dir) < 0)
      rc = -1;
    else if ((t->lock_fd = rg_run_lock(t->run_dir)) < 0 || remove_leftovers(t) < 0)
      rc = -1;
    /* left by a start that failed, maybe of another config */
    else if ((rg_path_exists(cache) && remove(cache) != 0) || (rg_path_exists(sums) && remove(sums) != 0))
      rc = rg_error_set("%s: cannot remove: %s", rg_path_exists(cache) ? cache : sums, strerror(errno));
  } else if (rc == 0) {
    rg_train_config saved;
    rc = rg_train_config_init(&saved, "");
    if (rc == 0 && !rg_path_exists(cfg_path)) rc = rg_error_set("%s: no run to resume (no config.ini)", t->run_dir);
    if (rc == 0 && ((t->lock_fd = rg_run_lock(t->run_dir)) < 0 || remove_leftovers(t) < 0)) rc = -1;
    /* config.ini needs no digest: every key of it is compared with this
     * run's, and damage that still parses shows as a key that differs */
    if (rc == 0) rc = rg_train_config_read(&saved, cfg_path);
    if (rc == 0) rc = rg_train_config_check(&saved);
    const char *diff = rc == 0 ? rg_train_config_diff(&saved, &t->cfg) : NULL;
    if (diff) rc = rg_error_set("%s: key \"%s\" differs from this run's config.ini (resume the same config)", t->run_dir, diff);
    rg_train_config_free(&saved);
  }
  free(cfg_path);
  free(cache);
  free(sums);
  return rc;
}

/* ---------------------------------------------------------------- state */

static cJSON *meta_json(const rg_trainer *t) {
  cJSON *o = cJSON_CreateObject(), *log = cJSON_CreateArray();
  cJSON *pool = rg_pool_to_json(&t->pool);
  char rng[24];
  snprintf(rng, sizeof rng, "%016llx", (unsigned long long)t->rng);
  if (!o || !log || !pool) {
    cJSON_Delete(o), cJSON_Delete(log), cJSON_Delete(pool);
    return NULL;
  }
  cJSON_AddNumberToObject(o, "step", (double)t->step);
  cJSON_AddNumberToObject(o, "optimizer_steps", (double)rg_optimizer_steps(t->opt));
  cJSON_AddStringToObject(o, "rng", rng);
  cJSON_AddNumberToObject(o, "utility_cursor", (double)t->utility_cursor);
  if (t->zero) { /* what the shard files need to be read back (train_state.h) */
    char run[24];
    snprintf(run, sizeof run, "%016llx", (unsigned long long)t->run_id);
    cJSON_AddNumberToObject(o, "zero", rg_zero_stage(t->zero));
    cJSON_AddNumberToObject(o, "zero_ranks", rg_zero_ranks(t->zero));
    cJSON_AddStringToObject(o, "zero_run", run);
  }
  if (t->isl) { /* the run and version an island's state belongs to */
    char run[24];
    snprintf(run, sizeof run, "%016llx", (unsigned long long)rg_isl_member_run_id(t->isl));
    cJSON_AddStringToObject(o, "islands_run", run);
    cJSON_AddNumberToObject(o, "islands_version", (double)rg_isl_member_version(t->isl));
  }
  cJSON_AddItemToObject(o, "pool", pool);
  /* each value as a %.17g string, which strtod reads back to the same
   * double: the rows of train_log.csv before a resume come out byte for
   * byte (cJSON's own numbers keep 15 digits where they compare equal
   * within a relative epsilon) */
  for (long i = 0; i < t->n_log; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int k = 0; row && k < N_LOG_COLUMNS; k++) {
      char v[32];
      snprintf(v, sizeof v, "%.17g", t->log[i].v[k]);
      cJSON_AddItemToArray(row, cJSON_CreateString(v));
    }
    cJSON_AddItemToArray(log, row);
  }
  cJSON_AddItemToObject(o, "log", log);
  return o;
}

static int push_log(rg_trainer *t, const log_row *r) {
  if (t->n_log == t->cap_log) {
    long cap = t->cap_log ? 2 * t->cap_log : 64;
    log_row *grown = realloc(t->log, (size_t)cap * sizeof *grown);
    if (!grown) return rg_error_set("out of memory");
    t->log = grown;
    t->cap_log = cap;
  }
  t->log[t->n_log++] = *r;
  return 0;
}

/* ZeRO: the state's shards must be of this run's stage and ranks (a state
 * of other ranks is refused, not re-partitioned: see docs/training.md);
 * this rank's shard of the moments is read. */
static int restore_zero(rg_trainer *t, const cJSON *meta, const char *what) {
  const cJSON *stage = cJSON_GetObjectItemCaseSensitive(meta, "zero");
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(meta, "zero_ranks");
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(meta, "zero_run");
  const int W = rg_zero_ranks(t->zero), sp = t->cfg.sp;
  if (!cJSON_IsNumber(stage) || !cJSON_IsNumber(ranks) || !cJSON_IsString(run))
    return rg_error_set("%s: no ZeRO shards (zero, zero_ranks, zero_run): a state of a run with zero = 0", what);
  if (stage->valueint != rg_zero_stage(t->zero) || ranks->valueint != W)
    return rg_error_set("%s: its ZeRO-%d shards are of %d data-parallel ranks and this run has %d: resume with mpirun "
                        "-np %d (sp %d); refgeo does not re-partition a state",
                        what, stage->valueint, ranks->valueint, W, ranks->valueint * sp, sp);
  char *end = NULL;
  errno = 0;
  t->run_id = strtoull(run->valuestring, &end, 16);
  if (errno || *end) return rg_error_set("%s: zero_run \"%s\" is not a hex number", what, run->valuestring);
  return rg_train_state_load_shard(t->run_dir, t->step, t->opt, t->run_id);
}

static int restore_meta(rg_trainer *t, const cJSON *meta, const char *what) {
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(meta, "step");
  const cJSON *opt_steps = cJSON_GetObjectItemCaseSensitive(meta, "optimizer_steps");
  const cJSON *rng = cJSON_GetObjectItemCaseSensitive(meta, "rng");
  const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(meta, "utility_cursor");
  const cJSON *log = cJSON_GetObjectItemCaseSensitive(meta, "log");
  char *end = NULL;
  if (!cJSON_IsNumber(step) || !cJSON_IsNumber(opt_steps) || !cJSON_IsString(rng) || !cJSON_IsNumber(cursor) ||
      !cJSON_IsArray(log))
    return rg_error_set("%s: missing step, optimizer_steps, rng, utility_cursor or log", what);
  errno = 0;
  t->rng = strtoull(rng->valuestring, &end, 16);
  if (errno || *end) return rg_error_set("%s: rng \"%s\" is not a hex number", what, rng->valuestring);
  t->step = (long)step->valuedouble;
  t->utility_cursor = (long)cursor->valuedouble;
  rg_optimizer_set_steps(t->opt, (long)opt_steps->valuedouble);
  const cJSON *isl_run = cJSON_GetObjectItemCaseSensitive(meta, "islands_run");
  if (cJSON_IsString(isl_run)) snprintf(t->isl_run, sizeof t->isl_run, "%s", isl_run->valuestring);
  if (rg_pool_from_json(&t->pool, t->m, t->data, cJSON_GetObjectItemCaseSensitive(meta, "pool"), what) < 0) return -1;
  if (t->zero && restore_zero(t, meta, what) < 0) return -1;
  const cJSON *row;
  cJSON_ArrayForEach(row, log) {
    log_row r = {0};
    if (cJSON_GetArraySize(row) != N_LOG_COLUMNS) return rg_error_set("%s: a log row without %d values", what, N_LOG_COLUMNS);
    for (int k = 0; k < N_LOG_COLUMNS; k++) {
      const cJSON *v = cJSON_GetArrayItem(row, k);
      char *stop = NULL;
      r.v[k] = cJSON_IsString(v) ? strtod(v->valuestring, &stop) : NAN;
      if (!cJSON_IsString(v) || stop == v->valuestring || *stop)
        return rg_error_set("%s: log value %d is not a number in a string", what, k);
    }
    if (push_log(t, &r) < 0) return -1;
  }
  return 0;
}

/* Whether every rank of the world got RC 0; a rank that did gets an error
 * naming the first that did not. */
static int all_ranks_ok(rg_trainer *t, int rc, const char *what) {
  const int P = rg_comm_size(t->world);
  int *all = malloc((size_t)P * sizeof *all);
  if (!all) return rg_error_set("out of memory");
  if (rg_comm_allgather_int(t->world, all, rc < 0) < 0) rc = -1;
  for (int r = 0; rc == 0 && r < P; r++)
    if (all[r]) rc = rg_error_set("%s: rank %d failed (its own message says why)", what, r);
  free(all);
  return rc;
}

static int save_state(rg_trainer *t) {
  if (t->zero) { /* the writer makes the state's folder; one rank per shard writes it there; then the writer ends it */
    int rc = t->writer ? rg_train_state_begin(t->run_dir, t->step) : 0;
    if (all_ranks_ok(t, rc, "saving the training state") < 0) return -1;
    if (!t->sp || rg_comm_rank(t->sp) == 0) rc = rg_train_state_save_shard(t->run_dir, t->step, t->opt, t->run_id);
    if (all_ranks_ok(t, rc, "saving the ZeRO shards of the training state") < 0) return -1;
    if (!t->writer) return 0;
  }
  cJSON *meta = meta_json(t);
  if (!meta) return rg_error_set("out of memory");
  const int rc = rg_train_state_save(t->run_dir, t->step, t->w, t->opt, meta);
  cJSON_Delete(meta);
  return rc;
}

static int write_log(const rg_trainer *t) {
  char *path = rg_path_join(t->run_dir, "train_log.csv");
  rg_csv_writer w;
  int rc = path ? rg_csv_writer_open(&w, path, LOG_COLUMNS, N_LOG_COLUMNS) : rg_error_set("out of memory");
  if (rc < 0) {
    free(path);
    return -1;
  }
  for (long i = 0; rc == 0 && i < t->n_log; i++) {
    for (int k = 0; rc == 0 && k < N_LOG_COLUMNS; k++)
      rc = k == COL_STEP || k == COL_POOL_RESETS ? rg_csv_writer_int(&w, (long long)t->log[i].v[k]) : rg_csv_writer_double(&w, t->log[i].v[k]);
    if (rc == 0) rc = rg_csv_writer_end_row(&w);
  }
  if (rc == 0)
    rc = rg_csv_writer_close(&w);
  else
    rg_csv_writer_abort(&w);
  free(path);
  return rc;
}

static bool is_save_step(const rg_trainer *t, long step) {
  for (int i = 0; i < t->cfg.n_save; i++)
    if (t->cfg.save[i] == step) return true;
  return false;
}

/* The names "checkpoint-N/FILE" of the files in the run's checkpoint-N/
 * into NAMES[*N] (each malloc'd). */
static int checkpoint_files(const rg_trainer *t, const char *ck_name, char ***names, int *n) {
  char *dir = rg_path_join(t->run_dir, ck_name);
  DIR *d = dir ? opendir(dir) : NULL;
  *names = NULL, *n = 0;
  int rc = d ? 0 : rg_error_set("%s: %s", dir ? dir : ck_name, dir ? strerror(errno) : "out of memory");
  struct dirent *e;
  int cap = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(*names, (size_t)cap * sizeof *grown);
      if (!grown) {
        rc = rg_error_set("out of memory");
        break;
      }
      *names = grown;
    }
    char *name = malloc(strlen(ck_name) + strlen(e->d_name) + 2);
    if (!name) rc = rg_error_set("out of memory");
    else sprintf(name, "%s/%s", ck_name, e->d_name), (*names)[(*n)++] = name;
  }
  if (d) closedir(d);
  free(dir);
  return rc;
}

static rg_hf_write_opts checkpoint_opts(const rg_trainer *t) {
  return (rg_hf_write_opts){.dtype = strcmp(t->cfg.checkpoint_dtype, "f32") == 0 ? RG_HF_F32 : RG_HF_BF16};
}

/* Lists the files of the run's checkpoint NAME in RUN/SHA256SUMS. */
static int list_checkpoint(const rg_trainer *t, const char *name) {
  char **names;
  int n;
  int rc = checkpoint_files(t, name, &names, &n);
  if (rc == 0) rc = manifest_add(t, names, n);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

/* The checkpoint of the current step, unless it is there already (a run
 * resumed from the state of a save step, killed after writing it), and
 * the digests of its files in RUN/SHA256SUMS (also for one written by a
 * run killed before it listed them). */
static int write_checkpoint(rg_trainer *t) {
  char name[48];
  snprintf(name, sizeof name, "checkpoint-%ld", t->step);
  char *dir = rg_path_join(t->run_dir, name), *sums = manifest_path(t);
  if (!dir || !sums) {
    free(dir), free(sums);
    return rg_error_set("out of memory");
  }
  const bool done = rg_is_dir(dir);
  free(dir);
  rg_manifest m;
  int rc = rg_manifest_read(&m, sums, false);
  char model[96];
  snprintf(model, sizeof model, "%s/model.safetensors", name);
  const bool listed = rc == 0 && rg_manifest_get(&m, model);
  rg_manifest_free(&m);
  free(sums);
  if (rc < 0 || (done && listed)) return rc;
  const rg_hf_write_opts o = checkpoint_opts(t);
  if (!done && rg_hf_write_checkpoint(t->w, t->run_dir, t->step, &o) < 0) return -1;
  rg_fault_point("checkpoint-listed"); /* tests: a kill with a checkpoint in place, not yet in SHA256SUMS */
  return list_checkpoint(t, name);
}

/* The checkpoint of this step with the weights as they are now, in place
 * of one written before (an island's last checkpoint, written again with
 * the run's final version). The new one is written beside it as
 * checkpoint-S.new.tmp, then swapped in by two renames (the old one to
 * checkpoint-S.old.tmp). Names ending in .tmp are never read as
 * checkpoints (model/checkpoints.h), and a kill's are removed at the next
 * start (remove_leftovers) or here. */
static int rewrite_checkpoint(rg_trainer *t) {
  char name[48], *dir = NULL, *fresh = NULL, *old = NULL;
  snprintf(name, sizeof name, "checkpoint-%ld", t->step);
  int rc = (dir = rg_path_join(t->run_dir, name)) && (fresh = malloc(strlen(dir) + 9)) && (old = malloc(strlen(dir) + 9))
               ? 0
               : rg_error_set("out of memory");
  if (rc == 0) {
    sprintf(fresh, "%s.new.tmp", dir), sprintf(old, "%s.old.tmp", dir);
    rc = rg_remove_flat_dir(fresh);
  }
  if (rc == 0) rc = rg_remove_flat_dir(old);
  const rg_hf_write_opts o = checkpoint_opts(t);
  if (rc == 0) rc = rg_hf_write_model(t->w, fresh, &o);
  if (rc == 0 && rg_is_dir(dir) && rename(dir, old) != 0) rc = rg_error_set("%s: cannot rename to %s: %s", dir, old, strerror(errno));
  if (rc == 0 && rename(fresh, dir) != 0) rc = rg_error_set("%s: cannot rename to %s: %s", fresh, dir, strerror(errno));
  if (rc == 0) rc = rg_sync_dir(t->run_dir);
  if (rc == 0) rc = list_checkpoint(t, name);
  if (rc == 0) rc = rg_remove_flat_dir(old);
  free(dir), free(fresh), free(old);
  return rc;
}

/* ---------------------------------------------------------------- plan */

/* ZeRO's part of PLAN: its buffers (counted under the optimizer's tag with
 * the moments' shards) as a line of their own. */
static void plan_zero(rg_train_plan *plan, const rg_zero *z) {
  plan->zero = rg_zero_stage(z);
  plan->zero_buffers = rg_zero_bytes(z);
  plan->moments -= plan->zero_buffers;
}

/* The plan of CFG (borrowed: its strings stay the caller's) with recompute
 * policy R, into PLAN (device fields set): the steps of rg_trainer_open
 * that allocate, each under its own tag, on a plan backend. */
static int plan_policy(const rg_train_config *cfg, int r, rg_train_plan *plan) {
  rg_trainer *t = calloc(1, sizeof *t);
  if (!t) return rg_error_set("out of memory");
  t->cfg = *cfg;
  t->cfg.recompute = r;
  t->plan = plan;
  t->lock_fd = -1;
  int rc = t->cfg.sp > 1 && !(t->sp = rg_comm_plan(t->cfg.sp)) ? -1 : 0;
  /* ZeRO's shards are of the data-parallel groups the plan's ranks make */
  const int groups = plan->ranks > t->cfg.sp ? plan->ranks / t->cfg.sp : 1;
  if (rc == 0 && t->cfg.zero > 0 && groups < 2)
    rc = rg_error_set("zero: %d shards over data-parallel groups, and %d ranks with sp %d make one (plan with --ranks N, "
                      "N a multiple of %d from %d)",
                      t->cfg.zero, plan->ranks > 1 ? plan->ranks : 1, t->cfg.sp, t->cfg.sp, 2 * t->cfg.sp);
  if (rc == 0 && t->cfg.zero > 0 && !(t->dp = rg_comm_plan(groups))) rc = -1;
  if (rc == 0 && !(t->m = rg_train_plan_model(plan, t->cfg.model))) rc = -1;
  if (rc == 0) rc = open_weights(t);
  if (rc == 0) rg_plan_set_tag(rg_weights_backend(t->w), RG_PLAN_TAG_SESSIONS);
  if (rc == 0) rc = open_sessions(t);
  if (rc == 0) rg_plan_set_tag(rg_weights_backend(t->w), RG_PLAN_TAG_OPTIMIZER);
  if (rc == 0) rc = open_optimizer(t);
  if (rc == 0) rc = rg_train_plan_fill(plan, &t->cfg, t->w, t->train, t->cand, t->gcg_train, t->g);
  if (rc == 0 && t->zero) plan_zero(plan, t->zero);
  memset(&t->cfg, 0, sizeof t->cfg); /* borrowed */
  rg_trainer_free(t);
  return rc;
}

/* When nothing fits at cfg->sp ranks: the fewest ranks (a power of 2 up to
 * 64), each with a whole device of PLAN's kind to itself (a GPU, or a
 * machine like this one), and the least recompute, that fit: sequence
 * parallelism splits the activations, not the weights or the optimizer
 * state, so more ranks help only where activations are the excess. Writes
 * the advice to MORE; PLAN's device fields are kept. */
static void fewest_ranks(const rg_train_config *cfg, rg_train_plan *plan, char *more, size_t more_len) {
  static const int ORDER[] = {RG_RECOMPUTE_NONE, RG_RECOMPUTE_MATMULS, RG_RECOMPUTE_FULL};
  const rg_train_plan device = *plan;
  const double gib = 1024.0 * 1024 * 1024;
  snprintf(more, more_len, "no sequence-parallel degree up to 64 fits either: use LoRA, or shorter max_case_tokens or "
                           "max_utility_tokens");
  for (int P = 2 * cfg->sp; P <= 64; P *= 2) {
    rg_train_config c = *cfg;
    c.sp = P;
    for (int k = 0; k < 3; k++) {
      const int rc = plan_policy(&c, ORDER[k], plan);
      const double need = (double)plan->total;
      *plan = device;
      if (rc < 0) break; /* e.g. sp_attention = ulysses on heads P does not divide */
      if (need <= device.capacity) {
        snprintf(more, more_len,
                 "sp = %d fits, each rank on a %s of its own: recompute %d, %.2f GiB per rank (mpirun -np %d ... "
                 "--sp %d)",
                 P, device.gpu ? "GPU" : "machine like this one", ORDER[k], need / gib, P, P);
        return;
      }
    }
  }
  rg_error_clear();
}

/* recompute = auto: the policy of least recompute whose plan fits the
 * device's memory per rank (cpu: this machine's RAM shared by the ranks
 * mpirun started on it), trying none, then all but attention, then full.
 * Sets cfg->recompute and fills PLAN with the chosen plan; NOTE gets a
 * line that says why. Returns 0, or -1 with the error set when none fits. */
static int resolve_recompute(rg_train_config *cfg, rg_train_plan *plan, char *note, size_t note_len) {
  static const int ORDER[] = {RG_RECOMPUTE_NONE, RG_RECOMPUTE_MATMULS, RG_RECOMPUTE_FULL};
  static const char *const NAMES[] = {"0 (nothing)", "1 (each block from its input)", "2 (all but attention)"};
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int on_node = plan->gpu ? 1 : local && atoi(local) > 1 ? atoi(local) : cfg->sp;
  const double budget = plan->capacity / on_node, gib = 1024.0 * 1024 * 1024;
  double needs[3] = {0};
  for (int k = 0; k < 3; k++) {
    const rg_train_plan device = *plan; /* the device fields */
    if (plan_policy(cfg, ORDER[k], plan) < 0) return -1;
    needs[k] = (double)plan->total;
    if (needs[k] <= budget) {
      cfg->recompute = ORDER[k];
      snprintf(note, note_len, "recompute auto: %s, %.2f GiB of %.2f GiB per rank%s", NAMES[ORDER[k]], needs[k] / gib,
               budget / gib, k ? "; less recompute does not fit" : "");
      return 0;
    }
    *plan = device;
  }
  char more[160];
  fewest_ranks(cfg, plan, more, sizeof more);
  return rg_error_set("recompute auto: even recompute = 1 needs %.2f GiB per rank, and %s has %.2f GiB per rank; %s",
                      needs[2] / gib, plan->device, budget / gib, more);
}

int rg_trainer_plan(rg_train_config *cfg, rg_train_plan *plan, char *note, size_t note_len) {
  rg_train_config c = *cfg;
  memset(cfg, 0, sizeof *cfg);
  if (note_len) note[0] = '\0';
  const int rc = c.recompute < 0 ? resolve_recompute(&c, plan, note, note_len) : plan_policy(&c, c.recompute, plan);
  rg_train_config_free(&c);
  return rc;
}

void rg_trainer_plan_compare(const rg_train_config *cfg, const rg_train_plan *device, char *note, size_t note_len) {
  const double gib = 1024.0 * 1024 * 1024;
  const int ranks = device->ranks > cfg->sp ? device->ranks : cfg->sp, groups = ranks / cfg->sp;
  size_t at = 0;
  note[0] = '\0';
  at += (size_t)snprintf(note + at, note_len - at, "per rank on %s, %s mode unless LoRA:\n", device->device, cfg->mode);
  for (int k = 0; k < 4 && at < note_len; k++) {
    rg_train_config c = *cfg; /* borrowed strings: plan_policy leaves them */
    rg_train_plan p = *device;
    char line[160], skip[32] = "";
    if (k < 3) {
      c.zero = k;
      snprintf(line, sizeof line, "zero %d, %d ranks (%d data-parallel groups)", k, ranks, groups);
      if (k > 0 && groups < 2) snprintf(skip, sizeof skip, "needs 2 groups or more");
    } else {
      c.zero = 0;
      c.mode = (char *)"lora"; /* borrowed, as the config's own strings are */
      c.sp = 1;
      p.ranks = 1;
      snprintf(line, sizeof line, "LoRA (rank %d, %s), one rank", cfg->lora_rank, cfg->lora_targets);
    }
    char why[256] = "";
    int rc = skip[0] ? -1 : c.recompute < 0 ? resolve_recompute(&c, &p, why, sizeof why) : plan_policy(&c, c.recompute, &p);
    const double need = (double)p.total, left = p.capacity - need;
    if (skip[0])
      at += (size_t)snprintf(note + at, note_len - at, "  %-52s %s\n", line, skip);
    else if (rc < 0)
      at += (size_t)snprintf(note + at, note_len - at, "  %-52s %s\n", line, rg_error_get());
    else
      at += (size_t)snprintf(note + at, note_len - at, "  %-52s %8.2f GiB  %s %.2f GiB\n", line, need / gib,
                             left >= 0 ? "fits, margin" : "does not fit, short by", left >= 0 ? left / gib : -left / gib);
    rg_error_clear();
  }
}

/* ---------------------------------------------------------------- open */

/* Under mpirun: the world, its sequence-parallel and data-parallel groups
 * (struct rg_trainer says how they split it). Every rank draws the same
 * test cases and runs the same GCG, its candidates shared out over the
 * world; group g trains on micro-batches g, g + n_groups, ...; rank 0
 * writes the run. */
static int open_ranks(rg_trainer *t) {
  const int sp = t->cfg.sp;
  const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
  t->writer = true;
  t->n_groups = 1;
  if (!launched && t->cfg.zero > 0)
    return rg_error_set("zero: %d shards over data-parallel ranks, and this process was not started by mpirun (mpirun "
                        "-np %d or more)",
                        t->cfg.zero, 2 * sp);
  if (!launched)
    return sp == 1 ? 0 : rg_error_set("sp: %d needs mpirun -np %d (this process was not started by mpirun)", sp, sp);
  if (!(t->world = rg_comm_mpi_world(600))) return -1;
  const int P = rg_comm_size(t->world), accum = t->cfg.grad_accum;
  t->writer = rg_comm_rank(t->world) == 0;
  if (P % sp != 0) return rg_error_set("sp: %d does not divide the %d ranks of mpirun", sp, P);
  t->n_groups = P / sp;
  t->group = rg_comm_rank(t->world) / sp;
  /* every group trains on as many micro-batches: the update is one
   * process's grad_accum micro-batches, shared out */
  if (accum % t->n_groups != 0)
    return rg_error_set("grad_accum: %d micro-batches per update do not share out over %d data-parallel groups (%d "
                        "ranks / sp %d): make grad_accum a multiple of %d",
                        accum, t->n_groups, P, sp, t->n_groups);
  if (t->cfg.zero > 0 && t->n_groups < 2)
    return rg_error_set("zero: %d shards over data-parallel groups, and %d rank%s with sp %d make%s one: mpirun -np %d or "
                        "more",
                        t->cfg.zero, P, P == 1 ? "" : "s", sp, P == 1 ? "s" : "", 2 * sp);
  if (P == 1) return 0;
  rg_comm *across = NULL, *in = rg_comm_split(t->world, sp, &across);
  if (!in) return -1;
  if (sp > 1) t->sp = in;
  else rg_comm_free(in);
  if (t->n_groups > 1) t->dp = across;
  else rg_comm_free(across);
  return 0;
}

/* With ranks on a GPU backend: NCCL for the collectives on device buffers
 * (struct rg_trainer). */
static int open_device_comms(rg_trainer *t) {
  rg_backend *be = rg_weights_backend(t->w);
  if (!t->world || strcmp(rg_backend_name(be), "cpu") == 0) return 0;
  if (!(t->world_dev = rg_comm_nccl(t->world, be, 600))) return -1;
  if (t->sp && !(t->sp_dev = rg_comm_nccl(t->sp, be, 600))) return -1;
  if (t->cfg.zero > 0 && t->dp && !(t->dp_dev = rg_comm_nccl(t->dp, be, 600))) return -1;
  return 0;
}

/* ZeRO: the run's id in its shard files, drawn by rank 0 (from the clock and
 * its process id: another run differs) and given to every rank. */
static int draw_run_id(rg_trainer *t) {
  const uint64_t mine = rg_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock());
  const int P = rg_comm_size(t->world);
  int *lo = malloc(2 * (size_t)P * sizeof *lo), *hi = lo + P;
  int rc = lo ? 0 : rg_error_set("out of memory");
  if (rc == 0 && (rg_comm_allgather_int(t->world, lo, (int)(uint32_t)mine) < 0 ||
                  rg_comm_allgather_int(t->world, hi, (int)(uint32_t)(mine >> 32)) < 0))
    rc = -1;
  if (rc == 0) t->run_id = (uint64_t)(uint32_t)lo[0] | (uint64_t)(uint32_t)hi[0] << 32;
  free(lo);
  return rc;
}

/* Rank 0's X (a version, or a flag; below 2^31) on every rank of the
 * island, so that all take rank 0's decision; -1 when the exchange fails. */
static long from_rank0(rg_trainer *t, long x) {
  if (!t->world) return x;
  const int P = rg_comm_size(t->world);
  int *all = malloc((size_t)P * sizeof *all);
  if (!all || rg_comm_allgather_int(t->world, all, (int)x) < 0) x = -1;
  else x = all[0];
  free(all);
  return x;
}

/* The newest global version, as rank 0 of the island sees it, on every
 * rank (so that all adopt the same), waiting for one newer than AFTER. */
static long island_version(rg_trainer *t, long after) {
  const rg_train_config *c = &t->cfg;
  const long v = from_rank0(t, t->writer ? rg_isl_member_wait(t->isl, after, 10 * c->deadline_s + 600) : 0);
  if (v < 0 && !t->writer) rg_error_set("islands: rank 0 found no global version to adopt");
  return v;
}

/* Whether the run across islands has ended (rank 0 looks): 1, 0, or -1. */
static int island_run_ended(rg_trainer *t) {
  long v;
  const long ended = from_rank0(t, t->writer ? rg_isl_member_ended(t->isl, &v) : 0);
  if (ended < 0 && !t->writer) rg_error_set("islands: rank 0 could not read the run's end");
  return (int)ended;
}

/* Islands: joins the run in cfg.sync_dir (opened by rg_trainer_open) from
 * its newest version (a state of this run dir must belong to that run). */
static int open_island(rg_trainer *t, bool resumed) {
  const rg_train_config *c = &t->cfg;
  char mine[24];
  snprintf(mine, sizeof mine, "%016llx", (unsigned long long)rg_isl_member_run_id(t->isl));
  if (resumed && strcmp(t->isl_run, mine) != 0)
    return rg_error_set("%s: its state belongs to islands run %s, and %s holds run %s", t->run_dir,
                        t->isl_run[0] ? t->isl_run : "(none: not an island's state)", c->sync_dir, mine);
  const long v = island_version(t, -1);
  return v < 0 ? -1 : rg_isl_member_join(t->isl, t->w, v, resumed);
}

/* Every rank of the island moves to global version V (rank 0's choice,
 * island_version), or all fail together: each applies V's updates or reads
 * V whole; when any rank could not (V retired meanwhile), rank 0 names a
 * newer version and every rank reads that one whole. A rank falling back
 * alone would train from another theta_global than its peers. */
static int island_adopt(rg_trainer *t, long v) {
  int rc = rg_isl_member_adopt(t->isl, t->w, v);
  if (!t->world ? rc == 0 : all_ranks_ok(t, rc, "islands: adopting a global version") == 0) return 0;
  fprintf(stderr, "islands: version %ld could not be adopted on every rank (%s): reading a newer one whole\n", v, rg_error_get());
  rg_error_clear();
  const long newer = island_version(t, v);
  rc = newer > v ? rg_isl_member_join(t->isl, t->w, newer, true) : newer < 0 ? -1 : rg_error_set("islands: no version after %ld", v);
  return !t->world ? rc : all_ranks_ok(t, rc, "islands: reading a global version whole");
}

/* Waits for the run's end and returns its final version on every rank, or
 * -1. Rank 0 looks in slices of a minute, between which the ranks meet
 * (a collective would time out while the slowest island trains on). */
static long island_wait_end(rg_trainer *t) {
  for (double waited = 0;; waited += 60) {
    long v = -1;
    const int ended = t->writer ? rg_isl_member_wait_end(t->isl, 60, &v) : 0;
    const long got = from_rank0(t, ended < 0 ? -1 : ended == 0 ? -2 : v);
    if (got != -2) {
      if (got < 0 && !t->writer) rg_error_set("islands: rank 0 could not read the run's end");
      return got;
    }
    if (t->writer && waited > 0 && fmod(waited, 600) == 0)
      fprintf(stderr, "islands: island %d still waits for the run's end (%s/final.json) after %.0f min\n", t->cfg.island,
              t->cfg.sync_dir, waited / 60);
  }
}

/* The island's end, once it has made its updates or the run has ended:
 * its state at this step (unless it has one: an outer boundary), so that a
 * resume ends here again; it marks itself finished, waits for the run's
 * end, adopts the final version and writes its last checkpoint with it, in
 * place of one written at this step before. Every island's last checkpoint
 * then holds the run's final theta_global, also one that finished first
 * while others still sent contributions (quorum < K). Its updates since
 * its last outer step, made after the run's end, are dropped with it. A
 * kill before that state is written resumes from the last outer step and
 * ends there (a checkpoint of a save step inside the dropped updates keeps
 * the island's own weights). */
static int island_end(rg_trainer *t, FILE *progress) {
  const long have = from_rank0(t, t->writer ? rg_train_state_latest(t->run_dir) : 0);
  int rc = 0;
  if (have != t->step && t->zero) rc = save_state(t); /* every rank writes its shard; its collectives check them */
  else if (have != t->step) rc = t->writer ? save_state(t) : 0;
  if (t->world && !t->zero ? all_ranks_ok(t, rc, "islands: saving the state at the island's end") < 0 : rc < 0) return -1;
  rc = t->writer ? rg_isl_member_finish(t->isl) : 0;
  if (t->world ? all_ranks_ok(t, rc, "islands: marking the island finished") < 0 : rc < 0) return -1;
  if (t->writer && progress)
    fprintf(progress, "islands: island %d stops after update %ld; waiting for the run's end\n", t->cfg.island, t->step);
  const long v = island_wait_end(t);
  if (v < 0 || island_adopt(t, v) < 0) return -1;
  if (t->writer && progress) fprintf(progress, "islands: the run ended at version %ld\n", v);
  /* an island started after the end made no update: its checkpoint-0 (a
   * save step) is of the version it joined, the final one */
  return t->writer && t->step > 0 ? rewrite_checkpoint(t) : 0;
}

/* An outer boundary: publish the pseudo-gradient (rank 0), save the state
 * (moments, pool, rng at this boundary), adopt the next global version. */
static int island_outer(rg_trainer *t) {
  if (t->writer && rg_isl_member_publish(t->isl, t->w, t->step, t->isl_weight > 0 ? t->isl_weight : 1) < 0) return -1;
  t->isl_weight = 0;
  if ((t->writer || t->zero) && save_state(t) < 0) return -1; /* with ZeRO every rank writes its shard */
  const long v = island_version(t, rg_isl_member_version(t->isl));
  if (v < 0 || island_adopt(t, v) < 0) return -1;
  return t->writer && t->step == t->cfg.updates ? rg_isl_member_finish(t->isl) : 0;
}

rg_trainer *rg_trainer_open(rg_train_config *cfg, const char *run_dir, bool resume) {
  rg_trainer *t = calloc(1, sizeof *t);
  if (!t || !(t->run_dir = strdup(run_dir))) {
    free(t);
    rg_error_set("out of memory");
    return NULL;
  }
  t->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg);
  t->utility_epoch = -1;
  t->lock_fd = -1;
  t->rng = rg_mix64((uint64_t)t->cfg.seed);
  t->data_seed = (uint64_t)t->cfg.seed;
  const bool islands = t->cfg.sync_dir[0] != '\0';
  if (islands && strcmp(t->cfg.island_data, "own") == 0) { /* each island its own pool, draws and utility order */
    t->data_seed = rg_mix64((uint64_t)t->cfg.seed ^ rg_mix64(0x49534c4eull + (uint64_t)t->cfg.island));
    t->rng = rg_mix64(t->data_seed);
  }
  const char *tmpl_name = t->cfg.chat_template[0] ? t->cfg.chat_template : NULL;
  int rc = open_ranks(t);
  t->loss_scale = 1.0f / (float)t->cfg.grad_accum;
  if (rc == 0 && islands && strcmp(t->cfg.island_data, "shard") == 0) {
    /* the islands split one stream of micro-batches as data-parallel groups do */
    if (t->world) rc = rg_error_set("island_data: shard needs one process per island (this one has %d ranks)", rg_comm_size(t->world));
    t->n_groups = t->cfg.islands;
    t->group = t->cfg.island;
    t->loss_scale = (float)t->cfg.islands / (float)t->cfg.grad_accum;
  }
  if (rc == 0 && t->cfg.recompute < 0) { /* auto: what this machine's memory per rank fits */
    rg_train_plan plan = {0};
    rc = rg_train_plan_device(&plan, "cpu");
    plan.ranks = t->world ? rg_comm_size(t->world) : 1;
    if (rc == 0) rc = resolve_recompute(&t->cfg, &plan, t->recompute_note, sizeof t->recompute_note);
  }
  /* the writer checks and makes the run dir; the other ranks only read it */
  if (rc == 0 && t->writer) rc = check_run_dir(t, resume);
  if (rc == 0 && !(t->m = rg_model_load(t->cfg.model))) rc = -1;
  if (rc == 0) rc = rg_prompt_template(t->m, tmpl_name, &t->tmpl);
  if (rc == 0) rc = rg_prompt_frame(&t->tmpl, &t->before, &t->after);
  t->frame = (rg_test_case_frame){.before = t->before, .after = t->after, .add_bos = rc == 0 && rg_prompt_wants_bos(&t->tmpl)};
  if (rc == 0) rc = load_data(t);
  /* every test case a pool can draw fits max_case_tokens, or the run
   * stops here and not at the reset that first draws a long one */
  if (rc == 0)
    rc = rg_pool_check_lengths(t->m, &t->frame, t->data, t->cfg.refusal_target, t->cfg.max_case_tokens);
  if (rc == 0) rc = open_weights(t);
  /* an island checks its run before anything slow: the run's parameters
   * must be these */
  if (rc == 0 && islands &&
      !(t->isl = rg_isl_member_open(t->cfg.sync_dir, t->cfg.island, rg_quant_parse(t->cfg.compression),
                                    t->cfg.block_size, t->w, 10 * t->cfg.deadline_s + 600)))
    rc = -1;
  if (rc == 0) rc = open_device_comms(t);
  /* the utility replies come from the base model, before any update */
  if (rc == 0) rc = open_utility(t);
  if (rc == 0) rc = open_sessions(t);
  if (rc == 0) rg_gcg_disallowed_tokens(t->m, t->disallowed);
  if (rc == 0) rc = open_optimizer(t);
  const long latest = rc == 0 && resume ? rg_train_state_latest(t->run_dir) : -1;
  if (rc == 0 && latest >= 0) {
    cJSON *meta = NULL;
    rc = rg_train_state_load(t->run_dir, latest, t->w, t->opt, &meta);
    if (rc == 0) rc = restore_meta(t, meta, "state meta.json");
    cJSON_Delete(meta);
    /* an interrupted save or retirement finished, also when no update is left */
    if (rc == 0 && t->writer) rc = rg_train_state_tidy(t->run_dir, latest);
  } else if (rc == 0) {
    /* a fresh run, or a resumed one killed before its first state */
    rc = rg_pool_init(&t->pool, t->m, t->data, t->cfg.pool_size, &t->rng);
    if (rc == 0 && t->writer) rc = rg_train_state_tidy(t->run_dir, -1);
  }
  /* a rank that failed (to read its ZeRO shard, say) must not leave the
   * others waiting at the next collective: every rank arrives here */
  if (t->world && t->cfg.zero > 0) rc = all_ranks_ok(t, rc, "opening the run");
  if (rc == 0 && t->zero && latest < 0) rc = draw_run_id(t);
  if (rc == 0 && islands) rc = open_island(t, latest >= 0);
  if (rc == 0 && !resume && t->writer) rc = write_config(t);
  if (rc < 0) {
    rg_trainer_free(t);
    return NULL;
  }
  return t;
}

void rg_trainer_free(rg_trainer *t) {
  if (!t) return;
  rg_isl_member_free(t->isl);
  rg_pool_free(&t->pool);
  rg_optimizer_free(t->opt);
  rg_zero_free(t->zero);
  rg_grads_free(t->g);
  for (int i = 0; t->pending.suffix && i < t->cfg.cases_per_step; i++) free(t->pending.suffix[i]);
  free(t->pending.cases), free(t->pending.suffix), free(t->pending.utility);
  rg_session_free(t->cand);
  rg_session_free(t->gcg_train);
  rg_session_free(t->train);
  rg_utility_free(t->utility);
  rg_weights_free(t->w);
  rg_r2d2_data_free(t->data);
  free(t->before), free(t->after);
  rg_chat_template_free(&t->tmpl);
  rg_model_free(t->m);
  rg_r2d2_step_free(&t->stepper);
  free(t->disallowed);
  free(t->utility_order);
  free(t->log);
  free(t->run_dir);
  rg_train_config_free(&t->cfg);
  /* last, NCCL's before the MPI ones they borrow: a broken MPI communicator ends the job */
  rg_comm_free(t->sp_dev);
  rg_comm_free(t->dp_dev);
  rg_comm_free(t->world_dev);
  rg_comm_free(t->sp);
  rg_comm_free(t->dp);
  rg_comm_free(t->world);
  if (t->lock_fd >= 0) rg_run_unlock(t->lock_fd);
  free(t);
}

long rg_trainer_step(const rg_trainer *t) { return t->step; }

int rg_trainer_initial_params(const rg_train_config *cfg, char shape[65], uint64_t *n, float **theta) {
  rg_trainer t = {.cfg = *cfg, .lock_fd = -1}; /* borrowed: only the model and weights are opened */
  *theta = NULL;
  int rc = (t.m = rg_model_load(cfg->model)) ? open_weights(&t) : -1;
  if (rc == 0) {
    rg_isl_shape(t.w, shape, n);
    *theta = malloc((size_t)(*n ? *n : 1) * sizeof **theta);
    if (!*theta) rc = rg_error_set("out of memory");
  }
  size_t at = 0;
  for (int i = 0; rc == 0 && i < rg_weights_count(t.w); i++) {
    rc = rg_weights_download(t.w, i, *theta + at);
    at += (size_t)rg_tensor_nelems(rg_weights_tensor(t.w, i));
  }
  if (rc < 0) free(*theta), *theta = NULL;
  rg_weights_free(t.w);
  rg_model_free(t.m);
  return rc;
}

/* ---------------------------------------------------------------- one update */

/* Pool entry E as a test case (its suffix is the entry's, updated in place). */
static rg_r2d2_case pool_case(const rg_trainer *t, rg_pool_entry *e) {
  const rg_r2d2_behavior *b = &t->data->items[e->behavior];
  return (rg_r2d2_case){.name = b->id, .behavior = b->behavior, .target = b->targets[e->target], .suffix = e->suffix,
                        .n_suffix = e->n_suffix};
}

/* The next utility example: the examples in a random order per epoch. */
static const rg_utility_example *next_utility(rg_trainer *t) {
  const int n = rg_utility_count(t->utility);
  const long epoch = t->utility_cursor / n;
  if (epoch != t->utility_epoch) {
    if (!t->utility_order && !(t->utility_order = malloc((size_t)n * sizeof *t->utility_order))) return NULL;
    uint64_t r = rg_mix64(t->data_seed ^ rg_mix64((uint64_t)epoch));
    for (int i = 0; i < n; i++) t->utility_order[i] = i;
    for (int i = n - 1; i > 0; i--) {
      const int j = rg_pool_draw(&r, i + 1), tmp = t->utility_order[i];
      t->utility_order[i] = t->utility_order[j];
      t->utility_order[j] = tmp;
    }
    t->utility_epoch = epoch;
  }
  return rg_utility_get(t->utility, t->utility_order[t->utility_cursor++ % n]);
}

typedef struct {
  double total, utility, away, toward, gcg_loss;
  long gcg_cases, tokens;
  int resets, batches;
} update_sums;

/* Micro-batch K of the update: every rank draws it and runs its GCG; the
 * ranks of data-parallel group K % n_groups train on it. */
static int micro_batch_with(rg_trainer *t, int k, bool reset, update_sums *u, int *order, rg_r2d2_case *cases);

/* One micro-batch, its pool-sized arrays on the heap: the pool's size comes
 * from the config and has no maximum a stack could hold. */
static int micro_batch(rg_trainer *t, int k, bool reset, update_sums *u) {
  const size_t n = t->pool.n > 0 ? (size_t)t->pool.n : 1;
  int *order = malloc(n * sizeof *order);
  rg_r2d2_case *cases = malloc(n * sizeof *cases);
  int rc = order && cases ? micro_batch_with(t, k, reset, u, order, cases) : rg_error_set("out of memory");
  free(order);
  free(cases);
  return rc;
}

/* The forward and backward passes of one micro-batch of this rank's group. */
static int train_batch(rg_trainer *t, const rg_r2d2_case *cases, const rg_utility_example *const *utility, update_sums *u) {
  const rg_train_config *c = &t->cfg;
  /* accelerate divides each micro-batch's loss by the accumulation steps
   * (an island of island_data = shard by its share of them: its update is
   * the mean over its own micro-batches, which the outer mean then averages) */
  const float scale = t->loss_scale;
  const rg_r2d2_loss_opts lo = {.w_utility = (float)c->w_utility * scale,
                                .w_away = (float)c->w_away * scale,
                                .w_toward = (float)c->w_toward * scale,
                                .away_log_p_min = (float)c->away_threshold};
  rg_r2d2_losses L;
  int n_tokens = 0;
  if (rg_r2d2_accumulate(&t->stepper, cases, c->cases_per_step, utility, c->utility_per_step, &lo, t->g, &L, &n_tokens) < 0)
    return rg_error_prefix("training batch of step %ld", t->step + 1);
  u->utility += L.utility;
  u->away += L.away;
  u->toward += L.toward;
  u->total += c->w_utility * L.utility + c->w_away * L.away + c->w_toward * L.toward;
  u->tokens += n_tokens;
  u->batches++;
  return 0;
}

/* ZeRO-2: this rank's micro-batch of the round, kept until the round's end
 * with copies of its suffixes. */
static int hold(rg_trainer *t, const rg_r2d2_case *cases, const rg_utility_example *const *utility) {
  const rg_train_config *c = &t->cfg;
  for (int i = 0; i < c->cases_per_step; i++) {
    const size_t n = cases[i].n_suffix > 0 ? (size_t)cases[i].n_suffix : 1;
    int32_t *copy = realloc(t->pending.suffix[i], n * sizeof *copy);
    if (!copy) return rg_error_set("out of memory");
    memcpy(copy, cases[i].suffix, (size_t)cases[i].n_suffix * sizeof *copy);
    t->pending.suffix[i] = copy;
    t->pending.cases[i] = cases[i];
    t->pending.cases[i].suffix = copy;
  }
  for (int i = 0; i < c->utility_per_step; i++) t->pending.utility[i] = utility[i];
  t->pending.held = true;
  return 0;
}

static int micro_batch_with(rg_trainer *t, int k, bool reset, update_sums *u, int *order, rg_r2d2_case *cases) {
  const rg_train_config *c = &t->cfg;
  if (reset) {
    const int n_reset = rg_pool_reset(&t->pool, t->m, c->reset_fraction, &t->rng);
    if (n_reset < 0) return -1;
    u->resets += n_reset;
  }
  /* cases_per_step entries in a random order (a partial Fisher-Yates) */
  for (int i = 0; i < t->pool.n; i++) order[i] = i;
  rg_pool_pick(&t->rng, order, t->pool.n, c->cases_per_step);
  for (int i = 0; i < c->cases_per_step; i++) cases[i] = pool_case(t, &t->pool.items[order[i]]);
  const rg_gcg_opts go = {.steps = c->gcg_steps, .search_width = c->search_width, .top_k = c->top_k, .shard = t->world};
  for (int i = 0; c->gcg_steps > 0 && i < c->cases_per_step; i++) {
    rg_gcg_opts o = go;
    o.seed = rg_splitmix64(&t->rng);
    rg_pool_entry *e = &t->pool.items[order[i]];
    if (rg_r2d2_refresh(&t->stepper, &cases[i], &o, &e->loss) < 0) return -1;
    u->gcg_loss += e->loss;
    u->gcg_cases++;
  }
  rg_fault_point("update"); /* tests: a kill inside an update, after its GCG */
  const rg_utility_example *utility[c->utility_per_step > 0 ? c->utility_per_step : 1];
  for (int i = 0; i < c->utility_per_step; i++)
    if (!(utility[i] = next_utility(t))) return rg_error_set("out of memory");
  if (t->pending.cases) { /* ZeRO-2: the round's micro-batches trained together, at its end */
    if (k % t->n_groups == t->group && hold(t, cases, utility) < 0) return -1;
    if (k % t->n_groups != t->n_groups - 1) return 0;
    if (!t->pending.held) return rg_error_set("ZeRO-2: no micro-batch of this rank in the round ending at %d", k);
    t->pending.held = false;
    return train_batch(t, t->pending.cases, t->pending.utility, u);
  }
  if (k % t->n_groups != t->group) return 0; /* another group's */
  return train_batch(t, cases, utility, u);
}

static int sum_over_groups(rg_comm *dp, update_sums *u) {
  double v[6] = {u->total, u->utility, u->away, u->toward, (double)u->tokens, (double)u->batches};
  if (rg_comm_allreduce_sum_f64(dp, v, 6) < 0) return rg_error_prefix("summing the groups' losses");
  *u = (update_sums){.total = v[0], .utility = v[1], .away = v[2], .toward = v[3], .tokens = (long)v[4], .batches = (int)v[5],
                     .gcg_loss = u->gcg_loss, .gcg_cases = u->gcg_cases, .resets = u->resets};
  return 0;
}

static double learning_rate(const rg_trainer *t) {
  const rg_train_config *c = &t->cfg;
  if (strcmp(c->schedule, "constant") == 0)
    return t->step < c->warmup ? c->lr * (double)(t->step + 1) / (double)c->warmup : c->lr;
  return rg_lr_cosine(c->lr, t->step, c->warmup, c->schedule_updates > 0 ? c->schedule_updates : c->updates);
}

static int one_update(rg_trainer *t, rg_progress *progress) {
  const rg_train_config *c = &t->cfg;
  const double t0 = rg_now_seconds();
  update_sums u = {0};
  rg_grads_zero(t->g);
  if (t->zero) rg_zero_begin(t->zero);
  /* HarmBench resets at the top of micro-step reset_every * grad_accum - 1
   * (ATU:872-878): the last micro-batch of every reset_every-th update */
  const bool reset_update = c->reset_every > 0 && (t->step + 1) % c->reset_every == 0;
  for (int k = 0; k < c->grad_accum; k++)
    if (micro_batch(t, k, reset_update && k == c->grad_accum - 1, &u) < 0) return -1;
  /* each rank's share of the update's gradient; the losses of each
   * group's micro-batches (which its ranks all hold) */
  const int stage = t->zero ? rg_zero_stage(t->zero) : 0;
  if (t->world && stage < 2 && rg_grads_allreduce(t->g, t->world_dev ? t->world_dev : t->world) < 0) return -1;
  if (stage == 2 && rg_zero_end_grads(t->zero) < 0) return -1;
  if (t->dp && sum_over_groups(t->dp, &u) < 0) return -1;
  const double lr = learning_rate(t);
  double norm = 0;
  if (rg_optimizer_step(t->opt, lr, c->clip, &norm) < 0) return -1;
  rg_fault_point("optimizer"); /* tests: a kill with the weights updated, nothing saved */
  t->step++;
  const double secs = rg_now_seconds() - t0, a = (double)c->grad_accum;
  const log_row r = {{[COL_STEP] = (double)t->step, [COL_LR] = lr, [COL_LOSS_TOTAL] = u.total / a,
                      [COL_LOSS_UTILITY] = u.utility / a, [COL_LOSS_AWAY] = u.away / a,
                      [COL_LOSS_TOWARD] = u.toward / a, [COL_GRAD_NORM] = norm,
                      [COL_GCG_LOSS] = u.gcg_cases ? u.gcg_loss / (double)u.gcg_cases : NAN,
                      [COL_POOL_RESETS] = u.resets, [COL_TOKENS_PER_S] = (double)u.tokens / secs,
                      [COL_SECONDS] = secs}};
  if (push_log(t, &r) < 0) return -1;
  t->isl_weight += strcmp(c->weighting, "tokens") == 0 ? (double)u.tokens : (double)u.batches;
  t->run_seconds += secs;
  t->run_updates++;
  /* every update's numbers with --verbose; otherwise the save steps' (the
   * rest is in train_log.csv) */
  if (progress->verbose || is_save_step(t, t->step))
    rg_progress_note(progress, "step %ld/%d  loss %.4f (utility %.4f away %.4f toward %.4f)  gcg %.3f  |g| %.3g  "
                               "lr %.3g  %.1fs",
                     t->step, c->updates, r.v[COL_LOSS_TOTAL], r.v[COL_LOSS_UTILITY], r.v[COL_LOSS_AWAY],
                     r.v[COL_LOSS_TOWARD], r.v[COL_GCG_LOSS], norm, lr, secs);
  return 0;
}

int rg_trainer_run(rg_trainer *t, FILE *progress) {
  const rg_train_config *c = &t->cfg;
  /* checkpoint-0, or the checkpoint of a save step whose state was written
   * just before a kill */
  const bool w = t->writer; /* the other ranks train and write nothing */
  if (w && progress && t->recompute_note[0]) fprintf(progress, "train: %s\n", t->recompute_note);
  if (w && is_save_step(t, t->step) && write_checkpoint(t) < 0) return -1;
  const long first = t->step;
  rg_progress prog;
  rg_progress_start(&prog, w ? progress : NULL, "train: updates", (int)(c->updates - first));
  while (t->step < c->updates) {
    if (t->isl) { /* an island trains until its updates are made or the run has ended */
      const int ended = island_run_ended(t);
      if (ended < 0) return -1;
      if (ended) break;
    }
    if (one_update(t, &prog) < 0) return -1;
    rg_progress_tick(&prog, (int)(t->step - first));
    if (w && write_log(t) < 0) return -1;
    /* state before checkpoint: a kill between them resumes at this step
     * and writes the missing checkpoint (write_checkpoint skips a whole one) */
    const bool save = is_save_step(t, t->step);
    if (t->isl) { /* states only at outer boundaries, where theta_global is known */
      if ((t->step % c->inner_steps == 0 || t->step == c->updates) && island_outer(t) < 0) return -1;
    } else if ((w || t->zero) && (save || t->step % c->state_every == 0 || t->step == c->updates) && save_state(t) < 0) {
      return -1; /* with ZeRO every rank writes its shard */
    }
    if (w && save && write_checkpoint(t) < 0) return -1; /* an island's last is written again by island_end */
  }
  rg_progress_end(&prog);
  return t->isl ? island_end(t, progress) : 0;
}
