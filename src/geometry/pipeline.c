/* pipeline.c: refgeo geometry over a checkpoint series, step by step, to
 * the tables, directions.h5 and verdict.json (the flow is in pipeline.h). */
#include "geometry/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture/acts_h5_read.h"
#include "geometry/auroc.h"
#include "geometry/bootstrap.h"
#include "geometry/diff_means.h"
#include "geometry/directions_h5.h"
#include "geometry/geometry_csv.h"
#include "geometry/linalg.h"
#include "geometry/scores.h"
#include "geometry/spectrum.h"
#include "geometry/step_prompts.h"
#include "geometry/verdict.h"
#include "geometry/verdict_json.h"
#include "model/model.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/progress.h"
#include "util/rng.h"

rg_geometry_opts rg_geometry_opts_default(void) { return (rg_geometry_opts){.plan = rg_verdict_plan_default()}; }

static const double DEG = 180.0 / M_PI;
enum { HOOK_NAME_LEN = 48, TOKENS_LEN = 200 };

/* The KL budgets of the sensitivity table (reported, never deciding). */
static const double SENSITIVITY_TAU[] = {0.05, 0.1, 0.2, 0.5, 1.0};
enum { N_TAU = (int)(sizeof SENSITIVITY_TAU / sizeof SENSITIVITY_TAU[0]) };

/* A step as a source and a target of the transfer pass: its best
 * candidate's direction (none: layer -1), and the val prompts and refusal
 * tokens it was scored with (none: nh 0). */
typedef struct {
  int pos, layer;
  double *dir; /* [d] */
  /* with the plan's transfer_layers: each layer's best direction
   * ([L][d]) and its position (layer_pos[l] 0: the layer has none) */
  double *layer_dir;
  int *layer_pos;
  rg_score_mode mode;
  int32_t refusal[RG_MAX_REFUSAL_TOKENS], compliance[RG_MAX_REFUSAL_TOKENS];
  int n_refusal, n_compliance;
  int *hv, *lv, nh, nl;
} transfer_end;

/* Everything the run accumulates across steps. */
typedef struct {
  const rg_geometry_opts *o;
  const rg_verdict_plan *plan;
  const rg_checkpoint_series *series;
  rg_acts_reader *rd;
  rg_refusal_list *judge;
  int L, d, n_pos, lo, hi;
  double t0; /* rg_now_seconds at the start */
  char *geo_path, *car_path, *mig_path, *dir_path, *sens_path, *pareto_path, *scores_path, *probes_path,
      *transfer_path, *verdict_path, *verdict_txt_path;
  char plan_sha[65];
  rg_geometry_row *geo; /* [n_steps * L * n_pos] */
  char (*hooks)[HOOK_NAME_LEN];
  int n_geo;
  rg_carrier_row *car; /* [n_steps * n_cand] */
  int n_car;
  rg_migration_row *mig; /* [n_steps] */
  char (*tokens)[TOKENS_LEN]; /* [n_steps]: migration.csv's refusal_tokens */
  rg_verdict_step *vsteps;    /* [n_steps] */
  rg_sensitivity_row *sens;   /* [n_steps * N_TAU] */
  int n_sens;
  rg_pareto_row *pareto; /* [n_steps * n_cand] */
  int n_pareto;
  rg_probe_row *probes; /* [n_steps * L * n_pos] */
  int n_probes;
  transfer_end *ends; /* [n_steps]: what the transfer pass needs of each step */
  rg_transfer_row *transfer; /* [n_steps * n_steps] */
  int n_transfer;
  rg_prompt_score_row *pscores;
  long n_pscores, cap_pscores;
  double *dirs0, *prev, *cur; /* [n_pos][L][d] */
  double *best0;              /* step 0's best carrier direction */
  float *dirs_f32;            /* [n_steps][L][n_pos][d]: every step's directions, for directions.h5 */
  rg_directions_step *dir_steps; /* [n_steps] */
  int have_best0;             /* 0 when step 0 had no carrier */
} run_state;

static double elapsed(const run_state *st) { return rg_now_seconds() - st->t0; }

static double *dir_at(const run_state *st, double *dirs, int pi, int l) {
  return dirs + ((size_t)pi * st->L + l) * st->d;
}

/* Activation x_i[p, l] of a [L][n][n_pos][d] site array. */
static const float *act_at(const run_state *st, const float *acts, int n, int l, int i, int pi) {
  return acts + (((size_t)l * n + i) * st->n_pos + pi) * st->d;
}

/* The rows of the prompts in IDX[m] of a site array into X[m][d]. */
static void rows_to_double(const run_state *st, const float *acts, int n, const int *idx, int m, int l, int pi,
                           double *X) {
  for (int i = 0; i < m; i++) {
    const float *x = act_at(st, acts, n, l, idx[i], pi);
    for (int k = 0; k < st->d; k++) X[(size_t)i * st->d + k] = x[k];
  }
}

static double mean_of(const double *x, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += x[i];
  return sum / n;
}

/* A step's train activations and which of their prompts the directions use. */
typedef struct {
  float *harm, *harmless;
  int nh_all, nl_all;  /* prompts in the file */
  int *hi, *li, nh, nl; /* the prompts used */
  const char *prompts;  /* "filtered" or "all" */
} train_set;

static void train_set_free(train_set *t) {
  free(t->harm);
  free(t->harmless);
  free(t->hi);
  free(t->li);
}

/* Indices of the kept prompts of KEEP[n] (all when USE_ALL) into *IDX. */
static int pick(const bool *keep, int n, bool use_all, int **idx, int *m) {
  *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof **idx);
  if (!*idx) return rg_error_set("geometry: out of memory");
  *m = 0;
  for (int i = 0; i < n; i++)
    if (use_all || keep[i]) (*idx)[(*m)++] = i;
  return 0;
}

/* Reads both train splits of STEP, picks their prompts and fills DM. */
static int load_train(run_state *st, long step, const rg_step_prompts *sp, train_set *t, rg_diff_means **dm) {
  int pos_h = 0, pos_l = 0;
  if (rg_acts_read_site(st->rd, step, "harmful_train", RG_HOOK_RESID_PRE, &t->harm, &t->nh_all, &pos_h) < 0 ||
      rg_acts_read_site(st->rd, step, "harmless_train", RG_HOOK_RESID_PRE, &t->harmless, &t->nl_all, &pos_l) < 0)
    return -1;
  if (pos_h != pos_l || (st->n_pos && pos_h != st->n_pos))
    return rg_error_set("%s: step %ld: eoi position counts differ (%d harmful, %d harmless, %d before)",
                        rg_acts_reader_path(st->rd), step, pos_h, pos_l, st->n_pos);
  if (t->nh_all != sp->total[RG_SPLIT_HARMFUL_TRAIN] || t->nl_all != sp->total[RG_SPLIT_HARMLESS_TRAIN])
    return rg_error_set("%s: step %ld: %d/%d train activations but %d/%d train prompts", rg_acts_reader_path(st->rd),
                        step, t->nh_all, t->nl_all, sp->total[RG_SPLIT_HARMFUL_TRAIN],
                        sp->total[RG_SPLIT_HARMLESS_TRAIN]);
  st->n_pos = pos_h;
  /* a class the filter empties leaves no difference to take: use every prompt */
  bool use_all = !sp->kept[RG_SPLIT_HARMFUL_TRAIN] || !sp->kept[RG_SPLIT_HARMLESS_TRAIN];
  t->prompts = use_all || !st->plan->prompt_filter ? "all" : "filtered";
  if (pick(sp->keep[RG_SPLIT_HARMFUL_TRAIN], t->nh_all, use_all, &t->hi, &t->nh) < 0 ||
      pick(sp->keep[RG_SPLIT_HARMLESS_TRAIN], t->nl_all, use_all, &t->li, &t->nl) < 0)
    return -1;
  if (!*dm && !(*dm = rg_diff_means_new(st->n_pos, st->L, st->d))) return -1;
  for (int l = 0; l < st->L; l++)
    for (int pi = 0; pi < st->n_pos; pi++) {
      for (int i = 0; i < t->nh; i++) rg_diff_means_add(*dm, RG_HARMFUL, pi, l, act_at(st, t->harm, t->nh_all, l, t->hi[i], pi));
      for (int i = 0; i < t->nl; i++)
        rg_diff_means_add(*dm, RG_HARMLESS, pi, l, act_at(st, t->harmless, t->nl_all, l, t->li[i], pi));
    }
  return 0;
}

static int alloc_state(run_state *st) {
  size_t n = (size_t)st->n_pos * st->L * st->d;
  int n_steps = st->series->n, n_cand = st->n_pos * (st->hi - st->lo);
  st->dirs0 = malloc(n * sizeof(double));
  st->prev = malloc(n * sizeof(double));
  st->cur = malloc(n * sizeof(double));
  st->geo = calloc((size_t)n_steps * st->L * st->n_pos, sizeof *st->geo);
  st->hooks = calloc((size_t)n_steps * st->L * st->n_pos, sizeof *st->hooks);
  st->car = calloc((size_t)n_steps * n_cand, sizeof *st->car);
  st->mig = calloc((size_t)n_steps, sizeof *st->mig);
  st->tokens = calloc((size_t)n_steps, sizeof *st->tokens);
  st->vsteps = calloc((size_t)n_steps, sizeof *st->vsteps);
  st->sens = calloc((size_t)n_steps * N_TAU, sizeof *st->sens);
  st->pareto = calloc((size_t)n_steps * n_cand, sizeof *st->pareto);
  st->probes = calloc((size_t)n_steps * st->L * st->n_pos, sizeof *st->probes);
  st->ends = calloc((size_t)n_steps, sizeof *st->ends);
  const size_t per_pair = 1 + (st->plan->transfer_layers ? (size_t)(st->hi - st->lo) : 0);
  st->transfer = calloc((size_t)n_steps * n_steps * per_pair, sizeof *st->transfer);
  st->best0 = malloc((size_t)st->d * sizeof(double));
  st->dirs_f32 = malloc((size_t)n_steps * n * sizeof(float));
  st->dir_steps = calloc((size_t)n_steps, sizeof *st->dir_steps);
  if (!st->dirs0 || !st->prev || !st->cur || !st->geo || !st->hooks || !st->car || !st->mig || !st->tokens ||
      !st->vsteps || !st->sens || !st->pareto || !st->probes || !st->ends || !st->transfer || !st->best0 ||
      !st->dirs_f32 || !st->dir_steps)
    return rg_error_set("geometry: out of memory");
  for (int i = 0; i < n_steps; i++) st->ends[i].layer = -1; /* no direction until a step is scored */
  return 0;
}

/* geometry.csv rows of one step (directions in st->cur). */
static int geometry_rows(run_state *st, int si, const train_set *t, const rg_diff_means *dm) {
  const rg_checkpoint *ck = &st->series->items[si];
  const int nh = t->nh, nl = t->nl;
  double *Xh = malloc((size_t)nh * st->d * sizeof *Xh), *Xl = malloc((size_t)nl * st->d * sizeof *Xl);
  double *ph = malloc((size_t)nh * sizeof *ph), *pl = malloc((size_t)nl * sizeof *pl);
  double *nu = malloc((size_t)st->d * sizeof *nu);
  int rc = Xh && Xl && ph && pl && nu ? 0 : rg_error_set("geometry: out of memory");
  for (int l = 0; rc == 0 && l < st->L; l++)
    for (int pi = 0; rc == 0 && pi < st->n_pos; pi++) {
      rg_geometry_row *g = &st->geo[st->n_geo];
      const double *r = dir_at(st, st->cur, pi, l);
      *g = (rg_geometry_row){.step = ck->step, .checkpoint = ck->path, .layer = l, .pos = pi - st->n_pos,
                             .n_harmful = nh, .n_harmless = nl, .matrix = "prompt_diff", .prompts = t->prompts};
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
      rows_to_double(st, t->harm, t->nh_all, t->hi, nh, l, pi, Xh);
      rows_to_double(st, t->harmless, t->nl_all, t->li, nl, l, pi, Xl);
      rg_project_rows(Xh, nh, st->d, r, ph);
      rg_project_rows(Xl, nl, st->d, r, pl);
      g->auroc = rg_auroc(ph, nh, pl, nl);
      if (rg_diff_means_mean(dm, RG_HARMLESS, pi, l, nu) < 0) rc = -1;
      if (rc == 0) {
        rg_matrix_subtract_row(Xh, nh, st->d, nu);
        rc = rg_matrix_spectrum_measures(Xh, nh, st->d, &g->spectrum);
      }
      st->n_geo++;
    }
  free(Xh);
  free(Xl);
  free(ph);
  free(pl);
  free(nu);
  return rc;
}

static int add_pscore(run_state *st, rg_prompt_score_row r) {
  if (st->n_pscores == st->cap_pscores) {
    long cap = st->cap_pscores ? 2 * st->cap_pscores : 4096;
    rg_prompt_score_row *p = realloc(st->pscores, (size_t)cap * sizeof *p);
    if (!p) return rg_error_set("geometry: out of memory");
    st->pscores = p;
    st->cap_pscores = cap;
  }
  st->pscores[st->n_pscores++] = r;
  return 0;
}

/* The per-prompt scores of one step, its val prompts, and the samples the
 * bootstrap reads. */
typedef struct {
  int *hv, *lv, nh, nl;  /* val prompts scored (indices in the file's splits) */
  rg_candidate *cand;     /* [n_cand] */
  double *bypass, *induce, *kl, *base_h, *base_l, *null_bypass, *null_kl;
  rg_carrier_samples cs;
} step_scores;

static void step_scores_free(step_scores *s) {
  free(s->hv);
  free(s->lv);
  free(s->cand);
  free(s->bypass);
  free(s->induce);
  free(s->kl);
  free(s->base_h);
  free(s->base_l);
  free(s->null_bypass);
  free(s->null_kl);
}

/* The first max_val kept prompts of a val split. */
static int pick_val(const run_state *st, const rg_step_prompts *sp, int split, int **idx, int *m) {
  if (pick(sp->keep[split], sp->total[split], false, idx, m) < 0) return -1;
  if (st->plan->max_val > 0 && *m > st->plan->max_val) *m = st->plan->max_val;
  return 0;
}

/* A unit vector of d standard normals (Box-Muller on splitmix64 draws). */
static void random_unit(uint64_t *state, double *v, int d) {
  double norm = 0;
  for (int k = 0; k < d; k++) {
    double u1 = ((double)(rg_splitmix64(state) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(rg_splitmix64(state) >> 11) * 0x1.0p-53;
    v[k] = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    norm += v[k] * v[k];
  }
  norm = sqrt(norm);
  for (int k = 0; k < d; k++) v[k] /= norm;
}

/* A scorer on weights W for the val prompts HV[nh] and LV[nl] (indices into
 * the splits' token arrays IDS / LENS, harmful then harmless) with the
 * refusal measure RM of a step. NULL with the error set. */
static rg_scorer *val_scorer(const rg_weights *w, int32_t **const *ids, int *const *lens, const int *hv, int nh,
                             const int *lv, int nl, const rg_refusal_measure *rm) {
  int32_t **h = malloc((size_t)nh * sizeof *h), **l = malloc((size_t)nl * sizeof *l);
  int *hl = malloc((size_t)nh * sizeof *hl), *ll = malloc((size_t)nl * sizeof *ll);
  rg_scorer *sc = NULL;
  if (!h || !l || !hl || !ll) {
    rg_error_set("geometry: out of memory");
  } else {
    for (int i = 0; i < nh; i++) h[i] = ids[RG_SPLIT_HARMFUL_VAL][hv[i]], hl[i] = lens[RG_SPLIT_HARMFUL_VAL][hv[i]];
    for (int i = 0; i < nl; i++) l[i] = ids[RG_SPLIT_HARMLESS_VAL][lv[i]], ll[i] = lens[RG_SPLIT_HARMLESS_VAL][lv[i]];
    rg_token_batch bh = {(const int32_t *const *)h, hl, nh}, bl = {(const int32_t *const *)l, ll, nl};
    sc = rg_scorer_new_on(w, &bh, &bl, rm);
  }
  /* the scorer keeps the prompts' pointers, not these arrays */
  free(h);
  free(l);
  free(hl);
  free(ll);
  return sc;
}

/* Scores every candidate and the null of one step, per prompt. */
static int score_step(run_state *st, int si, const rg_weights *w, const rg_step_prompts *sp, step_scores *ss) {
  const rg_checkpoint *ck = &st->series->items[si];
  const int n_cand = st->n_pos * (st->hi - st->lo), n_null = st->plan->null_size;
  int rc = -1;
  rg_scorer *sc = NULL;
  double *u = NULL;
  if (pick_val(st, sp, RG_SPLIT_HARMFUL_VAL, &ss->hv, &ss->nh) < 0 ||
      pick_val(st, sp, RG_SPLIT_HARMLESS_VAL, &ss->lv, &ss->nl) < 0)
    goto end;
  const int nh = ss->nh, nl = ss->nl;
  ss->cand = calloc((size_t)n_cand, sizeof *ss->cand);
  ss->bypass = malloc((size_t)n_cand * nh * sizeof(double));
  ss->induce = malloc((size_t)n_cand * nl * sizeof(double));
  ss->kl = malloc((size_t)n_cand * nl * sizeof(double));
  ss->base_h = malloc((size_t)nh * sizeof(double));
  ss->base_l = malloc((size_t)nl * sizeof(double));
  ss->null_bypass = malloc((size_t)(n_null ? n_null : 1) * nh * sizeof(double));
  ss->null_kl = malloc((size_t)(n_null ? n_null : 1) * nl * sizeof(double));
  u = malloc((size_t)st->d * sizeof *u);
  if (!ss->cand || !ss->bypass || !ss->induce || !ss->kl ||
      !ss->base_h || !ss->base_l || !ss->null_bypass || !ss->null_kl || !u) {
    rg_error_set("geometry: out of memory");
    goto end;
  }
  const rg_refusal_measure rm = rg_step_prompts_measure(sp);
  if (!(sc = val_scorer(w, sp->ids, sp->lens, ss->hv, nh, ss->lv, nl, &rm))) goto end;
  rg_scorer_base_each(sc, ss->base_h, ss->base_l);
  char label[96];
  snprintf(label, sizeof label, "step %ld: scoring %d carrier candidates and %d null directions", ck->step, n_cand,
           n_null);
  rg_progress prog;
  rg_progress_start(&prog, st->o->log, label, n_cand + n_null);
  int k = 0;
  for (int pi = 0; pi < st->n_pos; pi++)
    for (int l = st->lo; l < st->hi; l++, k++) {
      ss->cand[k] = (rg_candidate){.pos = pi - st->n_pos, .layer = l};
      const double *r = dir_at(st, st->cur, pi, l);
      if (rg_scorer_ablate_each(sc, r, ss->bypass + (size_t)k * nh, ss->kl + (size_t)k * nl) < 0 ||
          rg_scorer_induce_each(sc, r, l, ss->induce + (size_t)k * nl) < 0)
        goto end;
      rg_progress_tick(&prog, k + 1);
    }
  /* The null: random unit directions ablated like a candidate. Ablation
   * removes a direction at every layer, so the null of bypass does not
   * depend on a layer; the same directions serve every step. */
  uint64_t state = rg_mix64(st->plan->seed ^ 0x6e756c6cull);
  for (int j = 0; j < n_null; j++) {
    random_unit(&state, u, st->d);
    if (rg_scorer_ablate_each(sc, u, ss->null_bypass + (size_t)j * nh, ss->null_kl + (size_t)j * nl) < 0) goto end;
    rg_progress_tick(&prog, n_cand + j + 1);
  }
  rg_progress_end(&prog);
  ss->cs = (rg_carrier_samples){.n_cand = n_cand,
                                .nh = nh,
                                .nl = nl,
                                .cand = ss->cand,
                                .bypass = ss->bypass,
                                .induce = ss->induce,
                                .kl = ss->kl,
                                .base_h = ss->base_h,
                                .base_l = ss->base_l,
                                .n_null = n_null,
                                .null_bypass = ss->null_bypass,
                                .n_layers = st->L,
                                .rules = &st->plan->rules};
  rc = 0;
end:
  if (rc < 0) rg_error_prefix("step %ld", ck->step);
  rg_scorer_free(sc);
  free(u);
  return rc;
}

/* prompt_scores.csv rows of one scored step. */
static int record_prompt_scores(run_state *st, long step, const step_scores *ss) {
  const int nh = ss->nh, nl = ss->nl;
  for (int c = 0; c < ss->cs.n_cand; c++) {
    rg_prompt_score_row r = {.step = step, .kind = "candidate", .pos = ss->cand[c].pos, .layer = ss->cand[c].layer};
    for (int i = 0; i < nh; i++) {
      r.split = "harmful_val", r.prompt = ss->hv[i], r.measure = "bypass", r.value = ss->bypass[(size_t)c * nh + i];
      if (add_pscore(st, r) < 0) return -1;
    }
    for (int i = 0; i < nl; i++) {
      r.split = "harmless_val", r.prompt = ss->lv[i];
      r.measure = "induce", r.value = ss->induce[(size_t)c * nl + i];
      if (add_pscore(st, r) < 0) return -1;
      r.measure = "kl", r.value = ss->kl[(size_t)c * nl + i];
      if (add_pscore(st, r) < 0) return -1;
    }
  }
  for (int j = 0; j < ss->cs.n_null; j++) {
    rg_prompt_score_row r = {.step = step, .kind = "null", .null_index = j};
    for (int i = 0; i < nh; i++) {
      r.split = "harmful_val", r.prompt = ss->hv[i], r.measure = "bypass";
      r.value = ss->null_bypass[(size_t)j * nh + i];
      if (add_pscore(st, r) < 0) return -1;
    }
    for (int i = 0; i < nl; i++) {
      r.split = "harmless_val", r.prompt = ss->lv[i], r.measure = "kl", r.value = ss->null_kl[(size_t)j * nl + i];
      if (add_pscore(st, r) < 0) return -1;
    }
  }
  for (int i = 0; i < nh; i++) {
    rg_prompt_score_row r = {.step = step, .kind = "base", .split = "harmful_val", .prompt = ss->hv[i],
                             .measure = "score", .value = ss->base_h[i]};
    if (add_pscore(st, r) < 0) return -1;
  }
  for (int i = 0; i < nl; i++) {
    rg_prompt_score_row r = {.step = step, .kind = "base", .split = "harmless_val", .prompt = ss->lv[i],
                             .measure = "score", .value = ss->base_l[i]};
    if (add_pscore(st, r) < 0) return -1;
  }
  return 0;
}

/* sensitivity.csv rows: the selection under each KL budget of the table. */
static int record_sensitivity(run_state *st, long step, const rg_candidate *c, int n_cand) {
  for (int t = 0; t < N_TAU; t++) {
    rg_selection_rules rules = st->plan->rules;
    rules.kl_max = SENSITIVITY_TAU[t];
    rg_selection sel;
    if (rg_select(c, n_cand, st->L, &rules, &sel) < 0) return -1;
    rg_sensitivity_row *r = &st->sens[st->n_sens++];
    *r = (rg_sensitivity_row){.step = step, .kl_max = rules.kl_max, .n_admissible = sel.n_admissible,
                              .best_layer = -1, .best_bypass = NAN};
    if (sel.best >= 0)
      r->best_pos = c[sel.best].pos, r->best_layer = c[sel.best].layer, r->best_bypass = c[sel.best].bypass;
    rg_selection_free(&sel);
  }
  return 0;
}

/* pareto.csv rows: finite candidates that no other beats on both bypass
 * and KL (ties on both keep the first in RD's loop order). */
static void record_pareto(run_state *st, long step, const rg_candidate *c, int n_cand) {
  for (int i = 0; i < n_cand; i++) {
    if (!isfinite(c[i].bypass) || !isfinite(c[i].kl)) continue;
    int dominated = 0;
    for (int j = 0; j < n_cand && !dominated; j++) {
      if (j == i || !isfinite(c[j].bypass) || !isfinite(c[j].kl)) continue;
      int no_worse = c[j].bypass <= c[i].bypass && c[j].kl <= c[i].kl;
      int better = c[j].bypass < c[i].bypass || c[j].kl < c[i].kl;
      dominated = no_worse && (better || j < i);
    }
    if (!dominated)
      st->pareto[st->n_pareto++] =
          (rg_pareto_row){.step = step, .pos = c[i].pos, .layer = c[i].layer, .bypass = c[i].bypass, .kl = c[i].kl};
  }
}

/* Logs the three spectra of the best carrier; returns the carrier-matrix one
 * (the migration.csv default) in *carrier. */
static int best_spectra(run_state *st, long step, const rg_diff_means *dm, const train_set *t, int best_pi,
                        int best_l, rg_spectrum_measures *carrier) {
  int rows = t->nh > st->L ? t->nh : st->L;
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
    rows_to_double(st, t->harm, t->nh_all, t->hi, t->nh, best_l, best_pi, M);
    rg_matrix_subtract_row(M, t->nh, st->d, nu);
    rc = rg_matrix_spectrum_measures(M, t->nh, st->d, &pd);
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
 * selected carrier BEST (NULL: none) for directions.h5. */
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

/* The step's prompt counts, score and status fields of migration.csv. */
static void fill_prompt_fields(run_state *st, int si, const rg_step_prompts *sp) {
  rg_migration_row *mr = &st->mig[si];
  for (int k = 0; k < RG_N_SPLITS; k++) mr->kept[k] = sp->kept[k], mr->total[k] = sp->total[k];
  mr->refusal_tokens = st->tokens[si];
  mr->refusal_coverage = sp->coverage;
  mr->score_auroc = sp->score_auroc;
}

static void log_prompts(const run_state *st, const rg_checkpoint *ck, const rg_step_prompts *sp, const char *tokens) {
  if (!st->o->log) return;
  fprintf(st->o->log,
          "step %ld: refusal tokens %s (%s) | score AUROC %.3f on %d refused / %d complied harmful val replies%s | "
          "kept harmful %d/%d train %d/%d val, harmless %d/%d train %d/%d val [%.1f s]\n",
          ck->step, *tokens ? tokens : "none", st->plan->refusal_tokens, sp->score_auroc, sp->val_refused,
          sp->val_complied,
          isfinite(sp->score_auroc) && sp->score_auroc < st->plan->score_auroc_min ? " (below the plan's minimum)" : "",
          sp->kept[0], sp->total[0], sp->kept[2], sp->total[2], sp->kept[1], sp->total[1], sp->kept[3], sp->total[3],
          elapsed(st));
}

/* Keeps what the transfer pass needs of a scored step: its best candidate
 * C (NULL: none) with direction DIR, its val prompts and refusal tokens. */
static int keep_transfer_end(run_state *st, int si, const rg_candidate *c, const double *dir, const step_scores *ss) {
  transfer_end *e = &st->ends[si];
  e->layer = -1;
  e->hv = malloc((size_t)ss->nh * sizeof *e->hv);
  e->lv = malloc((size_t)ss->nl * sizeof *e->lv);
  if (!e->hv || !e->lv) return rg_error_set("geometry: out of memory");
  memcpy(e->hv, ss->hv, (size_t)ss->nh * sizeof *e->hv);
  memcpy(e->lv, ss->lv, (size_t)ss->nl * sizeof *e->lv);
  e->nh = ss->nh;
  e->nl = ss->nl;
  if (c) {
    if (!(e->dir = malloc((size_t)st->d * sizeof *e->dir))) return rg_error_set("geometry: out of memory");
    memcpy(e->dir, dir, (size_t)st->d * sizeof *e->dir);
    e->pos = c->pos;
    e->layer = c->layer;
  }
  return 0;
}

/* With the plan's transfer_layers: step SI's best direction at each scored
 * layer, the position with the lowest finite mean bypass (RD's key score;
 * the first of equal ones), among the candidates C[n_cand]. */
static int keep_layer_dirs(run_state *st, int si, const rg_candidate *c, int n_cand) {
  transfer_end *e = &st->ends[si];
  e->layer_dir = malloc((size_t)st->L * st->d * sizeof *e->layer_dir);
  e->layer_pos = calloc((size_t)st->L, sizeof *e->layer_pos);
  if (!e->layer_dir || !e->layer_pos) return rg_error_set("geometry: out of memory");
  for (int l = st->lo; l < st->hi; l++) {
    int best = -1;
    for (int k = 0; k < n_cand; k++)
      if (c[k].layer == l && isfinite(c[k].bypass) && (best < 0 || c[k].bypass < c[best].bypass)) best = k;
    if (best < 0) continue;
    e->layer_pos[l] = c[best].pos;
    memcpy(e->layer_dir + (size_t)l * st->d, dir_at(st, st->cur, c[best].pos + st->n_pos, l),
           (size_t)st->d * sizeof *e->layer_dir);
  }
  return 0;
}

/* Selection, null, bootstrap and the tables of a scored step. */
static int decide_step(run_state *st, int si, const step_scores *ss, const rg_diff_means *dm, const train_set *t) {
  const rg_checkpoint *ck = &st->series->items[si];
  const int n_cand = ss->cs.n_cand;
  rg_migration_row *mr = &st->mig[si];
  rg_verdict_step *vs = &st->vsteps[si];
  rg_candidate *c = malloc((size_t)n_cand * sizeof *c);
  rg_selection sel = {0};
  int rc = -1, best = -1, n_adm = 0;
  double p5;
  if (!c) return rg_error_set("geometry: out of memory");
  if (rg_carrier_means(&ss->cs, NULL, NULL, c, &p5) < 0 || rg_select(c, n_cand, st->L, &st->plan->rules, &sel) < 0 ||
      rg_carrier_select(c, n_cand, st->L, &st->plan->rules, p5, &best, &n_adm) < 0)
    goto end;
  rg_carrier_rows_fill(st->car + st->n_car, ck->step, c, &sel);
  st->n_car += n_cand;
  if (record_sensitivity(st, ck->step, c, n_cand) < 0 || record_prompt_scores(st, ck->step, ss) < 0) goto end;
  record_pareto(st, ck->step, c, n_cand);
  /* migration.csv names the selection's best even when it loses to the null
   * (status says so); only a carrier is marked in directions.h5 */
  int shown = sel.best;
  const double *dir = shown >= 0 ? dir_at(st, st->cur, c[shown].pos + st->n_pos, c[shown].layer) : NULL;
  if (si == 0 && best >= 0) {
    memcpy(st->best0, dir, (size_t)st->d * sizeof(double));
    st->have_best0 = 1;
  }
  record_directions(st, si, best >= 0 ? &c[best] : NULL);
  if (keep_transfer_end(st, si, shown >= 0 ? &c[shown] : NULL, dir, ss) < 0 ||
      (st->plan->transfer_layers && keep_layer_dirs(st, si, c, n_cand) < 0))
    goto end;
  rg_migration_row_fill(mr, ck->step, c, &sel, st->L, &st->plan->bands, dir, st->have_best0 ? st->best0 : NULL,
                        st->d);
  rg_step_status status =
      best >= 0 ? RG_STEP_CARRIER : sel.n_admissible > 0 ? RG_STEP_BELOW_NULL : RG_STEP_NONE_ADMISSIBLE;
  mr->null_bypass_p5 = p5;
  mr->base_harmful = mean_of(ss->base_h, ss->nh);
  mr->base_harmless = mean_of(ss->base_l, ss->nl);
  rg_bootstrap_result b = {0};
  if (st->plan->bootstrap > 0) {
    if (rg_carrier_bootstrap(&ss->cs, shown, st->plan->bootstrap, rg_mix64(st->plan->seed ^ (uint64_t)ck->step), &b) <
        0)
      goto end;
  } else {
    /* no resamples: the point estimate is the interval */
    double at = shown >= 0 ? c[shown].layer : NAN;
    b = (rg_bootstrap_result){.carrier_share = best >= 0, .layer_lo = at, .layer_hi = at, .bypass_lo = NAN,
                              .bypass_hi = NAN, .induce_lo = NAN, .induce_hi = NAN, .kl_lo = NAN, .kl_hi = NAN};
  }
  if (status == RG_STEP_CARRIER && !(b.carrier_share >= RG_CARRIER_SHARE_MIN)) status = RG_STEP_UNSTABLE;
  mr->status = rg_step_status_name(status);
  mr->carrier_share = b.carrier_share;
  mr->layer_lo = b.layer_lo, mr->layer_hi = b.layer_hi;
  mr->bypass_lo = b.bypass_lo, mr->bypass_hi = b.bypass_hi;
  mr->induce_lo = b.induce_lo, mr->induce_hi = b.induce_hi;
  mr->kl_lo = b.kl_lo, mr->kl_hi = b.kl_hi;
  if (shown >= 0) {
    mr->matrix = "carrier";
    if (best_spectra(st, ck->step, dm, t, c[shown].pos + st->n_pos, c[shown].layer, &mr->spectrum) < 0) goto end;
  }
  *vs = (rg_verdict_step){.step = ck->step, .status = status, .layer = shown >= 0 ? c[shown].layer : -1,
                          .layer_lo = b.layer_lo, .layer_hi = b.layer_hi, .erank_sigma = mr->spectrum.erank_sigma};
  if (st->o->log) {
    if (shown >= 0)
      fprintf(st->o->log,
              "step %ld: %s: pos %d layer %d (%s, depth %.3f, 95%% interval %g-%g, in %.0f%% of resamples): bypass "
              "%.4f (null p5 %.4f) induce %.4f kl %.4f; %d admissible of %d; drift from step 0 %.3f deg [%.1f s]\n",
              ck->step, mr->status, mr->best_pos, mr->best_layer, mr->label, mr->rel_depth, b.layer_lo, b.layer_hi,
              100 * b.carrier_share, mr->bypass, p5, mr->induce, mr->kl, sel.n_admissible, n_cand,
              mr->angle_vs_step0_deg, elapsed(st));
    else
      fprintf(st->o->log, "step %ld: none admissible of %d candidates [%.1f s]\n", ck->step, n_cand, elapsed(st));
  }
  rc = 0;
end:
  rg_selection_free(&sel);
  free(c);
  return rc;
}

/* A step without enough refusal (or with every harmless prompt of a split
 * refused): its tables say so, nothing is scored. */
static void unscored_step(run_state *st, int si, const rg_step_prompts *sp, rg_step_status status) {
  const rg_checkpoint *ck = &st->series->items[si];
  rg_migration_row *mr = &st->mig[si];
  rg_selection none = {.best = -1};
  rg_migration_row_fill(mr, ck->step, NULL, &none, st->L, &st->plan->bands, NULL, NULL, st->d);
  mr->status = rg_step_status_name(status);
  st->vsteps[si] = (rg_verdict_step){.step = ck->step, .status = status, .layer = -1,
                                     .layer_lo = NAN, .layer_hi = NAN, .erank_sigma = NAN};
  record_directions(st, si, NULL);
  if (st->o->log)
    fprintf(st->o->log,
            "step %ld: %s (kept: %d harmful train, %d harmful val, %d harmless train, %d harmless val; %d needed in "
            "each) [%.1f s]\n",
            ck->step, mr->status, sp->kept[RG_SPLIT_HARMFUL_TRAIN], sp->kept[RG_SPLIT_HARMFUL_VAL],
            sp->kept[RG_SPLIT_HARMLESS_TRAIN], sp->kept[RG_SPLIT_HARMLESS_VAL], st->plan->n_min, elapsed(st));
}

/* An AUROC a probe must reach to read the checkpoint's refusals (issue 42's
 * "earliest layer reaching 0.8"). */
static const double PROBE_AUROC = 0.8;

/* probes.csv rows of one step: for every (p, l), how well the projection of
 * the harmful val prompts onto r-hat[p, l] separates those the checkpoint
 * refuses from those it answers (its own replies, not harmful vs harmless,
 * which would measure harmfulness). Returns the earliest layer that reaches
 * PROBE_AUROC at some position (NaN if none) in *FIRST. */
static int record_probes(run_state *st, long step, const rg_step_prompts *sp, double *first) {
  float *acts = NULL;
  int n = 0, n_pos = 0;
  *first = NAN;
  if (rg_acts_read_site(st->rd, step, "harmful_val", RG_HOOK_RESID_PRE, &acts, &n, &n_pos) < 0) return -1;
  if (n != sp->total[RG_SPLIT_HARMFUL_VAL] || n_pos != st->n_pos) {
    free(acts);
    return rg_error_set("%s: step %ld: %d harmful val activations at %d positions, but %d prompts at %d",
                        rg_acts_reader_path(st->rd), step, n, n_pos, sp->total[RG_SPLIT_HARMFUL_VAL], st->n_pos);
  }
  int *all = malloc((size_t)(n ? n : 1) * sizeof *all);
  double *X = malloc((size_t)(n ? n : 1) * st->d * sizeof *X), *proj = malloc((size_t)(n ? n : 1) * sizeof *proj);
  int rc = all && X && proj ? 0 : rg_error_set("geometry: out of memory");
  for (int i = 0; i < n; i++) all[i] = i;
  for (int l = 0; rc == 0 && l < st->L; l++)
    for (int pi = 0; pi < st->n_pos; pi++) {
      rows_to_double(st, acts, n, all, n, l, pi, X);
      rg_project_rows(X, n, st->d, dir_at(st, st->cur, pi, l), proj);
      rg_probe_row *r = &st->probes[st->n_probes++];
      *r = (rg_probe_row){.step = step, .layer = l, .pos = pi - st->n_pos};
      r->auroc = rg_auroc_split(proj, sp->refused_val, n, &r->n_refused, &r->n_complied);
      if (isnan(*first) && r->auroc >= PROBE_AUROC) *first = l;
    }
  free(acts);
  free(all);
  free(X);
  free(proj);
  return rc;
}

static int run_step(run_state *st, int si) {
  const rg_checkpoint *ck = &st->series->items[si];
  train_set t = {0};
  rg_diff_means *dm = NULL;
  rg_step_prompts sp = {0};
  step_scores ss = {0};
  rg_model *m = NULL;
  rg_weights *w = NULL;
  int rc = -1;
  if (!(m = rg_model_load(ck->path))) goto end;
  if (m->cfg.n_layers != st->L || m->cfg.d_model != st->d) {
    rg_error_set("%s: %d layers x d_model %d, but the activations have %d x %d", ck->path, m->cfg.n_layers,
                 m->cfg.d_model, st->L, st->d);
    goto end;
  }
  rg_backend_opts bo = {.threads = st->o->threads};
  if (!(w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO))) goto end;
  const rg_acts_reader_info *info = rg_acts_reader_info_of(st->rd);
  if (rg_step_prompts_fit(w, st->rd, ck->step, st->plan, st->judge, info->chat_template, st->o->toward_target,
                          &sp) < 0)
    goto end;
  if (load_train(st, ck->step, &sp, &t, &dm) < 0) goto end;
  if (si == 0 && alloc_state(st) < 0) goto end;
  rg_step_prompts_token_list(&sp, st->tokens[si], TOKENS_LEN);
  log_prompts(st, ck, &sp, st->tokens[si]);
  for (int pi = 0; pi < st->n_pos; pi++)
    for (int l = 0; l < st->L; l++)
      if (rg_diff_means_direction(dm, pi, l, dir_at(st, st->cur, pi, l)) < 0) goto end;
  double probe_layer;
  if (geometry_rows(st, si, &t, dm) < 0 || record_probes(st, ck->step, &sp, &probe_layer) < 0) goto end;
  if (st->o->log)
    fprintf(st->o->log, "step %ld: directions of %d positions x %d layers from %d harmful / %d harmless train "
                        "prompts (%s) [%.1f s]\n",
            ck->step, st->n_pos, st->L, t.nh, t.nl, t.prompts, elapsed(st));
  /* N_min kept prompts in every split: refused harmful ones (train: the
   * direction; val: the scores and their intervals, which a handful of
   * prompts would make look tight), and harmless ones not refused */
  const int n_min = st->plan->n_min;
  bool refusal = sp.n_refusal > 0 && sp.kept[RG_SPLIT_HARMFUL_TRAIN] >= n_min && sp.kept[RG_SPLIT_HARMFUL_VAL] >= n_min;
  bool contrast = sp.kept[RG_SPLIT_HARMLESS_TRAIN] >= n_min && sp.kept[RG_SPLIT_HARMLESS_VAL] >= n_min;
  if (!refusal || !contrast) {
    unscored_step(st, si, &sp, refusal ? RG_STEP_NO_CONTRAST : RG_STEP_NO_REFUSAL);
  } else {
    if (score_step(st, si, w, &sp, &ss) < 0 || decide_step(st, si, &ss, dm, &t) < 0) goto end;
    transfer_end *e = &st->ends[si];
    e->mode = sp.mode;
    e->n_refusal = sp.n_refusal;
    e->n_compliance = sp.n_compliance;
    memcpy(e->refusal, sp.refusal, sizeof sp.refusal);
    memcpy(e->compliance, sp.compliance, sizeof sp.compliance);
  }
  fill_prompt_fields(st, si, &sp);
  st->mig[si].probe_layer = probe_layer;
  if (si == 0) memcpy(st->dirs0, st->cur, (size_t)st->n_pos * st->L * st->d * sizeof(double));
  double *tmp = st->prev;
  st->prev = st->cur;
  st->cur = tmp;
  rc = 0;
end:
  step_scores_free(&ss);
  rg_step_prompts_free(&sp);
  train_set_free(&t);
  rg_diff_means_free(dm);
  rg_weights_free(w);
  rg_model_free(m);
  return rc;
}

static int write_tables(run_state *st, int n_steps) {
  return rg_write_geometry_csv(st->geo_path, st->geo, st->n_geo) < 0 ||
                 rg_write_carriers_csv(st->car_path, st->car, st->n_car) < 0 ||
                 rg_write_migration_csv(st->mig_path, st->mig, n_steps) < 0 ||
                 rg_write_sensitivity_csv(st->sens_path, st->sens, st->n_sens) < 0 ||
                 rg_write_pareto_csv(st->pareto_path, st->pareto, st->n_pareto) < 0 ||
                 rg_write_prompt_scores_csv(st->scores_path, st->pscores, st->n_pscores) < 0 ||
                 rg_write_probes_csv(st->probes_path, st->probes, st->n_probes) < 0 ||
                 rg_directions_write(st->dir_path, st->L, st->n_pos, st->d, st->dir_steps, n_steps) < 0
             ? -1
             : 0;
}

/* verdict.json, and its words in verdict.txt (and the log): the verdict
 * line, then one line per claim of Lan et al. */
static int write_verdict(run_state *st) {
  rg_verdict v;
  rg_lan_claim claims[RG_LAN_CLAIMS];
  int n = st->series->n;
  rg_verdict_decide(st->vsteps, n, st->L, &st->plan->bands, &v);
  rg_lan_claims_check(st->vsteps, n, st->L, &st->plan->bands, &v, claims);
  if (rg_verdict_write_json(st->verdict_path, st->plan_sha, &v, claims, st->mig, n, st->L) < 0) return -1;
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return rg_error_set("geometry: out of memory");
  fprintf(mem, "verdict: %s: %s\n", v.verdict, v.reason);
  for (int i = 0; i < RG_LAN_CLAIMS; i++)
    fprintf(mem, "  Lan et al. 2026: %s: %s (%s)\n", claims[i].claim, claims[i].outcome, claims[i].why);
  fclose(mem);
  int rc = rg_write_file_atomic(st->verdict_txt_path, text, len);
  if (rc == 0 && st->o->log) fputs(text, st->o->log);
  free(text);
  return rc;
}

/* The transfer pass: every step's best direction in every scored step's
 * model. Ablated there (bypass on that step's kept harmful val prompts) and
 * added at its own layer (induce on its kept harmless ones), with that
 * step's refusal measure, so that a carrier that moved shows as step 0's
 * direction losing its effect at step k while step k's works. */
static int transfer_pass(run_state *st) {
  const int n = st->series->n;
  int rc = 0;
  for (int j = 0; j < n && rc == 0; j++) {
    const transfer_end *to = &st->ends[j];
    if (to->nh == 0) continue; /* not scored: no refusal to carry */
    const rg_checkpoint *ck = &st->series->items[j];
    rg_model *m = rg_model_load(ck->path);
    rg_backend_opts bo = {.threads = st->o->threads};
    rg_weights *w = m ? rg_weights_open(m, &bo, RG_WEIGHTS_AUTO) : NULL;
    int32_t **ids[RG_N_SPLITS] = {0};
    int *lens[RG_N_SPLITS] = {0}, count[RG_N_SPLITS] = {0};
    rg_scorer *sc = NULL;
    double *b = malloc((size_t)to->nh * sizeof *b), *k = malloc((size_t)to->nl * sizeof *k);
    double *in = malloc((size_t)to->nl * sizeof *in), *bh = malloc((size_t)to->nh * sizeof *bh);
    double *bl = malloc((size_t)to->nl * sizeof *bl);
    rc = w && b && k && in && bh && bl ? 0 : -1;
    if (!b || !k || !in || !bh || !bl) rg_error_set("geometry: out of memory");
    for (int sp = RG_SPLIT_HARMFUL_VAL; rc == 0 && sp <= RG_SPLIT_HARMLESS_VAL; sp++)
      rc = rg_acts_read_token_ids(st->rd, ck->step, RG_SPLIT_NAMES[sp], &ids[sp], &lens[sp], &count[sp]);
    const rg_refusal_measure rm = {.mode = to->mode,
                                   .refusal = to->refusal,
                                   .n_refusal = to->n_refusal,
                                   .compliance = to->compliance,
                                   .n_compliance = to->n_compliance};
    if (rc == 0 && !(sc = val_scorer(w, ids, lens, to->hv, to->nh, to->lv, to->nl, &rm))) rc = -1;
    if (rc == 0) rg_scorer_base_each(sc, bh, bl);
    for (int i = 0; i < n && rc == 0; i++) {
      const transfer_end *from = &st->ends[i];
      /* the carrier, then (transfer_layers) every layer's best direction */
      for (int l = from->layer_dir ? st->lo - 1 : -1; l < (from->layer_dir ? st->hi : 0) && rc == 0; l++) {
        const bool carrier = l < st->lo;
        if (carrier ? from->layer < 0 : from->layer_pos[l] == 0) continue;
        const double *dir = carrier ? from->dir : from->layer_dir + (size_t)l * st->d;
        const int layer = carrier ? from->layer : l;
        if ((rc = rg_scorer_ablate_each(sc, dir, b, k)) < 0 || (rc = rg_scorer_induce_each(sc, dir, layer, in)) < 0)
          break;
        st->transfer[st->n_transfer++] = (rg_transfer_row){.from_step = st->series->items[i].step,
                                                           .to_step = ck->step,
                                                           .pos = carrier ? from->pos : from->layer_pos[l],
                                                           .layer = layer,
                                                           .carrier = carrier,
                                                           .bypass = mean_of(b, to->nh),
                                                           .induce = mean_of(in, to->nl),
                                                           .base_harmful = mean_of(bh, to->nh),
                                                           .base_harmless = mean_of(bl, to->nl)};
      }
    }
    if (rc < 0) rg_error_prefix("transfer into step %ld", ck->step);
    if (st->o->log && rc == 0)
      fprintf(st->o->log, "transfer: every step's best direction scored in step %ld's model [%.1f s]\n", ck->step,
              elapsed(st));
    for (int sp = 0; sp < RG_N_SPLITS; sp++) rg_acts_token_ids_free(ids[sp], lens[sp], count[sp]);
    rg_scorer_free(sc);
    free(b), free(k), free(in), free(bh), free(bl);
    rg_weights_free(w);
    rg_model_free(m);
  }
  return rc == 0 ? rg_write_transfer_csv(st->transfer_path, st->transfer, st->n_transfer) : -1;
}

static void free_state(run_state *st) {
  rg_acts_reader_close(st->rd);
  rg_refusal_list_free(st->judge);
  char *paths[] = {st->geo_path,      st->car_path,     st->mig_path,     st->dir_path,
                   st->sens_path,     st->pareto_path,  st->scores_path,  st->probes_path,
                   st->transfer_path, st->verdict_path, st->verdict_txt_path};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) free(paths[i]);
  free(st->dirs_f32);
  free(st->dir_steps);
  free(st->geo);
  free(st->hooks);
  free(st->car);
  free(st->mig);
  free(st->tokens);
  free(st->vsteps);
  free(st->sens);
  free(st->pareto);
  free(st->probes);
  for (int i = 0; st->ends && i < st->series->n; i++) {
    free(st->ends[i].dir);
    free(st->ends[i].layer_dir);
    free(st->ends[i].layer_pos);
    free(st->ends[i].hv);
    free(st->ends[i].lv);
  }
  free(st->ends);
  free(st->transfer);
  free(st->pscores);
  free(st->dirs0);
  free(st->prev);
  free(st->cur);
  free(st->best0);
}

/* Checks the series against the file and the plan against the data. */
static int check_inputs(run_state *st, const char *acts_path) {
  const rg_acts_reader_info *info = rg_acts_reader_info_of(st->rd);
  const rg_verdict_plan *p = st->plan;
  st->L = info->n_layers;
  st->d = info->d_model;
  st->lo = p->layer_lo;
  st->hi = p->layer_hi > 0 ? p->layer_hi : st->L;
  if (st->lo < 0 || st->lo >= st->hi || st->hi > st->L)
    return rg_error_set("%s: layer range %d:%d is not a non-empty range inside [0, %d)", acts_path, p->layer_lo, st->hi,
                        st->L);
  for (int i = 0; i < st->series->n; i++) {
    int found = 0;
    for (int j = 0; j < info->n_steps; j++) found |= info->steps[j] == st->series->items[i].step;
    if (!found)
      return rg_error_set("%s: step %ld (%s) is not captured (or incomplete)", acts_path, st->series->items[i].step,
                          st->series->items[i].path);
  }
  /* N_min counts the kept prompts of every split: more than the file holds
   * can never be met */
  static const char *const splits[] = {"harmful_train", "harmful_val", "harmless_train", "harmless_val"};
  for (int k = 0; k < 4; k++) {
    int32_t **ids = NULL;
    int *lens = NULL, n = 0;
    if (rg_acts_read_token_ids(st->rd, st->series->items[0].step, splits[k], &ids, &lens, &n) < 0) return -1;
    rg_acts_token_ids_free(ids, lens, n);
    if (p->n_min > n)
      return rg_error_set("%s: n_min %d is more than the %d %s prompts captured", acts_path, p->n_min, n, splits[k]);
  }
  return 0;
}

int rg_geometry_run(const char *acts_path, const rg_checkpoint_series *series, const char *out_dir,
                    const rg_geometry_opts *o) {
  run_state st = {.o = o, .plan = &o->plan, .series = series};
  st.t0 = rg_now_seconds();
  int rc = -1;
  if (!series || series->n < 1 || series->items[0].step != 0) {
    rg_error_set("geometry: the checkpoint series must start at step 0");
    return -1;
  }
  if (rg_verdict_plan_check(&o->plan) < 0) return -1;
  if (!o->refusal_substrings) return rg_error_set("geometry: no refusal substrings file for judging replies");
  if (!(st.rd = rg_acts_reader_open(acts_path))) return -1;
  if (check_inputs(&st, acts_path) < 0) goto end;
  if (!(st.judge = rg_refusal_list_load(RG_REFUSAL_HB_ATTACK, o->refusal_substrings))) goto end;
  if (rg_mkdir_p(out_dir) < 0) goto end;
  const char *names[] = {"geometry.csv", "carriers.csv",      "migration.csv", "directions.h5",
                         "sensitivity.csv", "pareto.csv",   "prompt_scores.csv", "probes.csv",
                         "transfer.csv", "verdict.json",    "verdict.txt"};
  char **paths[] = {&st.geo_path,      &st.car_path,     &st.mig_path,     &st.dir_path,
                    &st.sens_path,     &st.pareto_path,  &st.scores_path,  &st.probes_path,
                    &st.transfer_path, &st.verdict_path, &st.verdict_txt_path};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!(*paths[i] = rg_path_join(out_dir, names[i]))) {
      rg_error_set("%s: out of memory", out_dir);
      goto end;
    }
  if (rg_verdict_plan_pin(&o->plan, out_dir, o->start_over) < 0 || rg_verdict_plan_sha256(&o->plan, st.plan_sha) < 0)
    goto end;
  /* a verdict exists only for a finished run: an old one must not outlive a rerun */
  if ((rg_path_exists(st.verdict_path) && remove(st.verdict_path) != 0) ||
      (rg_path_exists(st.verdict_txt_path) && remove(st.verdict_txt_path) != 0)) {
    rg_error_set("%s: cannot remove the previous verdict", out_dir);
    goto end;
  }
  if (o->log) fprintf(o->log, "geometry: plan sha256 %s (%s/plan.ini)\n", st.plan_sha, out_dir);
  for (int si = 0; si < series->n; si++)
    if (run_step(&st, si) < 0 || write_tables(&st, si + 1) < 0) goto end;
  if (transfer_pass(&st) < 0 || write_verdict(&st) < 0) goto end;
  if (o->log) fprintf(o->log, "geometry: %d steps done, tables in %s [%.1f s]\n", series->n, out_dir, elapsed(&st));
  rc = 0;
end:
  free_state(&st);
  return rc;
}
