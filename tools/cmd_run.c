/* cmd_run: `refgeo run CONFIG.ini`: the whole job from one config.
 *
 * Stages, in this order, each one refgeo command run as a child process of
 * this one (the same binary): train -> capture -> geometry -> asr (one per
 * [asr] / [asr NAME] section) -> repro -> report. Every stage writes into
 * the run directory ([run] out):
 *   train     RUN/checkpoint-<step>/, RUN/train_log.csv, RUN/state/
 *   capture   RUN/acts.h5
 *   geometry  RUN/geometry/
 *   asr       RUN/asr/, RUN/asr-NAME/
 *   repro     RUN/repro.txt (its report; "not reproduced" is a result, not
 *             a failure)
 *   report    RUN/report.html (and a notebook with [report] notebook = true)
 * plus RUN/run.ini (the config as resolved), RUN/run.log (one line per
 * stage start and end) and RUN/stages/<stage>.done.
 *
 * A stage's .done file is written when it succeeds and holds its command
 * line and wall time. A stage is up to date, and skipped, when its .done
 * file holds the same command line, its output is there, and the file is
 * newer than the config and than every earlier stage's. Otherwise it runs;
 * train, capture and asr continue inside the work a killed run left (train
 * gets --resume once RUN/config.ini exists).
 *
 * Before any stage runs, each stage's flags are checked by the command
 * itself (REFGEO_CHECK_FLAGS, cli.h), so a key in the wrong section fails at
 * once, naming the config file and section, not hours later.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "geometry/verdict_plan.h"
#include "run_config.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/run_lock.h"
#include "util/sha256.h"

extern char **environ;

typedef enum { STAGE_TRAIN, STAGE_CAPTURE, STAGE_GEOMETRY, STAGE_ASR, STAGE_REPRO, STAGE_REPORT } stage_kind;
static const char *const STAGE_NAMES[] = {"train", "capture", "geometry", "asr", "repro", "report"};
enum { N_KINDS = 6, MAX_STAGES = 32, MAX_ARGS = 128 };

typedef struct {
  char name[64];           /* "train", "asr", "asr-xstest": names its .done file */
  stage_kind kind;
  const run_section *keys; /* the section whose keys become flags, or NULL */
  char *argv[MAX_ARGS];    /* refgeo CMD FLAGS..., NULL-terminated; owned */
  int argc;
  bool resume;             /* add --resume when running (not part of the command line compared) */
  char *output;            /* a path that exists once the stage's work is there */
  char *stdout_path;       /* NULL: the terminal's */
  bool ok_exit_1;          /* repro: exit 1 means "not reproduced" */
} stage;

typedef struct {
  run_config cfg;
  char *run_dir;
  const char *source_flag, *source; /* --run-dir RUN, or [run] run_dir / manifest / model */
  stage stages[MAX_STAGES];
  int n;
  int lock_fd; /* the run directory's lock (util/run_lock.h), shared with the stages; -1 before it is taken */
} plan;

static int add_arg(stage *s, const char *a) {
  if (s->argc + 1 >= MAX_ARGS) return rg_error_set("stage %s: too many flags", s->name);
  if (!(s->argv[s->argc] = strdup(a))) return rg_error_set("out of memory");
  s->argc++;
  return 0;
}

static int add_flag(stage *s, const char *flag, const char *value) {
  char f[128];
  snprintf(f, sizeof f, "--%s", flag);
  return add_arg(s, f) < 0 || (value && add_arg(s, value) < 0) ? -1 : 0;
}

/* VALUE with every "{out}" replaced by the run directory (malloc'd): a
 * stage can name what an earlier one wrote, e.g. `ablate =
 * {out}/geometry/directions.h5:step=0`. */
static char *expand_out(const char *value, const char *run_dir) {
  static const char MARK[] = "{out}";
  const size_t mark_len = sizeof MARK - 1;
  size_t n = 1;
  for (const char *q = value; *q;) {
    const bool at_mark = strncmp(q, MARK, mark_len) == 0;
    n += at_mark ? strlen(run_dir) : 1;
    q += at_mark ? mark_len : 1;
  }
  char *e = malloc(n), *w = e;
  if (!e) return NULL;
  for (const char *q = value; *q;) {
    if (strncmp(q, MARK, mark_len) == 0) {
      w = stpcpy(w, run_dir);
      q += mark_len;
    } else {
      *w++ = *q++;
    }
  }
  *w = '\0';
  return e;
}

/* The section's keys as flags: `max_val = 64` is --max-val 64, `x = true`
 * the switch --x, `x = false` nothing. */
static int add_section_flags(stage *s, const run_section *sec, const char *skip, const char *run_dir) {
  for (int k = 0; sec && k < sec->n_keys; k++) {
    const run_key *kv = &sec->keys[k];
    if (skip && strcmp(kv->key, skip) == 0) continue;
    char flag[128];
    snprintf(flag, sizeof flag, "%s", kv->key);
    for (char *p = flag; *p; p++)
      if (*p == '_') *p = '-';
    if (strcmp(kv->value, "false") == 0) continue;
    const bool is_switch = strcmp(kv->value, "true") == 0;
    char *value = is_switch ? NULL : expand_out(kv->value, run_dir);
    if (!is_switch && !value) return rg_error_set("out of memory");
    const int rc = add_flag(s, flag, value);
    free(value);
    if (rc < 0) return -1;
  }
  return 0;
}

static char *in_run(const plan *p, const char *name) { return rg_path_join(p->run_dir, name); }

static stage *new_stage(plan *p, stage_kind kind, const char *name, const run_section *keys) {
  if (p->n >= MAX_STAGES) {
    rg_error_set("too many stages");
    return NULL;
  }
  stage *s = &p->stages[p->n++];
  *s = (stage){.kind = kind, .keys = keys};
  snprintf(s->name, sizeof s->name, "%s", name);
  if (add_arg(s, STAGE_NAMES[kind]) < 0) return NULL;
  return s;
}

static int add_threads(stage *s, const plan *p) {
  const char *t = run_section_get(run_config_section(&p->cfg, "run"), "threads");
  return t ? add_flag(s, "threads", t) : 0;
}

static int add_source(stage *s, const plan *p) { return add_flag(s, p->source_flag, p->source); }

/* The asr stages' output folders: RUN/asr or RUN/asr-NAME. */
static char *asr_dir(const plan *p, const run_section *sec) {
  char name[80];
  snprintf(name, sizeof name, "asr%s%s", sec->name[3] ? "-" : "", sec->name[3] ? sec->name + 4 : "");
  return in_run(p, name);
}

static bool wanted(const char *stages, const char *name) {
  if (!stages) return true;
  size_t n = strlen(name);
  for (const char *q = stages; (q = strstr(q, name)); q += n)
    if ((q == stages || q[-1] == ' ' || q[-1] == ',') && (q[n] == '\0' || q[n] == ' ' || q[n] == ',')) return true;
  return false;
}

static int check_stage_names(const plan *p, const char *stages) {
  if (!stages) return 0;
  char *copy = strdup(stages);
  if (!copy) return rg_error_set("out of memory");
  int rc = 0;
  for (char *save = NULL, *tok = strtok_r(copy, " ,", &save); tok && rc == 0; tok = strtok_r(NULL, " ,", &save)) {
    int k = 0;
    while (k < N_KINDS && strcmp(tok, STAGE_NAMES[k]) != 0) k++;
    if (k == N_KINDS)
      rc = rg_error_set("%s: [run] stages: unknown stage '%s' (train capture geometry asr repro report)", p->cfg.path,
                        tok);
  }
  free(copy);
  return rc;
}

/* Each stage's command line. The helpers return 0, or -1 with the error set. */

static int plan_train(plan *p, const char *train_config) {
  stage *s = new_stage(p, STAGE_TRAIN, "train", run_config_section(&p->cfg, "train"));
  if (!s || add_flag(s, "config", train_config) < 0 || add_flag(s, "out", p->run_dir) < 0 || add_threads(s, p) < 0 ||
      add_section_flags(s, s->keys, NULL, p->run_dir) < 0)
    return -1;
  s->resume = true;
  return (s->output = in_run(p, "train_log.csv")) ? 0 : rg_error_set("out of memory");
}

static int plan_capture(plan *p, const char *acts) {
  stage *s = new_stage(p, STAGE_CAPTURE, "capture", run_config_section(&p->cfg, "capture"));
  if (!s || add_source(s, p) < 0 || add_flag(s, "out", acts) < 0 || add_threads(s, p) < 0 ||
      add_section_flags(s, s->keys, NULL, p->run_dir) < 0)
    return -1;
  return (s->output = strdup(acts)) ? 0 : rg_error_set("out of memory");
}

/* Every key of the [verdict] section V read into a plan and the plan
 * checked as a whole, so that a bad key or value stops the run before its
 * first stage, not when geometry starts hours later. */
static int check_verdict(const run_config *cfg, const run_section *v) {
  rg_verdict_plan vp = rg_verdict_plan_default();
  for (int i = 0; i < v->n_keys; i++) {
    char where[1100];
    snprintf(where, sizeof where, "%s:%d [verdict] %s", cfg->path, v->keys[i].line, v->keys[i].key);
    if (rg_verdict_plan_set(&vp, v->keys[i].key, v->keys[i].value, where) < 0) return -1;
  }
  return rg_verdict_plan_check(&vp) < 0 ? rg_error_prefix("%s [verdict]", cfg->path) : 0;
}

/* A [verdict] section is the analysis plan: geometry reads it from
 * RUN/run.ini, the config as resolved (--set included). */
static int plan_geometry(plan *p, const char *acts, const char *geo) {
  stage *s = new_stage(p, STAGE_GEOMETRY, "geometry", run_config_section(&p->cfg, "geometry"));
  if (!s || add_flag(s, "acts", acts) < 0 || add_source(s, p) < 0 || add_flag(s, "out", geo) < 0 ||
      add_threads(s, p) < 0 || add_section_flags(s, s->keys, NULL, p->run_dir) < 0)
    return -1;
  const run_section *verdict = run_config_section(&p->cfg, "verdict");
  if (verdict) {
    if (check_verdict(&p->cfg, verdict) < 0) return -1;
    char *resolved = in_run(p, "run.ini");
    int rc = resolved ? add_flag(s, "plan-file", resolved) : rg_error_set("out of memory");
    free(resolved);
    if (rc < 0) return -1;
  }
  return (s->output = rg_path_join(geo, "migration.csv")) ? 0 : rg_error_set("out of memory");
}

/* One asr stage per [asr] / [asr NAME] section: ASR of behaviors (asr.csv)
 * or, with `prompts`, refusal rates (refusal_rates.csv). */
static int plan_asr(plan *p, const run_section *sec) {
  char *dir = asr_dir(p, sec);
  const char *slash = dir ? strrchr(dir, '/') : NULL;
  stage *s = dir ? new_stage(p, STAGE_ASR, slash ? slash + 1 : dir, sec) : NULL;
  int rc = s && add_source(s, p) == 0 && add_flag(s, "out", dir) == 0 && add_threads(s, p) == 0 &&
                   add_section_flags(s, sec, NULL, p->run_dir) == 0
               ? 0
               : -1;
  if (rc == 0 &&
      !(s->output = rg_path_join(dir, run_section_get(sec, "prompts") ? "refusal_rates.csv" : "asr.csv")))
    rc = rg_error_set("out of memory");
  free(dir);
  return rc;
}

/* repro compares the asr.csv of the section its `asr` key names (default
 * [asr]); its report goes to RUN/repro.txt. */
static int plan_repro(plan *p, const run_section *repro) {
  const char *which = run_section_get(repro, "asr");
  char section[80];
  snprintf(section, sizeof section, "asr%s%s", which ? " " : "", which ? which : "");
  const run_section *asr = run_config_section(&p->cfg, section);
  if (!asr) return rg_error_set("%s: [repro] compares [%s], which the config does not have", p->cfg.path, section);
  char *dir = asr_dir(p, asr), *measured = dir ? rg_path_join(dir, "asr.csv") : NULL;
  stage *s = measured ? new_stage(p, STAGE_REPRO, "repro", repro) : NULL;
  int rc =
      s && add_flag(s, "measured", measured) == 0 && add_section_flags(s, repro, "asr", p->run_dir) == 0 ? 0 : -1;
  free(dir);
  free(measured);
  if (rc < 0) return -1;
  s->ok_exit_1 = true;
  if (!(s->stdout_path = in_run(p, "repro.txt")) || !(s->output = strdup(s->stdout_path)))
    return rg_error_set("out of memory");
  return 0;
}

static int plan_report(plan *p, const char *geo, bool with_geometry) {
  const run_section *report = run_config_section(&p->cfg, "report");
  stage *s = new_stage(p, STAGE_REPORT, "report", report);
  if (!s || add_arg(s, p->run_dir) < 0) return -1;
  for (int i = 0; i < p->cfg.n_sections; i++) {
    const run_section *sec = &p->cfg.sections[i];
    if (strncmp(sec->name, "asr", 3) != 0) continue;
    char *dir = asr_dir(p, sec);
    int rc = dir ? add_flag(s, run_section_get(sec, "prompts") ? "overrefusal" : "asr", dir)
                 : rg_error_set("out of memory");
    free(dir);
    if (rc < 0) return -1;
  }
  if ((with_geometry && add_flag(s, "geometry", geo) < 0) || add_section_flags(s, report, NULL, p->run_dir) < 0)
    return -1;
  return (s->output = in_run(p, "report.html")) ? 0 : rg_error_set("out of memory");
}

static int build_plan(plan *p) {
  const run_section *run = run_config_section(&p->cfg, "run");
  const char *out = run_section_get(run, "out"), *stages = run_section_get(run, "stages");
  const char *train_config = run_section_get(run, "train_config");
  if (!out) return rg_error_set("%s: [run] out (the run directory) is required", p->cfg.path);
  if (!(p->run_dir = strdup(out))) return rg_error_set("out of memory");
  if (check_stage_names(p, stages) < 0) return -1;
  if (stages && wanted(stages, "train") && !train_config)
    return rg_error_set("%s: the train stage needs [run] train_config", p->cfg.path);
  const bool do_train = train_config && wanted(stages, "train");
  p->source_flag = "run-dir", p->source = p->run_dir;
  if (!do_train) { /* analyse checkpoints made elsewhere */
    static const char *const sources[] = {"run_dir", "manifest", "model"};
    static const char *const flags[] = {"run-dir", "manifest", "model"};
    p->source = NULL;
    for (int k = 0; k < 3 && !p->source; k++)
      if ((p->source = run_section_get(run, sources[k]))) p->source_flag = flags[k];
    if (!p->source)
      return rg_error_set("%s: [run] needs train_config (to train) or run_dir, manifest or model (to analyse)",
                          p->cfg.path);
  }
  char *acts = in_run(p, "acts.h5"), *geo = in_run(p, "geometry");
  int rc = acts && geo ? 0 : rg_error_set("out of memory");
  if (rc == 0 && do_train) rc = plan_train(p, train_config);
  if (rc == 0 && wanted(stages, "capture")) rc = plan_capture(p, acts);
  if (rc == 0 && wanted(stages, "geometry")) rc = plan_geometry(p, acts, geo);
  for (int i = 0; rc == 0 && wanted(stages, "asr") && i < p->cfg.n_sections; i++)
    if (strncmp(p->cfg.sections[i].name, "asr", 3) == 0) rc = plan_asr(p, &p->cfg.sections[i]);
  const run_section *repro = run_config_section(&p->cfg, "repro");
  if (rc == 0 && repro && wanted(stages, "repro")) rc = plan_repro(p, repro);
  if (rc == 0 && wanted(stages, "report")) rc = plan_report(p, geo, wanted(stages, "geometry") || rg_is_dir(geo));
  free(acts);
  free(geo);
  return rc;
}

static void plan_free(plan *p) {
  for (int i = 0; i < p->n; i++) {
    for (int a = 0; a < p->stages[i].argc; a++) free(p->stages[i].argv[a]);
    free(p->stages[i].output);
    free(p->stages[i].stdout_path);
  }
  free(p->run_dir);
  run_config_free(&p->cfg);
}

/* ------------------------------------------------------------ markers */

static char *marker_path(const plan *p, const stage *s) {
  char name[96];
  snprintf(name, sizeof name, "stages/%s.done", s->name);
  return in_run(p, name);
}

/* The command line as the .done file stores it: one argument per line. */
static char *command_text(const stage *s) {
  size_t len = 1;
  for (int a = 0; a < s->argc; a++) len += strlen(s->argv[a]) + 1;
  char *t = malloc(len), *q = t;
  if (!t) return NULL;
  for (int a = 0; a < s->argc; a++) q += sprintf(q, "%s\n", s->argv[a]);
  *q = '\0';
  return t;
}

static double mtime_of(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

/* The body of a .done file: after "seconds S" and the optional "sha256 HEX"
 * line of the stage's output (NULL when TEXT has no first line). *SUM
 * gets the digest, or "" when the file has none (one of an older refgeo). */
static const char *marker_body(const char *text, char sum[65]) {
  sum[0] = '\0';
  const char *body = strchr(text, '\n');
  if (body && strncmp(body + 1, "sha256 ", 7) == 0 && strlen(body + 1) > 7 + 64 && body[8 + 64] == '\n') {
    memcpy(sum, body + 8, 64), sum[64] = '\0';
    body += 8 + 64;
  }
  return body ? body + 1 : NULL;
}

/* Whether stage I is up to date; *LAST_SECONDS gets its recorded wall time
 * (-1 when it never ran). NEWER_THAN: the config's and every earlier
 * stage's .done time. An up-to-date stage's output is what the stage
 * wrote: its sha256 is the one its .done file records, or the run stops
 * here (*DAMAGED true, the error set naming the file), before a later
 * stage reads it. */
static bool up_to_date(const plan *p, int i, double newer_than, double *last_seconds, bool *damaged) {
  const stage *s = &p->stages[i];
  *last_seconds = -1;
  *damaged = false;
  char *path = marker_path(p, s), *text = path ? rg_read_file(path, NULL) : NULL, *want = command_text(s);
  bool ok = false;
  char sum[65] = "", hex[65] = "";
  if (text && want) {
    const char *body = marker_body(text, sum);
    sscanf(text, "seconds %lf", last_seconds);
    ok = body && strcmp(body, want) == 0 && rg_path_exists(s->output) && mtime_of(path) >= newer_than;
  }
  rg_error_clear();
  if (ok && sum[0] && (rg_sha256_file(s->output, hex) < 0 || strcmp(hex, sum) != 0)) {
    if (hex[0])
      rg_error_set("%s: sha256 %.12s... differs from %.12s... in %s: the file changed after stage %s wrote it "
                   "(remove %s to run the stage again)",
                   s->output, hex, sum, path, s->name, path);
    *damaged = true;
    ok = false;
  }
  free(path);
  free(text);
  free(want);
  return ok;
}

static int write_marker(const plan *p, const stage *s, double seconds) {
  char *path = marker_path(p, s), *cmd = command_text(s);
  char *text = cmd ? malloc(strlen(cmd) + 160) : NULL, hex[65] = "";
  int rc = path && text ? 0 : rg_error_set("out of memory");
  /* the output's digest, checked before a later run trusts it */
  if (rc == 0 && !rg_is_dir(s->output)) rc = rg_sha256_file(s->output, hex);
  if (rc == 0) {
    int n = sprintf(text, "seconds %.1f\n", seconds);
    if (hex[0]) n += sprintf(text + n, "sha256 %s\n", hex);
    strcpy(text + n, cmd);
    rc = rg_write_file_atomic(path, text, strlen(text));
  }
  free(path);
  free(cmd);
  free(text);
  return rc;
}

/* ------------------------------------------------------------ running */

/* One line of RUN/run.log: a UTC time stamp, the stage and what happened. */
static void log_line(FILE *log, const char *stage_name, const char *what) {
  if (!log) return;
  char stamp[32];
  time_t t = time(NULL);
  struct tm utc;
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &utc));
  fprintf(log, "%s %s: %s\n", stamp, stage_name, what);
  fflush(log);
}

/* How a child ended, from spawn_refgeo's code: "exit 2", "killed by
 * signal 9 (Killed)". */
static void describe_end(int code, char *out, size_t len) {
  if (code >= 256) snprintf(out, len, "killed by signal %d (%s)", code - 256, strsignal(code - 256));
  else snprintf(out, len, "exit %d", code);
}

/* Runs refgeo ARGV (this binary) and waits. ERR_PATH: stderr into that file
 * (the flag check reads it back); OUT_PATH: stdout into that file. The
 * child dies with this process (REFGEO_STAGE_PARENT, cli.h) and holds the
 * run directory's lock with it (LOCK_FD >= 0: the lock file names both
 * while it runs). Returns the exit code, 256 + N for signal N, or -1 with
 * the error set. */
static int spawn_refgeo(char *const *argv, const char *out_path, const char *err_path, int lock_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_path) posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (err_path) posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char *args[MAX_ARGS + 2];
  args[0] = "refgeo";
  int n = 0;
  while (argv[n]) args[n + 1] = argv[n], n++;
  args[n + 1] = NULL;
  char parent[24];
  snprintf(parent, sizeof parent, "%ld", (long)getpid());
  if (setenv("REFGEO_STAGE_PARENT", parent, 1) != 0) return rg_error_set("out of memory");
  pid_t pid;
  fflush(NULL);
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  unsetenv("REFGEO_STAGE_PARENT");
  if (rc != 0) return rg_error_set("cannot start refgeo %s: %s", argv[0], strerror(rc));
  if (lock_fd >= 0) {
    char holder[96];
    snprintf(holder, sizeof holder, "%ld (refgeo run; its stage %s is pid %ld)\n", (long)getpid(), argv[0], (long)pid);
    rg_run_lock_note(lock_fd, holder);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return rg_error_set("waiting for refgeo %s: %s", argv[0], strerror(errno));
  if (lock_fd >= 0) rg_run_lock_claim(lock_fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
}

/* Every stage's flags, checked by its own command: the first that does not
 * check is one error line naming the config file and section. */
static int check_flags(const plan *p, const char *tmp_dir) {
  char name[64];
  snprintf(name, sizeof name, "refgeo-run-check-%ld.err", (long)getpid());
  char *err_path = rg_path_join(tmp_dir, name);
  if (!err_path) return rg_error_set("out of memory");
  setenv("REFGEO_CHECK_FLAGS", "1", 1);
  int rc = 0;
  for (int i = 0; i < p->n && rc == 0; i++) {
    const stage *s = &p->stages[i];
    int code = spawn_refgeo(s->argv, "/dev/null", err_path, -1);
    if (code == 0) continue;
    char *msg = code > 0 ? rg_read_file(err_path, NULL) : NULL;
    const char *text = msg ? msg : "";
    const char *colon = strstr(text, ": "); /* drop "refgeo CMD: " */
    if (colon && strncmp(text, "refgeo ", 7) == 0) text = colon + 2;
    size_t len = strcspn(text, "\n");
    char ended[160];
    if (code > 0 && len == 0) { /* it died before it could say why */
      char how[96];
      describe_end(code, how, sizeof how);
      snprintf(ended, sizeof ended, "refgeo %s %s while checking its flags, with no message", s->argv[0], how);
      text = ended, len = strlen(ended);
    }
    rc = code < 0 ? -1
                  : rg_error_set("%s [%s]: %.*s", p->cfg.path, s->keys ? s->keys->name : s->name, (int)len, text);
    free(msg);
  }
  unsetenv("REFGEO_CHECK_FLAGS");
  unlink(err_path);
  free(err_path);
  return rc;
}

static void print_command(FILE *fp, const stage *s) {
  fputs("    refgeo", fp);
  for (int a = 0; a < s->argc; a++) fprintf(fp, strpbrk(s->argv[a], " '\"") ? " '%s'" : " %s", s->argv[a]);
  fputc('\n', fp);
}

/* The run ends with the carrier verdict in words (geometry/verdict.txt),
 * when the geometry stage wrote one. */
static void print_verdict(const plan *p) {
  char *path = in_run(p, "geometry/verdict.txt");
  char *text = path && rg_path_exists(path) ? rg_read_file(path, NULL) : NULL;
  if (text) fprintf(stderr, "run: %s", text);
  free(text);
  free(path);
}

static int run_stages(const plan *p, bool dry_run) {
  char *log_path = in_run(p, "run.log");
  FILE *log = NULL;
  if (!dry_run && (!log_path || !(log = fopen(log_path, "a")))) {
    free(log_path);
    return rg_error_set("%s/run.log: cannot append: %s", p->run_dir, strerror(errno));
  }
  free(log_path);
  double newer_than = mtime_of(p->cfg.path);
  int rc = 0, n_ran = 0;
  for (int i = 0; i < p->n && rc == 0; i++) {
    const stage *s = &p->stages[i];
    double last;
    bool damaged;
    bool fresh = up_to_date(p, i, newer_than, &last, &damaged);
    if (damaged) {
      rc = -1;
      break;
    }
    if (dry_run) {
      if (fresh) printf("%-12s up to date (took %.0f s)\n", s->name, last);
      else if (last >= 0) printf("%-12s to run (last run took %.0f s)\n", s->name, last);
      else printf("%-12s to run (never run: no time estimate)\n", s->name);
      print_command(stdout, s);
      continue;
    }
    if (fresh) {
      fprintf(stderr, "run: [%d/%d] %s: up to date, skipped\n", i + 1, p->n, s->name);
      char *m = marker_path(p, s);
      double t = m ? mtime_of(m) : -1;
      free(m);
      if (t > newer_than) newer_than = t;
      continue;
    }
    fprintf(stderr, "run: [%d/%d] %s: running\n", i + 1, p->n, s->name);
    log_line(log, s->name, "started");
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (int a = 0; a < s->argc; a++) argv[argc++] = s->argv[a];
    char *config_ini = rg_path_join(p->run_dir, "config.ini");
    if (s->resume && config_ini && rg_path_exists(config_ini)) argv[argc++] = "--resume";
    free(config_ini);
    argv[argc] = NULL;
    double t0 = rg_now_seconds();
    int code = spawn_refgeo(argv, s->stdout_path, NULL, p->lock_fd);
    double seconds = rg_now_seconds() - t0;
    if (code < 0 || (code != 0 && !(code == 1 && s->ok_exit_1))) {
      log_line(log, s->name, "failed");
      char how[96];
      describe_end(code, how, sizeof how);
      rc = code < 0 ? -1 : rg_error_set("stage %s failed (%s); rerun the same command to continue", s->name, how);
      break;
    }
    if (write_marker(p, s, seconds) < 0) rc = -1;
    char *m = marker_path(p, s);
    double t = m ? mtime_of(m) : -1;
    free(m);
    if (t > newer_than) newer_than = t;
    char done[48];
    snprintf(done, sizeof done, "done in %.1f s", seconds);
    log_line(log, s->name, done);
    fprintf(stderr, "run: [%d/%d] %s: done in %.1f s\n", i + 1, p->n, s->name, seconds);
    n_ran++;
  }
  if (rc == 0 && !dry_run && n_ran == 0)
    fprintf(stderr, "run: every stage is up to date in %s: nothing to do\n", p->run_dir);
  if (rc == 0 && !dry_run) print_verdict(p);
  if (log) fclose(log);
  return rc;
}

/* RUN/run.ini: the config with its values as resolved. */
static int write_resolved(const plan *p) {
  char *path = in_run(p, "run.ini");
  rg_atomic_file f;
  int rc = path ? rg_atomic_open(&f, path) : rg_error_set("out of memory");
  if (rc == 0) {
    fprintf(f.fp, "# refgeo run: %s as resolved\n", p->cfg.path);
    for (int i = 0; i < p->cfg.n_sections; i++) {
      const run_section *sec = &p->cfg.sections[i];
      fprintf(f.fp, "%s[%s]\n", i ? "\n" : "", sec->name);
      for (int k = 0; k < sec->n_keys; k++) fprintf(f.fp, "%s = %s\n", sec->keys[k].key, sec->keys[k].value);
    }
    rc = rg_atomic_commit(&f);
  }
  free(path);
  return rc;
}

int cmd_run(int argc, char **argv) {
  bool dry_run = false;
  cli_list sets = {0};
  const cli_opt opts[] = {
      {"dry-run", CLI_BOOL, &dry_run, "print the stages, which are up to date, and the last time each took"},
      {"set", CLI_MULTI, &sets, "SECTION.KEY=VALUE over the config (repeatable), e.g. --set train.updates=10"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "CONFIG.ini [--dry-run] [--set SECTION.KEY=VALUE ...]\n\nexample: refgeo run data/demo.ini "
                     "--set train.updates=10",
                     pos, 1, &n_pos);
  if (rc == 0 && n_pos != 1) rc = rg_error_set("give the config: refgeo run CONFIG.ini");
  if (rc != 0) {
    cli_list_free(&sets);
    return rc > 0 ? 0 : cli_fail();
  }
  plan p = {.lock_fd = -1};
  rc = run_config_read(&p.cfg, pos[0]);
  for (int i = 0; rc == 0 && i < sets.n; i++) rc = run_config_override(&p.cfg, sets.items[i]);
  cli_list_free(&sets);
  if (rc == 0) rc = build_plan(&p);
  const char *tmp = getenv("TMPDIR");
  if (rc == 0) rc = check_flags(&p, tmp && *tmp ? tmp : "/tmp"); /* before anything is written */
  char *stages_dir = rc == 0 && !dry_run ? in_run(&p, "stages") : NULL;
  if (rc == 0 && !dry_run) rc = stages_dir ? rg_mkdir_p(stages_dir) : rg_error_set("out of memory");
  /* one writer of the run directory: this process and its stages; then
   * the temp files of killed writers go (the stages' own folders too) */
  if (rc == 0 && !dry_run && ((p.lock_fd = rg_run_lock(p.run_dir)) < 0 || rg_run_lock_share(p.lock_fd) < 0)) rc = -1;
  if (rc == 0 && !dry_run) rc = rg_remove_stale_temps(p.run_dir, 2, NULL);
  if (rc == 0 && !dry_run) rc = write_resolved(&p);
  if (rc == 0) rc = run_stages(&p, dry_run);
  free(stages_dir);
  plan_free(&p);
  return rc == 0 ? 0 : cli_fail();
}
