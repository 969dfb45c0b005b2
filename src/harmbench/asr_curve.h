/* asr_curve.h: ASR-versus-training-step tables, measured and published.
 *
 * Measured (asr.csv, one row per checkpoint step, attack and classifier):
 *   step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi
 * asr = successes / n and the Wilson 95% interval are derived columns: the
 * reader recomputes them from n and successes (only those are kept) and
 * rejects a file whose values disagree beyond the precision they are printed
 * with (half a unit in the cell's last digit, plus 1e-9), so a curve typed
 * from a paper ("0.0188", "1.88e-2") reads like the full-precision one.
 *
 * Published (the CSVs of data/published/, see its README.md): columns
 * source, method, attack, category, step, asr, n are read; step, asr and n
 * may be empty (a number that belongs to no step, a result given without a
 * number, an unstated sample size).
 *
 * Ownership: a curve owns its strings; the *_free functions release them.
 */
#ifndef RG_ASR_CURVE_H
#define RG_ASR_CURVE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  long step;
  char *attack;
  char *classifier;
  long n;
  long successes;
  size_t line; /* data row number in the file (1 = first row after the header) */
} rg_asr_point;

typedef struct {
  size_t n;
  rg_asr_point *items;
} rg_asr_curve;

/* 0, or -1 with the error naming the file and row. */
int rg_asr_curve_read(const char *path, rg_asr_curve *out);
/* Writes the measured table atomically, with the derived columns. */
int rg_asr_curve_write(const char *path, const rg_asr_curve *c);
void rg_asr_curve_free(rg_asr_curve *c);

typedef struct {
  bool has_step, has_asr;
  long step;
  double asr;
  long n; /* 0 when not stated */
  char *source, *method, *attack, *category;
  size_t line;
} rg_published_point;

typedef struct {
  size_t n;
  rg_published_point *items;
} rg_published_curve;

int rg_published_read(const char *path, rg_published_curve *out);
void rg_published_free(rg_published_curve *c);

#endif
