/* cmd_repro: does a measured ASR curve reproduce a published one?
 *
 * Each published point (a row with both a step and an ASR) is matched to the
 * measured row with the same step and attack. The point is reproduced when
 * the published ASR lies inside the measured 95% Wilson interval (--test
 * wilson, the default) or when the exact two-sided binomial test of "the
 * measured successes come from the published rate" gives p >= alpha (--test
 * binomial). The curve is reproduced when every point is.
 *
 * Exit codes: 0 reproduced, 1 not reproduced, 2 the comparison could not be
 * made (bad flags, malformed CSVs, a published step without a measured row,
 * an attack name one side lacks, ambiguous matches). When the published row
 * states n and it differs from the measured n, the test uses the measured n
 * (it is the sample actually judged) and a note says so.
 *
 * Two flags loosen the matching, and the output says when they did:
 * --measured-attack compares the measured rows of one attack with the
 * published rows of --attack (a different protocol, e.g. DirectRequest
 * against fixed-source prompts), and --common-steps skips published steps
 * that have no measured row instead of refusing to compare.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "harmbench/asr_curve.h"
#include "harmbench/asr_stats.h"
#include "util/error.h"

enum { EXIT_REPRODUCED = 0, EXIT_NOT_REPRODUCED = 1, EXIT_CANNOT_COMPARE = 2 };

typedef struct {
  const rg_published_point *pub;
  const rg_asr_point *meas;
  double wilson_lo, wilson_hi, binom_p;
  int reproduced;
} comparison;

static int cannot_compare(void) {
  cli_fail();
  return EXIT_CANNOT_COMPARE;
}

static int str_in(const char *s, const char *filter) { return !filter || strcmp(s, filter) == 0; }

/* Whether the measured curve (after --classifier) has rows for ATTACK. */
static int measured_has_attack(const rg_asr_curve *m, const char *attack, const char *classifier) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->items[i].attack, attack) == 0 && str_in(m->items[i].classifier, classifier)) return 1;
  return 0;
}

static int published_selected(const rg_published_point *p, const char *attack, const char *method,
                              const char *category) {
  return str_in(p->attack, attack) && str_in(p->method, method) && str_in(p->category, category);
}

/* Lists the distinct attack names of one side, for the error message. */
static void list_attacks(char *buf, size_t cap, const char *const *names, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && len < cap; i++) {
    int seen = 0;
    for (size_t j = 0; j < i; j++) seen |= strcmp(names[i], names[j]) == 0;
    if (!seen) len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", names[i]);
  }
}

static int unknown_attack(const char *attack, const char *side, const rg_published_curve *pub, const rg_asr_curve *m) {
  char have_pub[512], have_meas[512];
  const char **names = malloc((pub->n + m->n + 1) * sizeof *names);
  if (!names) return rg_error_set("out of memory");
  for (size_t i = 0; i < pub->n; i++) names[i] = pub->items[i].attack;
  list_attacks(have_pub, sizeof have_pub, names, pub->n);
  for (size_t i = 0; i < m->n; i++) names[i] = m->items[i].attack;
  list_attacks(have_meas, sizeof have_meas, names, m->n);
  free(names);
  return rg_error_set("unknown attack '%s' in the %s curve (published has: %s; measured has: %s)", attack, side,
                      have_pub, have_meas);
}

/* What selects and pairs the points. */
typedef struct {
  const char *attack;          /* published (and measured) attack, NULL = every measured one */
  const char *measured_attack; /* measured attack paired with `attack`, NULL = the same name */
  const char *classifier, *method, *category;
  bool common_steps; /* skip published steps without a measured row */
} match_rules;

/* Pairs every selected published point with its measured row. N_SKIPPED
 * counts the published steps that --common-steps left out. */
static int match_points(const rg_published_curve *pub, const rg_asr_curve *m, const match_rules *r, comparison *out,
                        size_t *n_out, size_t *n_untestable, size_t *n_skipped) {
  const char *attack = r->attack, *classifier = r->classifier;
  *n_out = *n_untestable = *n_skipped = 0;
  for (size_t i = 0; i < pub->n; i++) {
    const rg_published_point *p = &pub->items[i];
    if (!published_selected(p, attack, r->method, r->category)) continue;
    /* Without --attack the attacks compared are those the measured curve has. */
    if (!attack && !measured_has_attack(m, p->attack, classifier)) continue;
    if (!p->has_step || !p->has_asr) {
      (*n_untestable)++;
      continue;
    }
    for (size_t j = 0; j < *n_out; j++)
      if (out[j].pub->step == p->step && strcmp(out[j].pub->attack, p->attack) == 0)
        return rg_error_set("published rows %zu and %zu both give step %ld of attack %s (select one with "
                            "--method/--category)", out[j].pub->line, p->line, p->step, p->attack);
    const char *want = r->measured_attack ? r->measured_attack : p->attack;
    const rg_asr_point *hit = NULL;
    for (size_t j = 0; j < m->n; j++) {
      const rg_asr_point *q = &m->items[j];
      if (q->step != p->step || strcmp(q->attack, want) != 0 || !str_in(q->classifier, classifier)) continue;
      if (hit)
        return rg_error_set("measured rows %zu and %zu both give step %ld of attack %s (select one with "
                            "--classifier)", hit->line, q->line, p->step, want);
      hit = q;
    }
    if (!hit && r->common_steps) {
      (*n_skipped)++;
      continue;
    }
    if (!hit)
      return rg_error_set("missing step: published step %ld of attack %s (row %zu) has no measured row",
                          p->step, p->attack, p->line);
    out[(*n_out)++] = (comparison){.pub = p, .meas = hit};
  }
  return 0;
}

static void print_table(const comparison *c, size_t n, const char *test, double alpha, size_t n_untestable,
                        size_t n_skipped, const match_rules *r, int reproduced) {
  if (r->measured_attack)
    printf("note: measured attack %s compared with published attack %s (different protocols)\n", r->measured_attack,
           r->attack);
  if (n_skipped) printf("note: %zu published steps have no measured row and are skipped (--common-steps)\n", n_skipped);
  for (size_t i = 0; i < n; i++)
    if (c[i].pub->n > 0 && c[i].pub->n != c[i].meas->n)
      printf("note: step %ld %s: published n=%ld differs from measured n=%ld; the test uses the measured n\n",
             c[i].pub->step, c[i].pub->attack, c[i].pub->n, c[i].meas->n);
  if (n_untestable) printf("note: %zu published rows have no step or no ASR and are not tested\n", n_untestable);
  printf("%-6s %-14s %9s %9s %6s %9s  %-17s %9s  %s\n", "step", "attack", "published", "measured", "n", "successes",
         "wilson95", "p_binom", "verdict");
  for (size_t i = 0; i < n; i++) {
    const comparison *x = &c[i];
    char interval[32];
    snprintf(interval, sizeof interval, "[%.4f, %.4f]", x->wilson_lo, x->wilson_hi);
    printf("%-6ld %-14s %9.4f %9.4f %6ld %9ld  %-17s %9.3g  %s\n", x->pub->step, x->pub->attack, x->pub->asr,
           (double)x->meas->successes / (double)x->meas->n, x->meas->n, x->meas->successes, interval, x->binom_p,
           x->reproduced ? "reproduced" : "NOT reproduced");
  }
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) ok += (size_t)c[i].reproduced;
  if (strcmp(test, "wilson") == 0)
    printf("verdict: %s (%zu/%zu points; published ASR inside the measured 95%% Wilson interval)\n",
           reproduced ? "reproduced" : "NOT reproduced", ok, n);
  else
    printf("verdict: %s (%zu/%zu points; exact binomial test p >= %g)\n", reproduced ? "reproduced" : "NOT reproduced",
           ok, n, alpha);
}

static int print_json(const comparison *c, size_t n, const char *test, double alpha, size_t n_untestable,
                      size_t n_skipped, const match_rules *r, int reproduced) {
  cJSON *root = cJSON_CreateObject();
  cJSON *rows = cJSON_AddArrayToObject(root, "points");
  for (size_t i = 0; i < n; i++) {
    const comparison *x = &c[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(rows, o);
    cJSON_AddNumberToObject(o, "step", (double)x->pub->step);
    cJSON_AddStringToObject(o, "attack", x->pub->attack);
    cJSON_AddStringToObject(o, "measured_attack", x->meas->attack);
    cJSON_AddStringToObject(o, "source", x->pub->source);
    cJSON_AddNumberToObject(o, "published_asr", x->pub->asr);
    if (x->pub->n > 0) cJSON_AddNumberToObject(o, "published_n", (double)x->pub->n);
    cJSON_AddBoolToObject(o, "n_differs", x->pub->n > 0 && x->pub->n != x->meas->n);
    cJSON_AddNumberToObject(o, "n", (double)x->meas->n);
    cJSON_AddNumberToObject(o, "successes", (double)x->meas->successes);
    cJSON_AddNumberToObject(o, "asr", (double)x->meas->successes / (double)x->meas->n);
    cJSON_AddNumberToObject(o, "wilson95_lo", x->wilson_lo);
    cJSON_AddNumberToObject(o, "wilson95_hi", x->wilson_hi);
    cJSON_AddNumberToObject(o, "binom_p", x->binom_p);
    cJSON_AddBoolToObject(o, "reproduced", x->reproduced);
  }
  cJSON_AddStringToObject(root, "test", test);
  if (strcmp(test, "binomial") == 0) cJSON_AddNumberToObject(root, "alpha", alpha);
  cJSON_AddNumberToObject(root, "untestable_published_rows", (double)n_untestable);
  cJSON_AddNumberToObject(root, "skipped_published_steps", (double)n_skipped);
  cJSON_AddBoolToObject(root, "same_protocol", r->measured_attack == NULL);
  cJSON_AddBoolToObject(root, "reproduced", reproduced);
  return cli_print_json(root);
}

int cmd_repro(int argc, char **argv) {
  const char *published = NULL, *measured = NULL, *test = "wilson";
  match_rules r = {0};
  double alpha = 0.05;
  bool json = false;
  const cli_opt opts[] = {
      {"published", CLI_STRING, &published, "published curve CSV (data/published/*.csv)"},
      {"measured", CLI_STRING, &measured, "measured asr.csv (step,attack,classifier,n,successes,...)"},
      {"attack", CLI_STRING, &r.attack, "compare only this attack (default: every attack the measured curve has)"},
      {"measured-attack", CLI_STRING, &r.measured_attack,
       "compare the measured rows of this attack with the published --attack (a different protocol)"},
      {"common-steps", CLI_BOOL, &r.common_steps, "skip published steps that have no measured row"},
      {"classifier", CLI_STRING, &r.classifier, "use only measured rows of this classifier"},
      {"method", CLI_STRING, &r.method, "use only published rows of this method (e.g. R2D2)"},
      {"category", CLI_STRING, &r.category, "use only published rows of this category (e.g. all)"},
      {"test", CLI_STRING, &test, "wilson (published inside the measured 95% interval, default) or binomial"},
      {"alpha", CLI_FLOAT, &alpha, "significance level of --test binomial (default 0.05)"},
      {"json", CLI_BOOL, &json, "print the comparison as JSON"},
  };
  const char *pos[1];
  int n_pos;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "--published FILE --measured asr.csv [options]  (exit 0 reproduced, 1 not, 2 cannot compare)\n\nexample: refgeo repro --published data/published/lan2026_r2d2.csv --measured runs/r2d2/asr/asr.csv --method R2D2 --attack fixed_source",
                     pos, 0, &n_pos);
  if (rc == 1) return 0;
  if (rc != 0) return cannot_compare();
  if (!published || !measured) {
    rg_error_set("--published and --measured are required");
    return cannot_compare();
  }
  int binomial = strcmp(test, "binomial") == 0;
  if (!binomial && strcmp(test, "wilson") != 0) {
    rg_error_set("--test must be wilson or binomial, got '%s'", test);
    return cannot_compare();
  }
  if (r.measured_attack && !r.attack) {
    rg_error_set("--measured-attack needs --attack (the published attack it is compared with)");
    return cannot_compare();
  }
  if (!(alpha > 0.0 && alpha < 1.0) || (!binomial && alpha != 0.05)) {
    rg_error_set("--alpha must be in (0, 1) and applies to --test binomial only (Wilson is fixed at 95%%)");
    return cannot_compare();
  }

  rg_published_curve pub;
  rg_asr_curve meas;
  if (rg_published_read(published, &pub) != 0) return cannot_compare();
  if (rg_asr_curve_read(measured, &meas) != 0) {
    rg_published_free(&pub);
    return cannot_compare();
  }
  int exit_code = EXIT_CANNOT_COMPARE;
  comparison *cmp = calloc(pub.n ? pub.n : 1, sizeof *cmp);
  size_t n = 0, n_untestable = 0;
  if (!cmp) {
    rg_error_set("out of memory");
    goto done;
  }
  if (r.attack) {
    const char *measured_attack = r.measured_attack ? r.measured_attack : r.attack;
    int in_pub = 0;
    for (size_t i = 0; i < pub.n; i++) in_pub |= strcmp(pub.items[i].attack, r.attack) == 0;
    if (!in_pub) {
      unknown_attack(r.attack, "published", &pub, &meas);
      goto done;
    }
    if (!measured_has_attack(&meas, measured_attack, r.classifier)) {
      unknown_attack(measured_attack, "measured", &pub, &meas);
      goto done;
    }
  } else {
    for (size_t i = 0; i < meas.n; i++) {
      int in_pub = 0;
      for (size_t j = 0; j < pub.n; j++) in_pub |= strcmp(pub.items[j].attack, meas.items[i].attack) == 0;
      if (!in_pub && str_in(meas.items[i].classifier, r.classifier)) {
        unknown_attack(meas.items[i].attack, "published", &pub, &meas);
        goto done;
      }
    }
  }
  size_t n_skipped = 0;
  if (match_points(&pub, &meas, &r, cmp, &n, &n_untestable, &n_skipped) != 0) goto done;
  if (n == 0) {
    rg_error_set("no published point with a step and an ASR matches the selection%s",
                 n_skipped ? " (no published step has a measured row)" : "");
    goto done;
  }
  int all = 1;
  for (size_t i = 0; i < n; i++) {
    comparison *x = &cmp[i];
    rg_wilson_interval(x->meas->successes, x->meas->n, RG_Z95, &x->wilson_lo, &x->wilson_hi);
    x->binom_p = rg_binom_test_two_sided(x->meas->successes, x->meas->n, x->pub->asr);
    x->reproduced = binomial ? x->binom_p >= alpha : x->pub->asr >= x->wilson_lo && x->pub->asr <= x->wilson_hi;
    all &= x->reproduced;
  }
  if (json) {
    if (print_json(cmp, n, test, alpha, n_untestable, n_skipped, &r, all) != 0) goto done;
  } else {
    print_table(cmp, n, test, alpha, n_untestable, n_skipped, &r, all);
  }
  exit_code = all ? EXIT_REPRODUCED : EXIT_NOT_REPRODUCED;
done:
  if (exit_code == EXIT_CANNOT_COMPARE) cannot_compare();
  free(cmp);
  rg_published_free(&pub);
  rg_asr_curve_free(&meas);
  return exit_code;
}
