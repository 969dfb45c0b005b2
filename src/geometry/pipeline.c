/* pipeline.c: the per-checkpoint refusal-geometry computation behind `refgeo geometry` (pipeline.h). */
#include "geometry/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/acts_h5_read.h"
#include "geometry/auroc.h"
#include "geometry/diff_means.h"
#include "geometry/directions_h5.h"
#include "geometry/geometry_csv.h"
#include "geometry/linalg.h"
#include "geometry/scores.h"
#include "geometry/spectrum.h"
#include "model/model.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/progress.h"

rg_geometry_opts rg_geometry_opts_default(void) {
  return (rg_geometry_opts){.rules = rg_selection_rules_default(), .depth = rg_depth_thresholds_default()};
}

static const double DEG = 180.0 / M_PI;
enum { HOOK_NAME_LEN = 48 };

/* Everything the run accumulates across steps. */
typedef struct {
  const rg_geometry_opts *o;
  const rg_checkpoint_series *series;
  rg_acts_reader *rd;
  int L, d, n_pos, lo, hi;
  double t0; /* rg_now_seconds at the start */
  char *geo_path, *car_path, *mig_path, *dir_path;
  rg_geometry_row *geo; /* [n_steps * L * n_pos] */
  char (*hooks)[HOOK_NAME_LEN];
  int n_geo;
  rg_carrier_row *car; /* [n_steps * n_cand] */
  int n_car;
  rg_migration_row *mig; /* [n_steps] */
  double *dirs0, *prev, *cur; /* [n_pos][L][d] */
  double *best0;              /* step 0's best carrier direction */
  float *dirs_f32;            /* [n_steps][L][n_pos][d]: every step's directions, for directions.h5 */
  rg_directions_step *dir_steps; /* [n_steps] */
  int have_best0;             /* 0 when step 0 had no admissible carrier */
} run_state;

static double elapsed(const run_state *st) { return rg_now_seconds() - st->t0; }

static double *dir_at(const run_state *st, double *dirs, int pi, int l) {
  return dirs + ((size_t)pi * st->L + l) * st->d;
}

/* Activation x_i[p, l] of a [L][n][n_pos][d] site array. */
static const float *act_at(const run_state *st, const float *acts, int n, int l, int i, int pi) {
  return acts + (((size_t)l * n + i) * st->n_pos + pi) * st->d;
}

static void rows_to_double(const run_state *st, const float *acts, int n, int l, int pi, double *X) {
  for (int i = 0; i < n; i++) {
    const float *x = act_at(st, acts, n, l, i, pi);
    for (int k = 0; k < st->d; k++) X[(size_t)i * st->d + k] = x[k];
  }
}

static rg_spectrum_measures nan_spectrum(void) { return (rg_spectrum_measures){NAN, NAN, NAN}; }

/* Reads both train splits of STEP into *harm and *harmless and adds them to
 * DM (made on first use); run_step turns DM into the directions (st->cur). */
static int load_train(run_state *st, long step, float **harm, int *nh, float **harmless, int *nl, rg_diff_means **dm) {
  int pos_h = 0, pos_l = 0;
  if (rg_acts_read_site(st->rd, step, "harmful_train", RG_HOOK_RESID_PRE, harm, nh, &pos_h) < 0 ||
      rg_acts_read_site(st->rd, step, "harmless_train", RG_HOOK_RESID_PRE, harmless, nl, &pos_l) < 0)
    return -1;
  if (pos_h != pos_l || (st->n_pos && pos_h != st->n_pos))
    return rg_error_set("%s: step %ld: eoi position counts differ (%d harmful, %d harmless, %d before)",
                        rg_acts_reader_path(st->rd), step, pos_h, pos_l, st->n_pos);
  st->n_pos = pos_h;
  if (!*dm && !(*dm = rg_diff_means_new(st->n_pos, st->L, st->d))) return -1;
  for (int l = 0; l < st->L; l++)
    for (int pi = 0; pi < st->n_pos; pi++) {
      for (int i = 0; i < *nh; i++) rg_diff_means_add(*dm, RG_HARMFUL, pi, l, act_at(st, *harm, *nh, l, i, pi));
      for (int i = 0; i < *nl; i++) rg_diff_means_add(*dm, RG_HARMLESS, pi, l, act_at(st, *harmless, *nl, l, i, pi));
    }
  return 0;
}

static int alloc_dirs(run_state *st) {
  size_t n = (size_t)st->n_pos * st->L * st->d;
  st->dirs0 = malloc(n * sizeof(double));
  st->prev = malloc(n * sizeof(double));
  st->cur = malloc(n * sizeof(double));
  int n_steps = st->series->n, n_cand = st->n_pos * (st->hi - st->lo);
  st->geo = calloc((size_t)n_steps * st->L * st->n_pos, sizeof *st->geo);
  st->hooks = calloc((size_t)n_steps * st->L * st->n_pos, sizeof *st->hooks);
  st->car = calloc((size_t)n_steps * n_cand, sizeof *st->car);
  st->mig = calloc((size_t)n_steps, sizeof *st->mig);
  st->best0 = malloc((size_t)st->d * sizeof(double));
  st->dirs_f32 = malloc((size_t)n_steps * n * sizeof(float));
  st->dir_steps = calloc((size_t)n_steps, sizeof *st->dir_steps);
  if (!st->dirs0 || !st->prev || !st->cur || !st->geo || !st->hooks || !st->car || !st->mig || !st->best0 ||
      !st->dirs_f32 || !st->dir_steps)
    return rg_error_set("geometry: out of memory");
  return 0;
}

/* geometry.csv rows of one step (directions in st->cur). */
static int geometry_rows(run_state *st, int si, const float *harm, int nh, const float *harmless, int nl,
                         const rg_diff_means *dm) {
  const rg_checkpoint *ck = &st->series->items[si];
  double *Xh = malloc((size_t)nh * st->d * sizeof *Xh), *Xl = malloc((size_t)nl * st->d * sizeof *Xl);
  double *ph = malloc((size_t)nh * sizeof *ph), *pl = malloc((size_t)nl * sizeof *pl);
  double *nu = malloc((size_t)st->d * sizeof *nu);
  int rc = Xh && Xl && ph && pl && nu ? 0 : rg_error_set("geometry: out of memory");
  for (int l = 0; rc == 0 && l < st->L; l++)
    for (int pi = 0; rc == 0 && pi < st->n_pos; pi++) {
      rg_geometry_row *g = &st->geo[st->n_geo];
      const double *r = dir_at(st, st->cur, pi, l);
      *g = (rg_geometry_row){.step = ck->step, .checkpoint = ck->path, .layer = l, .pos = pi - st->n_pos,
                             .n_harmful = nh, .n_harmless = nl, .matrix = "prompt_diff"};
      g->hook = rg_hook_name(RG_HOOK_RESID_PRE, l, st->hooks[st->n_geo], HOOK_NAME_LEN);
      g->dir_norm = rg_vec_norm(r, st->d);
      const double *r0 = si == 0 ? r : dir_at(st, st->dirs0, pi, l);
      g->cos_step0 = rg_vec_cos(r, r0, st->d);
      g->angle_step0_deg = rg_vec_angle(r, r0, st->d) * DEG;
      g->cos_prev = g->angle_prev_deg = NAN;
      if (si > 0) {
        const double *rp = dir_at(st, st->prev, pi, l);
        g->cos_prev = rg_vec_cos(r, rp, st->d);
        g->angle_prev_deg = rg_vec_angle(r, rp, st->d) * DEG;
      }
      rows_to_double(st, harm, nh, l, pi, Xh);
      rows_to_double(st, harmless, nl, l, pi, Xl);
      rg_project_rows(Xh, nh, st->d, r, ph);
      rg_project_rows(Xl, nl, st->d, r, pl);
      g->auroc = rg_auroc(ph, nh, pl, nl);
      /* nu is read only when rg_diff_means_mean filled it */
      if (rc == 0 && rg_diff_means_mean(dm, RG_HARMLESS, pi, l, nu) < 0) rc = -1;
      if (rc == 0) rg_matrix_subtract_row(Xh, nh, st->d, nu);
      if (rc == 0 && rg_matrix_spectrum_measures(Xh, nh, st->d, &g->spectrum) < 0) rc = -1;
      st->n_geo++;
    }
  free(Xh);
  free(Xl);
  free(ph);
  free(pl);
  free(nu);
  return rc;
}

/* The val token ids of STEP, the first max_val of each class. */
static int load_val(run_state *st, long step, int32_t ***ids, int **lens, int *n, const char *split) {
  if (rg_acts_read_token_ids(st->rd, step, split, ids, lens, n) < 0) return -1;
  if (st->o->max_val > 0 && *n > st->o->max_val) {
    for (int i = st->o->max_val; i < *n; i++) free((*ids)[i]);
    *n = st->o->max_val;
  }
  return 0;
}

/* Scores every candidate of one step into C (RD loop order). */
static int score_candidates(run_state *st, int si, rg_candidate *c) {
  const rg_checkpoint *ck = &st->series->items[si];
  int32_t **hv = NULL, **lv = NULL;
  int *hlen = NULL, *llen = NULL, nhv = 0, nlv = 0, rc = -1;
  rg_scorer *sc = NULL;
  rg_model *m = NULL;
  if (load_val(st, ck->step, &hv, &hlen, &nhv, "harmful_val") < 0 ||
      load_val(st, ck->step, &lv, &llen, &nlv, "harmless_val") < 0)
    goto end;
  if (!(m = rg_model_load(ck->path))) goto end;
  if (m->cfg.n_layers != st->L || m->cfg.d_model != st->d) {
    rg_error_set("%s: %d layers x d_model %d, but the activations have %d x %d", ck->path, m->cfg.n_layers,
                 m->cfg.d_model, st->L, st->d);
    goto end;
  }
  int32_t refusal[1];
  const int32_t *rids = st->o->refusal_ids;
  int n_refusal = st->o->n_refusal;
  if (!rids) {
    if ((n_refusal = rg_refusal_tokens_default(m->tokenizer, refusal)) < 0) goto end;
    rids = refusal;
  }
  rg_token_batch bh = {(const int32_t *const *)hv, hlen, nhv}, bl = {(const int32_t *const *)lv, llen, nlv};
  if (!(sc = rg_scorer_new(m, &bh, &bl, rids, n_refusal, st->o->threads))) goto end;
  if (st->o->log) {
    char ids[128] = "";
    for (int k = 0, at = 0; k < n_refusal && at < (int)sizeof ids - 12; k++)
      at += snprintf(ids + at, sizeof ids - (size_t)at, "%s%d", k ? "," : "", rids[k]);
    fprintf(st->o->log, "step %ld: %s: %d harmful / %d harmless val prompts, refusal tokens %s; baseline refusal "
                        "score harmful %.4f harmless %.4f [%.1f s]\n",
            ck->step, ck->path, nhv, nlv, ids, rg_scorer_base_harmful(sc), rg_scorer_base_harmless(sc), elapsed(st));
  }
  int n_cand = st->n_pos * (st->hi - st->lo), k = 0;
  /* Every candidate's scores go to carriers.csv; the log gets one progress
   * line with the time left instead of a line per candidate. */
  char label[96];
  snprintf(label, sizeof label, "step %ld: scoring %d carrier candidates", ck->step, n_cand);
  rg_progress prog;
  rg_progress_start(&prog, st->o->log, label, n_cand);
  for (int pi = 0; pi < st->n_pos; pi++)
    for (int l = st->lo; l < st->hi; l++, k++) {
      c[k] = (rg_candidate){.pos = pi - st->n_pos, .layer = l};
      if (rg_scorer_score(sc, dir_at(st, st->cur, pi, l), l, &c[k].bypass, &c[k].induce, &c[k].kl) < 0) goto end;
      rg_progress_tick(&prog, k + 1);
    }
  rg_progress_end(&prog);
  rc = 0;
end:
  if (rc < 0) rg_error_prefix("step %ld", ck->step);
  rg_scorer_free(sc);
  rg_model_free(m);
  rg_acts_token_ids_free(hv, hlen, nhv);
  rg_acts_token_ids_free(lv, llen, nlv);
  return rc;
}

/* Logs the three spectra of the best carrier; returns the carrier-matrix one
 * (the migration.csv default) in *carrier. */
static int best_spectra(run_state *st, long step, const rg_diff_means *dm, const float *harm, int nh, int best_pi,
                        int best_l, rg_spectrum_measures *carrier) {
  int rows = nh > st->L ? nh : st->L;
  rows = rows > st->n_pos ? rows : st->n_pos;
  double *M = malloc((size_t)rows * st->d * sizeof *M), *nu = malloc((size_t)st->d * sizeof *nu);
  rg_spectrum_measures pd, ls;
  int rc = M && nu ? 0 : rg_error_set("geometry: out of memory");
  if (rc == 0) rc = rg_diff_means_carrier_matrix(dm, best_l, M);
  if (rc == 0) rc = rg_matrix_spectrum_measures(M, st->n_pos, st->d, carrier);
  if (rc == 0) rc = rg_diff_means_layer_stack(dm, best_pi, M);
  if (rc == 0) rc = rg_matrix_spectrum_measures(M, st->L, st->d, &ls);
  if (rc == 0) rc = rg_diff_means_mean(dm, RG_HARMLESS, best_pi, best_l, nu);
  if (rc == 0) {
    rows_to_double(st, harm, nh, best_l, best_pi, M);
    rg_matrix_subtract_row(M, nh, st->d, nu);
    rc = rg_matrix_spectrum_measures(M, nh, st->d, &pd);
  }
  if (rc == 0 && st->o->log) {
    const char *names[3] = {"carrier", "layer_stack", "prompt_diff"};
    const rg_spectrum_measures *s[3] = {carrier, &ls, &pd};
    for (int j = 0; j < 3; j++)
      fprintf(st->o->log, "step %ld: spectrum %-11s erank_sigma %.4f erank_sigma2 %.4f pr %.4f\n", step, names[j],
              s[j]->erank_sigma, s[j]->erank_sigma2, s[j]->participation_ratio);
  }
  free(M);
  free(nu);
  return rc;
}

/* Keeps step SI's directions (st->cur) as float32 [L][n_pos][d] with its
 * selected carrier BEST (NULL: none admissible) for directions.h5. */
static void record_directions(run_state *st, int si, const rg_candidate *best) {
  float *dst = st->dirs_f32 + (size_t)si * st->L * st->n_pos * st->d;
  for (int l = 0; l < st->L; l++)
    for (int pi = 0; pi < st->n_pos; pi++) {
      const double *r = dir_at(st, st->cur, pi, l);
      float *o = dst + ((size_t)l * st->n_pos + pi) * st->d;
      for (int k = 0; k < st->d; k++) o[k] = (float)r[k];
    }
  const rg_checkpoint *ck = &st->series->items[si];
  st->dir_steps[si] = (rg_directions_step){.step = ck->step,
                                           .checkpoint = ck->path,
                                           .dirs = dst,
                                           .selected_pos = best ? best->pos : 0,
                                           .selected_layer = best ? best->layer : -1};
}

static int run_step(run_state *st, int si) {
  const rg_checkpoint *ck = &st->series->items[si];
  float *harm = NULL, *harmless = NULL;
  int nh = 0, nl = 0, rc = -1;
  rg_diff_means *dm = NULL;
  rg_candidate *c = NULL;
  rg_selection sel = {0};
  if (load_train(st, ck->step, &harm, &nh, &harmless, &nl, &dm) < 0) goto end;
  if (si == 0 && alloc_dirs(st) < 0) goto end;
  for (int pi = 0; pi < st->n_pos; pi++)
    for (int l = 0; l < st->L; l++)
      if (rg_diff_means_direction(dm, pi, l, dir_at(st, st->cur, pi, l)) < 0) goto end;
  if (geometry_rows(st, si, harm, nh, harmless, nl, dm) < 0) goto end;
  free(harmless);
  harmless = NULL;
  if (st->o->log)
    fprintf(st->o->log, "step %ld: directions of %d positions x %d layers from %d harmful / %d harmless train "
                        "prompts [%.1f s]\n",
            ck->step, st->n_pos, st->L, nh, nl, elapsed(st));

  int n_cand = st->n_pos * (st->hi - st->lo);
  if (!(c = malloc((size_t)n_cand * sizeof *c))) {
    rg_error_set("geometry: out of memory");
    goto end;
  }
  if (score_candidates(st, si, c) < 0) goto end;
  if (rg_select(c, n_cand, st->L, &st->o->rules, &sel) < 0) goto end;
  rg_carrier_rows_fill(st->car + st->n_car, ck->step, c, &sel);
  st->n_car += n_cand;

  record_directions(st, si, sel.best >= 0 ? &c[sel.best] : NULL);
  rg_migration_row *mr = &st->mig[si];
  const double *best = NULL;
  if (sel.best >= 0) best = dir_at(st, st->cur, c[sel.best].pos + st->n_pos, c[sel.best].layer);
  if (si == 0 && best) {
    memcpy(st->best0, best, (size_t)st->d * sizeof(double));
    st->have_best0 = 1;
  }
  rg_migration_row_fill(mr, ck->step, c, &sel, st->L, &st->o->depth, best, st->have_best0 ? st->best0 : NULL, st->d);
  mr->spectrum = nan_spectrum();
  mr->matrix = "none";
  if (best) {
    mr->matrix = "carrier";
    if (best_spectra(st, ck->step, dm, harm, nh, c[sel.best].pos + st->n_pos, c[sel.best].layer, &mr->spectrum) < 0)
      goto end;
  }
  if (st->o->log) {
    if (best)
      fprintf(st->o->log, "step %ld: best carrier pos %d layer %d (%s, depth %.3f): bypass %.4f induce %.4f kl %.4f; "
                          "%d admissible of %d; drift from step 0 %.3f deg [%.1f s]\n",
              ck->step, mr->best_pos, mr->best_layer, mr->label, mr->rel_depth, mr->bypass, mr->induce, mr->kl,
              sel.n_admissible, n_cand, mr->angle_vs_step0_deg, elapsed(st));
    else
      fprintf(st->o->log, "step %ld: none admissible of %d candidates [%.1f s]\n", ck->step, n_cand, elapsed(st));
  }
  if (si == 0) memcpy(st->dirs0, st->cur, (size_t)st->n_pos * st->L * st->d * sizeof(double));
  double *t = st->prev;
  st->prev = st->cur;
  st->cur = t;
  rc = 0;
end:
  rg_selection_free(&sel);
  free(c);
  free(harm);
  free(harmless);
  rg_diff_means_free(dm);
  return rc;
}

int rg_geometry_run(const char *acts_path, const rg_checkpoint_series *series, const char *out_dir,
                    const rg_geometry_opts *o) {
  run_state st = {.o = o, .series = series};
  st.t0 = rg_now_seconds();
  int rc = -1;
  if (!series || series->n < 1 || series->items[0].step != 0) {
    rg_error_set("geometry: the checkpoint series must start at step 0");
    return -1;
  }
  if (!(st.rd = rg_acts_reader_open(acts_path))) return -1;
  const rg_acts_reader_info *info = rg_acts_reader_info_of(st.rd);
  st.L = info->n_layers;
  st.d = info->d_model;
  st.lo = o->layer_lo;
  st.hi = o->layer_hi > 0 ? o->layer_hi : st.L;
  if (st.lo < 0 || st.lo >= st.hi || st.hi > st.L) {
    rg_error_set("%s: layer range %d:%d is not a non-empty range inside [0, %d)", acts_path, o->layer_lo, st.hi, st.L);
    goto end;
  }
  for (int i = 0; i < series->n; i++) {
    int found = 0;
    for (int j = 0; j < info->n_steps; j++) found |= info->steps[j] == series->items[i].step;
    if (!found) {
      rg_error_set("%s: step %ld (%s) is not captured (or incomplete)", acts_path, series->items[i].step,
                   series->items[i].path);
      goto end;
    }
  }
  if (rg_mkdir_p(out_dir) < 0) goto end;
  st.geo_path = rg_path_join(out_dir, "geometry.csv");
  st.car_path = rg_path_join(out_dir, "carriers.csv");
  st.mig_path = rg_path_join(out_dir, "migration.csv");
  st.dir_path = rg_path_join(out_dir, "directions.h5");
  if (!st.geo_path || !st.car_path || !st.mig_path || !st.dir_path) {
    rg_error_set("%s: out of memory", out_dir);
    goto end;
  }
  for (int si = 0; si < series->n; si++) {
    if (run_step(&st, si) < 0) goto end;
    if (rg_write_geometry_csv(st.geo_path, st.geo, st.n_geo) < 0 ||
        rg_write_carriers_csv(st.car_path, st.car, st.n_car) < 0 ||
        rg_write_migration_csv(st.mig_path, st.mig, si + 1) < 0 ||
        rg_directions_write(st.dir_path, st.L, st.n_pos, st.d, st.dir_steps, si + 1) < 0)
      goto end;
  }
  if (o->log) fprintf(o->log, "geometry: %d steps done, tables in %s [%.1f s]\n", series->n, out_dir, elapsed(&st));
  rc = 0;
end:
  rg_acts_reader_close(st.rd);
  free(st.geo_path);
  free(st.car_path);
  free(st.mig_path);
  free(st.dir_path);
  free(st.dirs_f32);
  free(st.dir_steps);
  free(st.geo);
  free(st.hooks);
  free(st.car);
  free(st.mig);
  free(st.dirs0);
  free(st.prev);
  free(st.cur);
  free(st.best0);
  return rc;
}
