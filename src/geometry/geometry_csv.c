/* geometry_csv.c: writers of the three geometry result tables (geometry_csv.h). */
#include "geometry/geometry_csv.h"

#include "util/csv_write.h"

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
      rg_csv_writer_double(w, r->auroc) || put_spectrum(w, &r->spectrum, r->matrix))
    return -1;
  return 0;
}

int rg_write_geometry_csv(const char *path, const rg_geometry_row *rows, int n) {
  static const char *const header[] = {"step",      "checkpoint",      "layer",        "pos",
                                       "hook",      "n_harmful",       "n_harmless",   "dir_norm",
                                       "cos_step0", "angle_step0_deg", "cos_prev",     "angle_prev_deg",
                                       "auroc",     "erank_sigma",     "erank_sigma2", "participation_ratio",
                                       "matrix"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, geometry_row);
}

void rg_carrier_rows_fill(rg_carrier_row *out, long step, const rg_candidate *c, const rg_selection *sel) {
  for (int i = 0; i < sel->n_candidates; i++)
    out[i] = (rg_carrier_row){.step = step, .c = c[i], .reason = sel->reason[i], .rank = sel->rank[i]};
}

static int carrier_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_carrier_row *r = (const rg_carrier_row *)rows + i;
  int admissible = r->reason == RG_REJECT_NONE;
  /* rank is 1-based in the file (1 = best carrier) and empty when rejected */
  if (rg_csv_writer_int(w, r->step) || rg_csv_writer_int(w, r->c.pos) || rg_csv_writer_int(w, r->c.layer) ||
      rg_csv_writer_double(w, r->c.bypass) || rg_csv_writer_double(w, r->c.induce) ||
      rg_csv_writer_double(w, r->c.kl) || rg_csv_writer_int(w, admissible) ||
      rg_csv_writer_str(w, rg_reject_reason_name(r->reason)) ||
      (admissible ? rg_csv_writer_int(w, r->rank + 1) : rg_csv_writer_str(w, "")))
    return -1;
  return 0;
}

int rg_write_carriers_csv(const char *path, const rg_carrier_row *rows, int n) {
  static const char *const header[] = {"step", "pos",        "layer",         "bypass", "induce",
                                       "kl",   "admissible", "reject_reason", "rank"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, carrier_row);
}

/* Without an admissible carrier the layer and position cells are empty. */
static int put_optional_int(rg_csv_writer *w, int present, long long v) {
  return present ? rg_csv_writer_int(w, v) : rg_csv_writer_str(w, "");
}

static int migration_row(rg_csv_writer *w, const void *rows, int i) {
  const rg_migration_row *r = (const rg_migration_row *)rows + i;
  int has_best = r->best_layer >= 0;
  if (rg_csv_writer_int(w, r->step) || put_optional_int(w, has_best, r->best_layer) ||
      put_optional_int(w, has_best, r->best_pos) || rg_csv_writer_double(w, r->rel_depth) ||
      rg_csv_writer_str(w, r->label) || rg_csv_writer_double(w, r->bypass) || rg_csv_writer_double(w, r->induce) ||
      rg_csv_writer_double(w, r->kl) || rg_csv_writer_int(w, r->n_admissible) ||
      rg_csv_writer_double(w, r->angle_vs_step0_deg) || put_spectrum(w, &r->spectrum, r->matrix))
    return -1;
  return 0;
}

int rg_write_migration_csv(const char *path, const rg_migration_row *rows, int n) {
  static const char *const header[] = {"step",        "best_layer",   "best_pos", "rel_depth",    "label",
                                       "bypass",      "induce",       "kl",       "n_admissible", "angle_vs_step0_deg",
                                       "erank_sigma", "erank_sigma2", "pr",       "matrix"};
  return write_table(path, header, (int)(sizeof header / sizeof header[0]), rows, n, migration_row);
}
