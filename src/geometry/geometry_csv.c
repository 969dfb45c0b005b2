/* geometry_csv.c: writers of the three geometry result tables (geometry_csv.h). */
#include "geometry/geometry_csv.h"

#include "util/csv_write.h"
#include "util/error.h"

/* Writes one row's fields; returns 0 or -1 (error set by the writer). */
typedef int (*row_writer)(rg_csv_writer *w, const void *rows, int i);

static int write_table(const char *path, const char *const *header, int n_cols, const void *rows, int n,
                       row_writer write_row) {
  rg_csv_writer w;
  if (rg_csv_writer_open(&w, path, header, n_cols) != 0) return -1;
  for (int i = 0; i < n; i++) {
    if (write_row(&w, rows, i) != 0 || rg_csv_writer_end_row(&w) != 0) {
      rg_csv_writer_abort(&w);
      return -1;
    }
  }
  return rg_csv_writer_close(&w);
}

/* Field writers are chained with || so that they run left to right and stop
 * at the first failure (| would leave the order unspecified). */
static int put_spectrum(rg_csv_writer *w, const rg_spectrum_measures *s, const char *matrix) {
  if (rg_csv_writer_double(w, s->erank_sigma) || rg_csv_writer_double(w, s->erank_sigma2) ||
      rg_csv_writer_double(w, s->participation_ratio) || rg_csv_writer_str(w, matrix))
    return -1;
  return 0;
}

static int geometry_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_geometry_row *r = (const rg_geometry_row *)rows + i;
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_str(w, r->checkpoint) || rg_csv_writer_int(w, r->layer) ||
      rg_csv_writer_int(w, r->pos) || rg_csv_writer_str(w, r->hook) || rg_csv_writer_int(w, r->n_harmful) ||
      rg_csv_writer_int(w, r->n_harmless) || rg_csv_writer_double(w, r->dir_norm) ||
      rg_csv_writer_double(w, r->cos_step0) || rg_csv_writer_double(w, r->angle_step0_deg) ||
      rg_csv_writer_double(w, r->cos_prev) || rg_csv_writer_double(w, r->angle_prev_deg) ||
      rg_csv_writer_double(w, r->auroc) || put_spectrum(w, &r->spectrum, r->matrix) ||
      rg_csv_writer_str(w, r->prompts ? r->prompts : "all"))
    return -1;
  return 0;
}

int rg_write_geometry_csv(const char *path, const rg_geometry_row *rows, int n) {
  static const char *const header[] = {"step",      "checkpoint",      "layer",        "pos",
                                       "hook",      "n_harmful",       "n_harmless",   "dir_norm",
                                       "cos_step0", "angle_step0_deg", "cos_prev",     "angle_prev_deg",
                                       "auroc",     "erank_sigma",     "erank_sigma2", "participation_ratio",
                                       "matrix",    "prompts"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, geometry_row);
}

void rg_carrier_rows_fill(rg_carrier_row *out, long step, const rg_candidate *c, const rg_selection *sel) {
  for (int i = 0; i < sel->n_candidates; i++)
    out[i] = (rg_carrier_row){
        .step = step, .c = c[i], .reason = sel->reason[i], .fails = sel->fails[i], .rank = sel->rank[i]};
}

static int carrier_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_carrier_row *r = (const rg_carrier_row *)rows + i;
  int admissible = r->reason == RG_REJECT_NONE;
  /* rank is 1-based in the file (1 = best carrier) and empty when rejected */
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_int(w, r->c.pos) || rg_csv_writer_int(w, r->c.layer) ||
      rg_csv_writer_double(w, r->c.bypass) || rg_csv_writer_double(w, r->c.induce) ||
      rg_csv_writer_double(w, r->c.kl) || rg_csv_writer_int(w, admissible) ||
      rg_csv_writer_str(w, rg_reject_reason_name(r->reason)) ||
      (admissible ? rg_csv_writer_int(w, r->rank + 1) : rg_csv_writer_str(w, "")) ||
      rg_csv_writer_double(w, r->c.induce_norm) || rg_csv_writer_int(w, !(r->fails & RG_FAIL_NONFINITE)) ||
      rg_csv_writer_int(w, !(r->fails & RG_FAIL_LAYER)) || rg_csv_writer_int(w, !(r->fails & RG_FAIL_KL)) ||
      rg_csv_writer_int(w, !(r->fails & RG_FAIL_INDUCE)))
    return -1;
  return 0;
}

int rg_write_carriers_csv(const char *path, const rg_carrier_row *rows, int n) {
  static const char *const header[] = {"step",        "pos",         "layer",         "bypass",     "induce",
                                       "kl",          "admissible",  "reject_reason", "rank",       "induce_norm",
                                       "pass_finite", "pass_layer",  "pass_kl",       "pass_induce"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, carrier_row);
}

/* Without an admissible carrier the layer and position cells are empty. */
static int put_optional_int(rg_csv_writer *w, int present, long long v) {
  return present ? rg_csv_writer_int(w, v) : rg_csv_writer_str(w, "");
}

static int put_doubles(rg_csv_writer *w, const double *v, int n) {
  for (int i = 0; i < n; i++)
    if (rg_csv_writer_double(w, v[i])) return -1;
  return 0;
}

static int migration_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_migration_row *r = (const rg_migration_row *)rows + i;
  int has_best = r->best_layer >= 0;
  if (rg_csv_writer_int(w, r->step) || put_optional_int(w, has_best, r->best_layer) ||
      put_optional_int(w, has_best, r->best_pos) || rg_csv_writer_double(w, r->rel_depth) ||
      rg_csv_writer_str(w, r->label) || rg_csv_writer_double(w, r->bypass) || rg_csv_writer_double(w, r->induce) ||
      rg_csv_writer_double(w, r->kl) || rg_csv_writer_int(w, r->n_admissible) ||
      rg_csv_writer_double(w, r->angle_vs_step0_deg) || put_spectrum(w, &r->spectrum, r->matrix) ||
      rg_csv_writer_str(w, r->status))
    return -1;
  for (int k = 0; k < 4; k++)
    if (rg_csv_writer_int(w, r->kept[k]) || rg_csv_writer_int(w, r->total[k])) return -1;
  const double tail[] = {r->score_auroc,   r->base_harmful, r->base_harmless, r->null_bypass_p5,
                         r->carrier_share, r->layer_lo,     r->layer_hi,      r->bypass_lo,
                         r->bypass_hi,     r->induce_lo,    r->induce_hi,     r->kl_lo,
                         r->kl_hi,         r->probe_layer};
  if (rg_csv_writer_str(w, r->refusal_tokens ? r->refusal_tokens : "") ||
      rg_csv_writer_double(w, r->refusal_coverage) || put_doubles(w, tail, (int)(sizeof tail / sizeof tail[0])))
    return -1;
  return 0;
}

int rg_write_migration_csv(const char *path, const rg_migration_row *rows, int n) {
  static const char *const header[] = {
      "step",          "best_layer",          "best_pos",           "rel_depth",          "label",
      "bypass",        "induce",              "kl",                 "n_admissible",       "angle_vs_step0_deg",
      "erank_sigma",   "erank_sigma2",        "pr",                 "matrix",             "status",
      "harmful_train_kept", "harmful_train_total", "harmless_train_kept", "harmless_train_total", "harmful_val_kept",
      "harmful_val_total",  "harmless_val_kept",   "harmless_val_total",  "refusal_tokens",      "refusal_coverage",
      "score_auroc",   "base_harmful",        "base_harmless",      "null_bypass_p5",     "carrier_share",
      "layer_lo",      "layer_hi",            "bypass_lo",          "bypass_hi",          "induce_lo",
      "induce_hi",     "kl_lo",               "kl_hi",              "probe_layer"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, migration_row);
}

static int sensitivity_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_sensitivity_row *r = (const rg_sensitivity_row *)rows + i;
  int has = r->best_layer >= 0;
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_double(w, r->kl_max) || rg_csv_writer_int(w, r->n_admissible) ||
      put_optional_int(w, has, r->best_layer) || put_optional_int(w, has, r->best_pos) ||
      rg_csv_writer_double(w, r->best_bypass))
    return -1;
  return 0;
}

int rg_write_sensitivity_csv(const char *path, const rg_sensitivity_row *rows, int n) {
  static const char *const header[] = {"step", "kl_max", "n_admissible", "best_layer", "best_pos", "best_bypass"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, sensitivity_row);
}

static int pareto_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_pareto_row *r = (const rg_pareto_row *)rows + i;
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_int(w, r->pos) || rg_csv_writer_int(w, r->layer) ||
      rg_csv_writer_double(w, r->bypass) || rg_csv_writer_double(w, r->kl))
    return -1;
  return 0;
}

int rg_write_pareto_csv(const char *path, const rg_pareto_row *rows, int n) {
  static const char *const header[] = {"step", "pos", "layer", "bypass", "kl"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, pareto_row);
}

static int prompt_score_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_prompt_score_row *r = (const rg_prompt_score_row *)rows + i;
  int cand = r->kind[0] == 'c', null = r->kind[0] == 'n';
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_str(w, r->kind) || put_optional_int(w, cand, r->pos) ||
      put_optional_int(w, cand, r->layer) || put_optional_int(w, null, r->null_index) ||
      rg_csv_writer_str(w, r->split) || rg_csv_writer_int(w, r->prompt) || rg_csv_writer_str(w, r->measure) ||
      rg_csv_writer_double(w, r->value))
    return -1;
  return 0;
}

int rg_write_prompt_scores_csv(const char *path, const rg_prompt_score_row *rows, long n) {
  static const char *const header[] = {"step", "kind", "pos", "layer", "null_index", "split", "prompt", "measure",
                                       "value"};
  if (n > 0x7fffffff) return rg_error_set("%s: %ld rows is too many", path, n);
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, (int)n, prompt_score_row);
}

static int probe_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_probe_row *r = (const rg_probe_row *)rows + i;
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_int(w, r->layer) || rg_csv_writer_int(w, r->pos) ||
      rg_csv_writer_double(w, r->auroc) || rg_csv_writer_int(w, r->n_refused) || rg_csv_writer_int(w, r->n_complied))
    return -1;
  return 0;
}

int rg_write_probes_csv(const char *path, const rg_probe_row *rows, int n) {
  static const char *const header[] = {"step", "layer", "pos", "auroc", "n_refused", "n_complied"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, probe_row);
}

static int transfer_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_transfer_row *r = (const rg_transfer_row *)rows + i;
  if (rg_csv_writer_int(w, r->from_step) || rg_csv_writer_int(w, r->to_step) || rg_csv_writer_int(w, r->pos) ||
      rg_csv_writer_int(w, r->layer) || rg_csv_writer_int(w, r->carrier) || rg_csv_writer_double(w, r->bypass) ||
      rg_csv_writer_double(w, r->induce) ||
      rg_csv_writer_double(w, r->base_harmful) || rg_csv_writer_double(w, r->base_harmless))
    return -1;
  return 0;
}

int rg_write_transfer_csv(const char *path, const rg_transfer_row *rows, int n) {
  static const char *const header[] = {"from_step", "to_step", "pos",          "layer",        "carrier",
                                       "bypass",    "induce",  "base_harmful", "base_harmless"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, transfer_row);
}
