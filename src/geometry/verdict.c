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
    case RG_STEP_UNSTABLE: return "carrier in under half the resamples";
    case RG_STEP_NO_REFUSAL: return "no refusal to carry";
    case RG_STEP_NO_CONTRAST: return "harmless prompts refused";
    case RG_STEP_STATUSES: break;
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

static int is_band(const rg_verdict_step *s, int n_layers, const rg_depth_thresholds *b, const char *band) {
  return s->status == RG_STEP_CARRIER && strcmp(band_of(s, n_layers, b), band) == 0;
}

/* "step 0 layer 14 (middle), step 5 layer 17 (late), ..." over the carriers. */
static void carrier_bands(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *b, char *buf,
                          size_t len) {
  int at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < (int)len; i++)
    if (s[i].status == RG_STEP_CARRIER)
      at += snprintf(buf + at, len - (size_t)at, "%sstep %ld layer %d (%s)", at ? ", " : "", s[i].step, s[i].layer,
                     band_of(&s[i], n_layers, b));
  if (at >= (int)len && len > 4) memcpy(buf + len - 4, "...", 4);
}

/* Names the pair (late step A, early step B) in OUT: steps, bands, and the
 * reason "WHAT layer .. (late, interval) at step .. to layer .. (early,
 * interval) at step ..". Returns the reason's length. */
static int set_pair(rg_verdict *out, const rg_verdict_step *a, const rg_verdict_step *b, const char *what) {
  out->from_step = a->step, out->from_band = "late";
  out->to_step = b->step, out->to_band = "early";
  return snprintf(out->reason, sizeof out->reason,
                  "%s layer %d (late, 95%% interval %g-%g) at step %ld to layer %d (early, %g-%g) at step %ld", what,
                  a->layer, a->layer_lo, a->layer_hi, a->step, b->layer, b->layer_lo, b->layer_hi, b->step);
}

void rg_verdict_decide(const rg_verdict_step *s, int n, int n_layers, const rg_depth_thresholds *bands,
                       rg_verdict *out) {
  *out = (rg_verdict){.verdict = "undetermined", .from_step = -1, .to_step = -1, .from_band = "", .to_band = ""};
  int count[RG_STEP_STATUSES] = {0}, first = -1;
  for (int i = 0; i < n; i++) {
    count[s[i].status]++;
    if (first < 0 && s[i].status == RG_STEP_CARRIER) first = i;
  }
  if (count[RG_STEP_CARRIER] < 2) {
    if (count[RG_STEP_NO_REFUSAL] == n)
      snprintf(out->reason, sizeof out->reason, "no refusal to carry at any of the %d steps", n);
    else
      undetermined_by_step(s, n, count[RG_STEP_CARRIER], out->reason, sizeof out->reason);
    if (first >= 0) out->from_step = s[first].step;
    return;
  }
  /* Every (late carrier, later early carrier) pair, in step order of the
   * early one: the first pair whose intervals are apart and that no later
   * late carrier (apart from the early one) undoes is the migration. */
  int ov_i = -1, ov_j = -1, back_i = -1, back_j = -1, back_k = -1;
  for (int j = 0; j < n; j++) {
    if (!is_band(&s[j], n_layers, bands, "early")) continue;
    for (int i = 0; i < j; i++) {
      if (!is_band(&s[i], n_layers, bands, "late")) continue;
      if (overlap(&s[i], &s[j])) {
        if (ov_i < 0) ov_i = i, ov_j = j;
        continue;
      }
      int back = -1;
      for (int k = j + 1; k < n && back < 0; k++)
        if (is_band(&s[k], n_layers, bands, "late") && !overlap(&s[j], &s[k])) back = k;
      if (back >= 0) {
        if (back_i < 0) back_i = i, back_j = j, back_k = back;
        continue;
      }
      out->verdict = "migration";
      set_pair(out, &s[i], &s[j], "the carrier moved from");
      return;
    }
  }
  if (back_i >= 0) {
    int at = set_pair(out, &s[back_i], &s[back_j], "the carrier moved from");
    const rg_verdict_step *k = &s[back_k];
    if (at < (int)sizeof out->reason)
      snprintf(out->reason + at, sizeof out->reason - (size_t)at,
               ", then back to layer %d (late, %g-%g) at step %ld: not a lasting move", k->layer, k->layer_lo,
               k->layer_hi, k->step);
    return;
  }
  if (ov_i >= 0) {
    set_pair(out, &s[ov_i], &s[ov_j], "intervals overlap: from");
    return;
  }
  out->verdict = "no migration";
  out->from_step = s[first].step;
  out->from_band = band_of(&s[first], n_layers, bands);
  char seq[400];
  carrier_bands(s, n, n_layers, bands, seq, sizeof seq);
  snprintf(out->reason, sizeof out->reason, "no late-band carrier is followed by an early-band one: %s", seq);
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
