/* r2d2_loss.c: R2D2's utility, away and toward losses as per-row weights of
 * the session's two loss operations: the cross entropy rows (utility and
 * toward) in one rg_session_loss_ce, the away rows in one
 * rg_session_loss_away; both add into the same loss gradient, so one
 * backward differentiates the weighted total. A row's weight is its kind's
 * loss weight divided by its kind's row count: that turns the sums the
 * operations differentiate into HarmBench's per-kind means. */
#include "adv_ft/r2d2_loss.h"

#include <stdlib.h>

#include "model/backward.h"
#include "util/error.h"

rg_r2d2_loss_opts rg_r2d2_loss_defaults(void) {
  return (rg_r2d2_loss_opts){.w_utility = 1.0f, .w_away = 0.5f, .w_toward = 0.5f, .away_log_p_min = -5.0f};
}

/* Sum of losses[r] over the rows of kind K, divided by their count (0 when none). */
static double kind_mean(const float *losses, const rg_r2d2_kind *kind, int n_rows, rg_r2d2_kind k, int count) {
  double sum = 0;
  for (int r = 0; r < n_rows; r++)
    if (kind[r] == k) sum += losses[r];
  return count ? sum / count : 0.0;
}

int rg_r2d2_loss(rg_session *s, const rg_r2d2_loss_opts *o, const rg_r2d2_kind *kind, const int32_t *targets,
                 int n_rows, rg_r2d2_losses *out) {
  const int R = rg_session_loss_rows(s);
  if (n_rows != R || R <= 0)
    return rg_error_set("r2d2 loss: %d rows given, the last eval of a training session returned %d", n_rows, R);
  rg_r2d2_losses L = {0};
  for (int r = 0; r < R; r++) switch (kind[r]) {
      case RG_R2D2_UTILITY: L.n_utility++; break;
      case RG_R2D2_AWAY: L.n_away++; break;
      case RG_R2D2_TOWARD: L.n_toward++; break;
      default: return rg_error_set("r2d2 loss: row %d has unknown kind %d", r, (int)kind[r]);
    }
  float *scale = malloc((size_t)R * sizeof *scale), *losses = malloc((size_t)R * sizeof *losses);
  int rc = scale && losses ? 0 : rg_error_set("r2d2 loss: out of memory");
  if (rc == 0 && L.n_utility + L.n_toward > 0) {
    for (int r = 0; r < R; r++)
      scale[r] = kind[r] == RG_R2D2_UTILITY ? o->w_utility / (float)L.n_utility
                 : kind[r] == RG_R2D2_TOWARD ? o->w_toward / (float)L.n_toward
                                             : 0.0f;
    rc = rg_session_loss_ce(s, targets, scale, losses);
    if (rc == 0) {
      L.utility = kind_mean(losses, kind, R, RG_R2D2_UTILITY, L.n_utility);
      L.toward = kind_mean(losses, kind, R, RG_R2D2_TOWARD, L.n_toward);
    }
  }
  if (rc == 0 && L.n_away > 0) {
    /* every away row counts in the denominator, dropped or not (ATU:486) */
    for (int r = 0; r < R; r++) scale[r] = kind[r] == RG_R2D2_AWAY ? o->w_away / (float)L.n_away : 0.0f;
    rc = rg_session_loss_away(s, targets, scale, o->away_log_p_min, losses);
    if (rc == 0) L.away = kind_mean(losses, kind, R, RG_R2D2_AWAY, L.n_away);
  }
  if (rc == 0) {
    L.total = o->w_utility * L.utility + o->w_away * L.away + o->w_toward * L.toward;
    *out = L;
  }
  free(scale);
  free(losses);
  return rc < 0 ? rg_error_prefix("r2d2 loss") : 0;
}
