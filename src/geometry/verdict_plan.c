/* verdict_plan.c: the pre-registered analysis plan: defaults, parsing,
 * canonical text, sha256 and pinning into the output directory. */
#include "geometry/verdict_plan.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

const char *const RG_VERDICT_PLAN_KEYS[] = {
    "refusal_score", "refusal_tokens", "refusal_string", "compliance_string",
    "auto_coverage", "reply_tokens", "prompt_filter", "n_min",     "kl_max",
    "induce_rule",    "induce_min",    "induce_frac_min", "layer_cap",   "prune_frac", "early",
    "late",           "max_val",       "layers",       "null_size",     "bootstrap", "score_auroc_min",
    "seed",           "transfer_layers", NULL};

rg_verdict_plan rg_verdict_plan_default(void) {
  rg_verdict_plan p = {.auto_coverage = 0.9,
                       .reply_tokens = 32,
                       .prompt_filter = true,
                       .n_min = 8,
                       .rules = rg_selection_rules_default(),
                       .bands = rg_depth_thresholds_default(),
                       .null_size = 16,
                       .bootstrap = 1000,
                       .score_auroc_min = 0.9,
                       .seed = 42};
  snprintf(p.refusal_score, sizeof p.refusal_score, "tokens");
  snprintf(p.refusal_tokens, sizeof p.refusal_tokens, "rd");
  snprintf(p.refusal_string, sizeof p.refusal_string, "auto");
  snprintf(p.compliance_string, sizeof p.compliance_string, "Sure, here's");
  return p;
}

static int parse_double(const char *v, double lo, double hi, const char *where, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno || !(x >= lo && x <= hi))
    return rg_error_set("%s: '%s' is not a number in [%g, %g]", where, v, lo, hi);
  *out = x;
  return 0;
}

static int parse_int(const char *v, long lo, long hi, const char *where, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno || x < lo || x > hi)
    return rg_error_set("%s: '%s' is not a whole number in [%ld, %ld]", where, v, lo, hi);
  *out = x;
  return 0;
}

static int parse_bool(const char *v, const char *where, bool *out) {
  if (strcmp(v, "true") == 0 || strcmp(v, "on") == 0 || strcmp(v, "1") == 0) *out = true;
  else if (strcmp(v, "false") == 0 || strcmp(v, "off") == 0 || strcmp(v, "0") == 0) *out = false;
  else return rg_error_set("%s: '%s' is not true or false", where, v);
  return 0;
}

int rg_verdict_plan_token_ids(const char *list, const char *where, int32_t *ids, int max_ids) {
  int n = 0;
  const char *p = list;
  do {
    char *end;
    errno = 0;
    long id = strtol(p, &end, 10);
    if (end == p || errno || id < 0 || id > INT32_MAX || (*end && *end != ','))
      return rg_error_set("%s: '%s' is not auto, rd or a comma-separated list of token ids", where, list);
    if (n == max_ids) return rg_error_set("%s: more than %d token ids", where, max_ids);
    ids[n++] = (int32_t)id;
    p = *end ? end + 1 : end;
  } while (*p);
  return n;
}

/* "auto", "rd" or ids "A,B,...": checked here so that a bad list fails
 * before anything runs. */
static int check_tokens(const char *v, const char *where) {
  int32_t ids[RG_PLAN_MAX_TOKENS];
  if (strcmp(v, "auto") == 0 || strcmp(v, "rd") == 0) return 0;
  return rg_verdict_plan_token_ids(v, where, ids, RG_PLAN_MAX_TOKENS) < 0 ? -1 : 0;
}

static int parse_layers(const char *v, const char *where, int *lo, int *hi) {
  if (strcmp(v, "all") == 0) {
    *lo = *hi = 0;
    return 0;
  }
  char *end;
  errno = 0;
  long a = strtol(v, &end, 10);
  if (end == v || *end != ':') return rg_error_set("%s: '%s' is not A:B or all", where, v);
  const char *q = end + 1;
  long b = strtol(q, &end, 10);
  if (end == q || *end || errno || a < 0 || b <= a || b > 1 << 20)
    return rg_error_set("%s: '%s' is not A:B with 0 <= A < B", where, v);
  *lo = (int)a;
  *hi = (int)b;
  return 0;
}

/* A text value into BUF[len]: not empty, and short enough to keep whole. */
static int set_text(char *buf, size_t len, const char *v, const char *where) {
  if (!*v) return rg_error_set("%s: empty", where);
  if (strlen(v) >= len) return rg_error_set("%s: '%s' is too long (%zu bytes at most)", where, v, len - 1);
  snprintf(buf, len, "%s", v);
  return 0;
}

int rg_verdict_plan_set(rg_verdict_plan *p, const char *key, const char *v, const char *where) {
  long n = 0;
  if (strcmp(key, "refusal_score") == 0) {
    if (strcmp(v, "tokens") != 0 && strcmp(v, "sequence") != 0)
      return rg_error_set("%s: unknown refusal score '%s' (tokens or sequence)", where, v);
    return set_text(p->refusal_score, sizeof p->refusal_score, v, where);
  }
  if (strcmp(key, "refusal_string") == 0) return set_text(p->refusal_string, sizeof p->refusal_string, v, where);
  if (strcmp(key, "compliance_string") == 0)
    return set_text(p->compliance_string, sizeof p->compliance_string, v, where);
  if (strcmp(key, "refusal_tokens") == 0) {
    if (check_tokens(v, where) < 0) return -1;
    if (strlen(v) >= sizeof p->refusal_tokens) return rg_error_set("%s: '%s' is too long", where, v);
    snprintf(p->refusal_tokens, sizeof p->refusal_tokens, "%s", v);
    return 0;
  }
  if (strcmp(key, "auto_coverage") == 0) return parse_double(v, 0.01, 1, where, &p->auto_coverage);
  if (strcmp(key, "reply_tokens") == 0) {
    if (parse_int(v, 1, 4096, where, &n) < 0) return -1;
    p->reply_tokens = (int)n;
    return 0;
  }
  if (strcmp(key, "prompt_filter") == 0) return parse_bool(v, where, &p->prompt_filter);
  if (strcmp(key, "transfer_layers") == 0) return parse_bool(v, where, &p->transfer_layers);
  if (strcmp(key, "n_min") == 0) {
    if (parse_int(v, 1, 1 << 20, where, &n) < 0) return -1;
    p->n_min = (int)n;
    return 0;
  }
  if (strcmp(key, "kl_max") == 0) {
    if (parse_double(v, 0, INFINITY, where, &p->rules.kl_max) < 0) return -1;
    return p->rules.kl_max > 0 ? 0 : rg_error_set("%s: the KL budget must be > 0, got %s", where, v);
  }
  if (strcmp(key, "induce_rule") == 0) {
    if (strcmp(v, "rd") == 0) p->rules.induce_rule = RG_INDUCE_RD;
    else if (strcmp(v, "normalized") == 0) p->rules.induce_rule = RG_INDUCE_NORMALIZED;
    else return rg_error_set("%s: '%s' is not rd or normalized", where, v);
    return 0;
  }
  if (strcmp(key, "induce_min") == 0) return parse_double(v, -INFINITY, INFINITY, where, &p->rules.induce_min);
  if (strcmp(key, "induce_frac_min") == 0) return parse_double(v, -INFINITY, INFINITY, where, &p->rules.induce_frac_min);
  if (strcmp(key, "layer_cap") == 0) return parse_bool(v, where, &p->rules.layer_cap);
  if (strcmp(key, "prune_frac") == 0) {
    if (parse_double(v, 0, 1, where, &p->rules.prune_frac) < 0) return -1;
    return p->rules.prune_frac < 1 ? 0 : rg_error_set("%s: prune_frac must be below 1, got %s", where, v);
  }
  if (strcmp(key, "early") == 0) return parse_double(v, 0, 1, where, &p->bands.early_below);
  if (strcmp(key, "late") == 0) return parse_double(v, 0, 1, where, &p->bands.late_from);
  if (strcmp(key, "max_val") == 0) {
    if (parse_int(v, 0, 1 << 20, where, &n) < 0) return -1;
    p->max_val = (int)n;
    return 0;
  }
  if (strcmp(key, "layers") == 0) return parse_layers(v, where, &p->layer_lo, &p->layer_hi);
  if (strcmp(key, "null_size") == 0) {
    if (parse_int(v, 0, 1 << 16, where, &n) < 0) return -1;
    p->null_size = (int)n;
    return 0;
  }
  if (strcmp(key, "bootstrap") == 0) {
    if (parse_int(v, 0, 1 << 20, where, &n) < 0) return -1;
    p->bootstrap = (int)n;
    return 0;
  }
  if (strcmp(key, "score_auroc_min") == 0) return parse_double(v, 0, 1, where, &p->score_auroc_min);
  if (strcmp(key, "seed") == 0) {
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') return rg_error_set("%s: '%s' is not a seed (a whole number >= 0)", where, v);
    p->seed = s;
    return 0;
  }
  return rg_error_set("%s: unknown key '%s'", where, key);
}

typedef struct {
  rg_verdict_plan *p;
  const char *path;
  int found;
  int failed;
} read_ctx;

static int on_key(void *user, const char *section, const char *key, const char *value) {
  read_ctx *c = user;
  if (strcmp(section, "verdict") != 0 || c->failed) return 1;
  c->found = 1;
  char where[512];
  snprintf(where, sizeof where, "%s [verdict] %s", c->path, key);
  if (rg_verdict_plan_set(c->p, key, value, where) < 0) c->failed = 1;
  return 1;
}

int rg_verdict_plan_read(rg_verdict_plan *p, const char *path) {
  read_ctx c = {.p = p, .path = path};
  int rc = ini_parse(path, on_key, &c);
  if (c.failed) return -1;
  if (rc < 0) return rg_error_set("%s: cannot open", path);
  if (rc > 0) return rg_error_set("%s: line %d does not parse as INI", path, rc);
  if (!c.found) return rg_error_set("%s: no [verdict] section", path);
  return 0;
}

int rg_verdict_plan_check(const rg_verdict_plan *p) {
  if (!(p->bands.early_below <= p->bands.late_from))
    return rg_error_set("plan: early (%g) must not be above late (%g)", p->bands.early_below, p->bands.late_from);
  return 0;
}

char *rg_verdict_plan_text(const rg_verdict_plan *p) {
  char layers[48];
  if (p->layer_hi > 0) snprintf(layers, sizeof layers, "%d:%d", p->layer_lo, p->layer_hi);
  else snprintf(layers, sizeof layers, "all");
  const char *fmt = "[verdict]\n"
                    "refusal_score = %s\n"
                    "refusal_tokens = %s\n"
                    "refusal_string = %s\n"
                    "compliance_string = %s\n"
                    "auto_coverage = %.17g\n"
                    "reply_tokens = %d\n"
                    "prompt_filter = %s\n"
                    "n_min = %d\n"
                    "kl_max = %.17g\n"
                    "induce_rule = %s\n"
                    "induce_min = %.17g\n"
                    "induce_frac_min = %.17g\n"
                    "layer_cap = %s\n"
                    "prune_frac = %.17g\n"
                    "early = %.17g\n"
                    "late = %.17g\n"
                    "max_val = %d\n"
                    "layers = %s\n"
                    "null_size = %d\n"
                    "bootstrap = %d\n"
                    "score_auroc_min = %.17g\n"
                    "seed = %llu\n"
                    "transfer_layers = %s\n";
#define PLAN_ARGS                                                                                                  \
  p->refusal_score, p->refusal_tokens, p->refusal_string, p->compliance_string, p->auto_coverage,                 \
      p->reply_tokens, p->prompt_filter ? "true" : "false", p->n_min,                                              \
      p->rules.kl_max, p->rules.induce_rule == RG_INDUCE_NORMALIZED ? "normalized" : "rd", p->rules.induce_min,    \
      p->rules.induce_frac_min, p->rules.layer_cap ? "true" : "false", p->rules.prune_frac, p->bands.early_below, \
      p->bands.late_from, p->max_val, layers, p->null_size, p->bootstrap, p->score_auroc_min, p->seed,                    \
      p->transfer_layers ? "true" : "false"
  int len = snprintf(NULL, 0, fmt, PLAN_ARGS);
  char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!s) {
    rg_error_set("plan: out of memory");
    return NULL;
  }
  snprintf(s, (size_t)len + 1, fmt, PLAN_ARGS);
#undef PLAN_ARGS
  return s;
}

static void hex_of(const uint8_t d[32], char hex[65]) {
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

int rg_verdict_plan_sha256(const rg_verdict_plan *p, char hex[65]) {
  char *text = rg_verdict_plan_text(p);
  if (!text) return -1;
  rg_sha256 s;
  uint8_t d[32];
  rg_sha256_init(&s);
  rg_sha256_update(&s, text, strlen(text));
  rg_sha256_final(&s, d);
  hex_of(d, hex);
  free(text);
  return 0;
}

int rg_verdict_plan_pin(const rg_verdict_plan *p, const char *out_dir, bool start_over) {
  char hex[65];
  char *text = rg_verdict_plan_text(p);
  char *ini = rg_path_join(out_dir, "plan.ini"), *sum = rg_path_join(out_dir, "plan.sha256");
  int rc = -1;
  if (!text || !ini || !sum || rg_verdict_plan_sha256(p, hex) < 0) {
    if (text) rg_error_set("plan: out of memory");
    goto end;
  }
  size_t len = 0;
  char *old = rg_path_exists(sum) ? rg_read_file(sum, &len) : NULL;
  if (old) {
    int same = len >= 64 && strncmp(old, hex, 64) == 0;
    if (!same && !start_over) {
      rg_error_set("%s: this directory was scored under another plan (sha256 %.12s..., now %.12s...); "
                   "--start-over discards its results",
                   sum, old, hex);
      free(old);
      goto end;
    }
    free(old);
  }
  char line[80];
  snprintf(line, sizeof line, "%s  plan.ini\n", hex);
  if (rg_write_file_atomic(ini, text, strlen(text)) < 0 || rg_write_file_atomic(sum, line, strlen(line)) < 0)
    goto end;
  rc = 0;
end:
  free(text);
  free(ini);
  free(sum);
  return rc;
}
