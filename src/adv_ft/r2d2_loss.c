/* r2d2_loss.c: R2D2's utility, away and toward losses as per-row weights of
 * the session's two loss operations: the cross entropy rows (utility and
 * toward) in one rg_session_loss_ce, the away rows in one
 * rg_session_loss_away; both add into the same loss gradient, so one
 * backward differentiates the weighted total. A row's weight is its kind's
 * loss weight divided by its kind's row count: that turns the sums the
 * operations differentiate into HarmBench's per-kind means. */
#include "adv_ft/r2d2_loss.h"

#include <stdlib.h>

#include "engine/backward.h"
#include "util/error.h"

rg_r2d2_loss_opts rg_r2d2_loss_defaults(void) {
  return (rg_r2d2_loss_opts){.w_utility = 1.0f, .w_away = 0.5f, .w_toward = 0.5f, .away_log_p_min = -5.0f};
}

/* Sum of losses[r] over the rows of kind K. */
static double kind_sum(const float *losses, const rg_r2d2_kind *kind, int n_rows, rg_r2d2_kind k) {
  double sum = 0;
  for (int r = 0; r < n_rows; r++)
    if (kind[r] == k) sum += losses[r];
  return sum;
}

int rg_r2d2_loss(rg_session *s, const rg_r2d2_loss_opts *o, const rg_r2d2_kind *kind, const int32_t *targets,
                 int n_rows, rg_r2d2_losses *out) {
  const int R = rg_session_loss_rows(s);
  if (n_rows != R || (R <= 0 && !o->sp))
    return rg_error_set("r2d2 loss: %d rows given, the last eval of a training session returned %d", n_rows, R);
  double count[3] = {0}; /* utility, away, toward */
  for (int r = 0; r < R; r++) switch (kind[r]) {
      case RG_R2D2_UTILITY: count[0]++; break;
      case RG_R2D2_AWAY: count[1]++; break;
      case RG_R2D2_TOWARD: count[2]++; break;
      default: return rg_error_set("r2d2 loss: row %d has unknown kind %d", r, (int)kind[r]);
    }
  if (o->sp && rg_comm_allreduce_sum_f64(o->sp, count, 3) < 0) return rg_error_prefix("r2d2 loss");
  rg_r2d2_losses L = {.n_utility = (int)count[0], .n_away = (int)count[1], .n_toward = (int)count[2]};
  float *scale = malloc((size_t)(R > 0 ? R : 1) * sizeof *scale), *losses = malloc((size_t)(R > 0 ? R : 1) * sizeof *losses);
  double sum[3] = {0};
  int rc = scale && losses ? 0 : rg_error_set("r2d2 loss: out of memory");
  if (rc == 0 && L.n_utility + L.n_toward > 0) {
    for (int r = 0; r < R; r++)
      scale[r] = kind[r] == RG_R2D2_UTILITY ? o->w_utility / (float)L.n_utility
                 : kind[r] == RG_R2D2_TOWARD ? o->w_toward / (float)L.n_toward
                                             : 0.0f;
    rc = rg_session_loss_ce(s, targets, scale, losses);
    if (rc == 0) {
      sum[0] = kind_sum(losses, kind, R, RG_R2D2_UTILITY);
      sum[2] = kind_sum(losses, kind, R, RG_R2D2_TOWARD);
    }
  }
  if (rc == 0 && L.n_away > 0) {
    /* every away row counts in the denominator, dropped or not (ATU:486) */
    for (int r = 0; r < R; r++) scale[r] = kind[r] == RG_R2D2_AWAY ? o->w_away / (float)L.n_away : 0.0f;
    rc = rg_session_loss_away(s, targets, scale, o->away_log_p_min, losses);
    if (rc == 0) sum[1] = kind_sum(losses, kind, R, RG_R2D2_AWAY);
  }
  /* every rank reaches this sum, whatever failed, so that none waits alone */
  if (o->sp && rg_comm_allreduce_sum_f64(o->sp, sum, 3) < 0 && rc == 0) rc = -1;
  if (rc == 0) {
    L.utility = L.n_utility ? sum[0] / L.n_utility : 0.0;
    L.away = L.n_away ? sum[1] / L.n_away : 0.0;
    L.toward = L.n_toward ? sum[2] / L.n_toward : 0.0;
    L.total = o->w_utility * L.utility + o->w_away * L.away + o->w_toward * L.toward;
    *out = L;
  }
  free(scale);
  free(losses);
  return rc < 0 ? rg_error_prefix("r2d2 loss") : 0;
}
