/* verdict.c: migration / no migration / undetermined from per-step
 * carriers, and Lan et al.'s findings checked claim by claim. */
#include "geometry/verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *rg_step_status_name(rg_step_status s) {
  switch (s) {
    case RG_STEP_CARRIER: return "carrier";
    case RG_STEP_BELOW_NULL: return "nothing beats the null";
    case RG_STEP_NONE_ADMISSIBLE: return "none admissible";
    case RG_STEP_NO_REFUSAL: return "no refusal to carry";
  }
  return "?";
}

static const char *band_of(const rg_verdict_step *s, int n_layers, const rg_depth_thresholds *b) {
  return rg_depth_label((double)s->layer / n_layers, b);
}

/* Closed intervals [lo, hi] of layers; NaN bounds (no interval) overlap everything. */
static int overlap(const rg_verdict_step *a, const rg_verdict_step *b) {
  if (isnan(a->layer_lo) || isnan(a->layer_hi) || isnan(b->layer_lo) || isnan(b->layer_hi)) return 1;
  return !(a->layer_hi < b->layer_lo || b->layer_hi < a->layer_lo);
}

/* "a carrier at C of N steps (step 0: no refusal to carry; step 4: none
 * admissible): a move needs two", each step without a carrier named with
 * its status (cut with "..." where the buffer ends). */
static void undetermined_by_step(const rg_verdict_step *s, int n, int carriers, char *buf, size_t len) {
  int at = snprintf(buf, len, "a carrier at %d of %d steps (", carriers, n);
  for (int i = 0, first = 1; i < n && at < (int)len; i++) {
    if (s[i].status == RG_STEP_CARRIER) continue;
    at += snprintf(buf + at, len - (size_t)at, "%sstep %ld: %s", first ? "" : "; ", s[i].step,
                   rg_step_status_name(s[i].status));
    first = 0;
  }
  if (at < (int)len) snprintf(buf + at, len - (size_t)at, "): a move needs two");
  else if (len > 4) memcpy(buf + len - 4, "...", 4);
}

void rg_verdict_decide(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *bands,
                       rg_verdict *out) {
  *out = (rg_verdict){.verdict = "undetermined", .from_step = -1, .to_step = -1, .from_band = "", .to_band = ""};
  int count[4] = {0}, ref = -1;
  for (int i = 0; i < n; i++) {
    count[s[i].status]++;
    if (ref < 0 && s[i].status == RG_STEP_CARRIER) ref = i;
  }
  if (count[RG_STEP_CARRIER] < 2) {
    if (count[RG_STEP_NO_REFUSAL] == n)
      snprintf(out->reason, sizeof out->reason, "no refusal to carry at any of the %d steps", n);
    else
      undetermined_by_step(s, n, count[RG_STEP_CARRIER], out->reason, sizeof out->reason);
    if (ref >= 0) out->from_step = s[ref].step;
    return;
  }
  const rg_verdict_step *r = &s[ref];
  const char *rb = band_of(r, n_layers, bands);
  out->from_step = r->step;
  out->from_band = rb;
  int overlapping = -1, other_move = -1;
  for (int i = ref + 1; i < n; i++) {
    if (s[i].status != RG_STEP_CARRIER) continue;
    const char *b = band_of(&s[i], n_layers, bands);
    if (strcmp(b, rb) == 0) continue;
    if (overlap(r, &s[i])) {
      if (overlapping < 0) overlapping = i;
      continue;
    }
    if (strcmp(rb, "late") == 0 && strcmp(b, "early") == 0) {
      out->verdict = "migration";
      out->to_step = s[i].step;
      out->to_band = b;
      snprintf(out->reason, sizeof out->reason,
               "the carrier moved from layer %d (late, 95%% interval %g-%g) at step %ld to layer %d (early, %g-%g) "
               "at step %ld",
               r->layer, r->layer_lo, r->layer_hi, r->step, s[i].layer, s[i].layer_lo, s[i].layer_hi, s[i].step);
      return;
    }
    if (other_move < 0) other_move = i;
  }
  if (overlapping >= 0) {
    const rg_verdict_step *o = &s[overlapping];
    out->verdict = "undetermined";
    out->to_step = o->step;
    out->to_band = band_of(o, n_layers, bands);
    snprintf(out->reason, sizeof out->reason,
             "intervals overlap: step %ld's carrier at layer %d (%s, %g-%g) against step %ld's at layer %d (%s, "
             "%g-%g)",
             r->step, r->layer, rb, r->layer_lo, r->layer_hi, o->step, o->layer, out->to_band, o->layer_lo,
             o->layer_hi);
    return;
  }
  out->verdict = "no migration";
  if (other_move >= 0) {
    const rg_verdict_step *o = &s[other_move];
    out->to_step = o->step;
    out->to_band = band_of(o, n_layers, bands);
    snprintf(out->reason, sizeof out->reason,
             "the carrier moved from the %s band (layer %d, step %ld) to the %s band (layer %d, step %ld), not from "
             "late to early",
             rb, r->layer, r->step, out->to_band, o->layer, o->step);
  } else {
    snprintf(out->reason, sizeof out->reason, "every carrier (%d steps) stays in the %s band of step %ld's (layer %d)",
             count[RG_STEP_CARRIER], rb, r->step, r->layer);
  }
}

void rg_lan_claims_check(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *bands,
                         const rg_verdict *v, rg_lan_claim *out) {
  long last = n > 0 ? s[n - 1].step : -1;
  /* 1. a late-layer carrier through step 100 */
  rg_lan_claim *c = &out[0];
  *c = (rg_lan_claim){.claim = "a late-layer admissible carrier is kept through step 100"};
  int early_n = 0, late_n = 0;
  long bad = -1;
  for (int i = 0; i < n; i++) {
    if (s[i].step > 100 || s[i].status != RG_STEP_CARRIER) continue;
    early_n++;
    if (strcmp(band_of(&s[i], n_layers, bands), "late") == 0) late_n++;
    else if (bad < 0) bad = i;
  }
  if (early_n == 0) {
    c->outcome = "not testable";
    snprintf(c->why, sizeof c->why, "no step up to 100 has a carrier");
  } else if (bad >= 0) {
    c->outcome = "contradicted";
    snprintf(c->why, sizeof c->why, "step %ld's carrier is at layer %d (%s)", s[bad].step, s[bad].layer,
             band_of(&s[bad], n_layers, bands));
  } else {
    c->outcome = "matched";
    snprintf(c->why, sizeof c->why, "all %d carriers up to step 100 are in the late band", late_n);
  }
  /* 2. relocation to an early layer after step 100 */
  c = &out[1];
  *c = (rg_lan_claim){.claim = "the best carrier relocates to an early layer after step 100 (by step 250)"};
  int after = 0, early_after = 0;
  for (int i = 0; i < n; i++)
    if (s[i].step > 100 && s[i].status == RG_STEP_CARRIER) {
      after++;
      early_after += strcmp(band_of(&s[i], n_layers, bands), "early") == 0;
    }
  if (after == 0) {
    c->outcome = "not testable";
    snprintf(c->why, sizeof c->why, "no step after 100 has a carrier (the series ends at step %ld)", last);
  } else if (strcmp(v->verdict, "migration") == 0 && v->to_step > 100) {
    c->outcome = "matched";
    snprintf(c->why, sizeof c->why, "%s", v->reason);
  } else if (early_after == 0) {
    c->outcome = "contradicted";
    snprintf(c->why, sizeof c->why, "none of the %d carriers after step 100 is in the early band", after);
  } else {
    c->outcome = "not testable";
    snprintf(c->why, sizeof c->why, "an early carrier after step 100, but the verdict is %s: %s", v->verdict,
             v->reason);
  }
  /* 3. effective rank */
  c = &out[2];
  *c = (rg_lan_claim){.claim = "effective rank stays at 1.23-1.27"};
  double lo = INFINITY, hi = -INFINITY;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (s[i].status == RG_STEP_CARRIER && isfinite(s[i].erank_sigma)) {
      lo = fmin(lo, s[i].erank_sigma);
      hi = fmax(hi, s[i].erank_sigma);
      m++;
    }
  if (m == 0) {
    c->outcome = "not testable";
    snprintf(c->why, sizeof c->why, "no step has a carrier to measure");
  } else {
    c->outcome = lo >= 1.23 && hi <= 1.27 ? "matched" : "contradicted";
    snprintf(c->why, sizeof c->why,
             "erank_sigma of the carrier matrix %.3f-%.3f over %d steps (the paper's matrix and normalisation are "
             "not published: refusal-geometry.md section 9.2)",
             lo, hi, m);
  }
  /* 4. XSTest */
  c = &out[3];
  *c = (rg_lan_claim){.claim = "XSTest any-refusal falls 1.000 -> 0.664 -> 0.228",
                      .outcome = "not testable"};
  snprintf(c->why, sizeof c->why, "geometry does not run XSTest; refgeo run's report compares its XSTest rates");
}
