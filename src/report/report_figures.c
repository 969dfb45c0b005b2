/* report_figures.c: the report's plots, as SVG and as the notebook's Python (report_figures.h). */
#include "report/report_figures.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/report_series.h"
#include "report/svg_heatmap.h"
#include "report/svg_plot.h"
#include "util/error.h"
#include "util/fileio.h"

/* ------------------------------------------------------------ Python text */

/* S as a Python string literal: double quotes, with backslash, quote and
 * control characters escaped (UTF-8 passes through: Python 3 source is
 * UTF-8). */
static void py_str(FILE *fp, const char *s) {
  fputc('"', fp);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\\' || c == '"') fprintf(fp, "\\%c", c);
    else if (c == '\n') fputs("\\n", fp);
    else if (c < 0x20 || c == 0x7f) fprintf(fp, "\\x%02x", c);
    else fputc(c, fp);
  }
  fputc('"', fp);
}

/* A table outside the run directory up to this size is written into the
 * notebook itself, so that the notebook needs nothing but the run directory
 * when it is moved or shared (the published curve lives in refgeo's data/,
 * which the reader may not have). Larger ones are read by absolute path. */
#define PY_EMBED_MAX (64 * 1024)

/* PATH's bytes when it is a file of at most PY_EMBED_MAX bytes with no NUL,
 * malloc'd and NUL-terminated; else NULL. */
static char *small_text_file(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > PY_EMBED_MAX) return NULL;
  size_t n = 0;
  char *text = rg_read_file(path, &n);
  if (text && memchr(text, 0, n)) {
    free(text);
    return NULL;
  }
  return text;
}

/* VAR = pd.read_csv(...): RUN / "inner/path" for a CSV below RUN_REAL (the
 * run directory); else the CSV's text itself when small (PY_EMBED_MAX),
 * else PATH made absolute. */
static void py_read_csv(FILE *fp, const char *var, const char *path, const char *run_real) {
  char abs[PATH_MAX];
  const char *p = realpath(path, abs) ? abs : path;
  size_t n = run_real ? strlen(run_real) : 0;
  if (n > 0 && strncmp(p, run_real, n) == 0 && p[n] == '/') {
    fprintf(fp, "%s = pd.read_csv(RUN / ", var);
    py_str(fp, p + n + 1);
    fputs(")\n", fp);
    return;
  }
  char *text = small_text_file(p);
  if (text) {
    fputs("# ", fp);
    for (const char *c = p; *c; c++) fputc((unsigned char)*c < 0x20 ? '?' : *c, fp); /* one comment line */
    fprintf(fp, ", outside the run directory: its text, as the report read it\n%s = pd.read_csv(io.StringIO(", var);
    py_str(fp, text);
    fputs("))\n", fp);
    free(text);
    return;
  }
  fprintf(fp, "%s = pd.read_csv(", var);
  py_str(fp, p);
  fputs(")\n", fp);
}

static const char PY_HEAD[] = "import io\nimport pandas as pd\nimport matplotlib.pyplot as plt\n\n";

/* ------------------------------------------------------------ line plots */

/* One line plot under construction: the series for the SVG and the Python
 * code that draws the same series. */
typedef struct {
  rg_series_set set;
  char *py_text;
  size_t py_size;
  FILE *py;
  int n_tables; /* CSVs read so far: names the Python variables t0, t1 ... */
  /* the rows the SVG was given, as a pandas method chain on the table read,
   * e.g. `.query("status == 'carrier'")` (NULL: all rows) */
  const char *py_rows;
  const char *run_real; /* rg_figures.run_real */
  bool x_from_zero;     /* rg_svg_plot.x_from_zero */
} plot_builder;

static int plot_begin(plot_builder *b, const rg_figures *f) {
  *b = (plot_builder){.run_real = f->run_real};
  if (!(b->py = open_memstream(&b->py_text, &b->py_size))) return rg_error_set("out of memory");
  fprintf(b->py, "%sfig, ax = plt.subplots(figsize=(8.6, 3.6))\n", PY_HEAD);
  return 0;
}

static void plot_discard(plot_builder *b) {
  if (b->py) fclose(b->py);
  free(b->py_text);
  rg_series_set_free(&b->set);
  *b = (plot_builder){0};
}

/* rg_series_from_csv's series, and the same in pandas: rows grouped by
 * GROUP_COLS in order of first appearance, each sorted by x (stable), the
 * band filled between LO_COL and HI_COL. */
static int plot_csv_series(plot_builder *b, const rg_csv *t, const char *x, const char *y, const char *lo,
                           const char *hi, const char *const *group_cols, int n_group, const char *prefix) {
  if (rg_series_from_csv(&b->set, t, x, y, lo, hi, group_cols, n_group, prefix) < 0) return -1;
  FILE *py = b->py;
  char var[16];
  snprintf(var, sizeof var, "t%d", b->n_tables++);
  py_read_csv(py, var, t->path, b->run_real);
  if (b->py_rows) fprintf(py, "%s = %s%s\n", var, var, b->py_rows);
  const char *indent = "";
  if (n_group > 0) {
    fprintf(py, "for key, g in %s.groupby([", var);
    for (int k = 0; k < n_group; k++) {
      if (k) fputs(", ", py);
      py_str(py, group_cols[k]);
    }
    fputs("], sort=False, dropna=False):\n", py);
    fputs("    key = key if isinstance(key, tuple) else (key,)\n", py);
    indent = "    ";
  } else {
    fprintf(py, "g = %s\n", var);
  }
  fprintf(py, "%sg = g.sort_values(", indent);
  py_str(py, x);
  fprintf(py, ", kind=\"stable\")\n%sline, = ax.plot(g[", indent);
  py_str(py, x);
  fputs("], g[", py);
  py_str(py, y);
  fputs("], marker=\"o\", markersize=4, label=", py);
  py_str(py, prefix);
  fputs(n_group > 0 ? " + \" / \".join(map(str, key)))\n" : ")\n", py);
  if (lo && hi) {
    fprintf(py, "%sax.fill_between(g[", indent);
    py_str(py, x);
    fputs("], g[", py);
    py_str(py, lo);
    fputs("], g[", py);
    py_str(py, hi);
    fputs("], color=line.get_color(), alpha=0.15, linewidth=0)\n", py);
  }
  return 0;
}

/* The published points (with a step and an ASR) as one dashed series per
 * attack and method; PATH is the published CSV. */
static int plot_published(plot_builder *b, const rg_published_curve *c, const char *path) {
  double *x = malloc((c->n + 1) * sizeof *x), *y = malloc((c->n + 1) * sizeof *y);
  int rc = x && y ? 0 : rg_error_set("out of memory");
  for (size_t i = 0; i < c->n && rc == 0; i++) {
    const rg_published_point *p = &c->items[i];
    size_t first = 0;
    while (first < i &&
           (strcmp(c->items[first].attack, p->attack) != 0 || strcmp(c->items[first].method, p->method) != 0))
      first++;
    if (first < i) continue; /* this attack and method were drawn with an earlier row */
    size_t n = 0;
    for (size_t j = i; j < c->n; j++) {
      const rg_published_point *q = &c->items[j];
      if (!q->has_step || !q->has_asr || strcmp(q->attack, p->attack) != 0 || strcmp(q->method, p->method) != 0)
        continue;
      x[n] = (double)q->step, y[n] = q->asr, n++;
    }
    if (n == 0) continue;
    char name[256];
    snprintf(name, sizeof name, "published: %s (%s)", p->attack, p->method);
    rc = rg_series_add(&b->set, name, n, x, y, true);
  }
  free(x);
  free(y);
  if (rc < 0) return -1;
  py_read_csv(b->py, "published", path, b->run_real);
  fputs("published = published.dropna(subset=[\"step\", \"asr\"])\n"
        "for (attack, method), g in published.groupby([\"attack\", \"method\"], sort=False):\n"
        "    g = g.sort_values(\"step\", kind=\"stable\")\n"
        "    ax.plot(g[\"step\"], g[\"asr\"], \"--o\", markersize=4, markerfacecolor=\"white\",\n"
        "            label=f\"published: {attack} ({method})\")\n",
        b->py);
  return 0;
}

/* Text drawn into a figure: what the page calls it and where it goes. */
typedef struct {
  const char *section_id, *section_title, *id, *title, *x_label, *y_label;
} figure_text;

static int push_figure(rg_figures *f, const figure_text *txt, char *svg, char *python) {
  rg_figure *grown = realloc(f->items, (size_t)(f->n + 1) * sizeof *grown);
  if (!grown) {
    free(svg);
    free(python);
    return rg_error_set("out of memory");
  }
  f->items = grown;
  rg_figure *fig = &f->items[f->n++];
  *fig = (rg_figure){.section_id = strdup(txt->section_id), .section_title = strdup(txt->section_title),
                     .title = strdup(txt->title), .svg = svg, .python = python};
  if (!fig->section_id || !fig->section_title || !fig->title) return rg_error_set("out of memory");
  return 0;
}

/* Draws the builder's series as SVG, ends its Python code, and appends the
 * figure to F. Frees the builder either way. */
static int plot_finish(plot_builder *b, rg_figures *f, const figure_text *txt, const rg_svg_hband *hbands,
                       int n_hbands, bool y_from_zero, const char *empty_note) {
  char *svg = NULL;
  size_t svg_size = 0;
  FILE *fp = open_memstream(&svg, &svg_size);
  int rc = fp ? 0 : rg_error_set("out of memory");
  if (rc == 0) {
    rg_svg_plot p = {.id = txt->id, .title = txt->title, .x_label = txt->x_label, .y_label = txt->y_label,
                     .series = b->set.items, .n_series = b->set.n, .hbands = hbands, .n_hbands = n_hbands,
                     .y_from_zero = y_from_zero, .x_from_zero = b->x_from_zero, .empty_note = empty_note};
    rc = rg_svg_plot_write(fp, &p);
    fclose(fp);
  }
  FILE *py = b->py;
  for (int k = 0; k < n_hbands; k++) {
    fprintf(py, "ax.axhspan(%.17g, %.17g, color=\"C%d\", alpha=0.08, linewidth=0)\n", hbands[k].y0, hbands[k].y1, k);
    fprintf(py, "ax.annotate(");
    py_str(py, hbands[k].label);
    fprintf(py, ", (0.005, %.17g), xycoords=(\"axes fraction\", \"data\"), va=\"top\", fontsize=8, color=\"grey\")\n",
            hbands[k].y1);
  }
  if (y_from_zero) fputs("ax.set_ylim(bottom=min(0, ax.get_ylim()[0]))\n", py);
  if (b->x_from_zero) fputs("ax.set_xlim(left=min(0, ax.get_xlim()[0]))\n", py);
  fputs("ax.set(title=", py);
  py_str(py, txt->title);
  fputs(", xlabel=", py);
  py_str(py, txt->x_label);
  fputs(", ylabel=", py);
  py_str(py, txt->y_label);
  fputs(")\n", py);
  if (b->set.n > 0) fputs("ax.legend(fontsize=8, loc=\"center left\", bbox_to_anchor=(1.01, 0.5))\n", py);
  if (empty_note) {
    fputs("if not any(len(l.get_xdata()) for l in ax.get_lines()):\n    ax.text(0.5, 0.5, ", py);
    py_str(py, empty_note);
    fputs(", ha=\"center\", va=\"center\", transform=ax.transAxes, color=\"#555\")\n", py);
  }
  fputs("fig.tight_layout()\nplt.show()\n", py);
  fclose(b->py);
  b->py = NULL;
  char *python = b->py_text;
  b->py_text = NULL;
  plot_discard(b);
  if (rc < 0) {
    free(svg);
    free(python);
    return -1;
  }
  return push_figure(f, txt, svg, python);
}

/* ------------------------------------------------------------ the figures */

/* "NAME: " for the folder DIR (its last component), so that the series of
 * several folders tell themselves apart in the narrow legend; "" for one. */
static void folder_prefix(char *out, size_t len, const char *dir, int n_folders) {
  out[0] = '\0';
  if (n_folders < 2) return;
  size_t end = strlen(dir);
  while (end > 1 && dir[end - 1] == '/') end--;
  size_t start = end;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(out, len, "%.*s: ", (int)(end - start), dir + start);
}

static int figure_asr(rg_figures *f, const rg_report_data *d, const rg_report_inputs *in) {
  static const char *const by[] = {"attack", "classifier"};
  plot_builder b;
  if (plot_begin(&b, f) < 0) return -1;
  int rc = 0;
  for (int i = 0; i < d->n_asr && rc == 0; i++) {
    char prefix[512];
    folder_prefix(prefix, sizeof prefix, in->asr_dirs[i], d->n_asr);
    rc = plot_csv_series(&b, d->asr[i], "step", "asr", "wilson95_lo", "wilson95_hi", by, 2, prefix);
  }
  if (rc == 0 && d->has_published) rc = plot_published(&b, &d->published, in->published);
  if (rc < 0) {
    plot_discard(&b);
    return -1;
  }
  figure_text txt = {"asr", "Attack success rate", "plot-asr", "Attack success rate (band: Wilson 95%)",
                     "training step", "ASR"};
  return plot_finish(&b, f, &txt, NULL, 0, true, NULL);
}

/* Every --overrefusal folder's refusal_rate per group, in one plot. */
static int figure_overrefusal(rg_figures *f, const rg_report_data *d, const rg_report_inputs *in) {
  static const char *const by[] = {"attack", "classifier", "group_column", "group"};
  plot_builder b;
  if (plot_begin(&b, f) < 0) return -1;
  for (int i = 0; i < d->n_refusal_rates; i++) {
    char prefix[512];
    folder_prefix(prefix, sizeof prefix, in->overrefusal_dirs[i], d->n_refusal_rates);
    if (plot_csv_series(&b, d->refusal_rates[i], "step", "refusal_rate", "wilson95_lo", "wilson95_hi", by, 4,
                        prefix) < 0) {
      plot_discard(&b);
      return -1;
    }
  }
  figure_text txt = {"overrefusal", "Over-refusal", "plot-overrefusal",
                     "Refusal rate per prompt group (band: Wilson 95%)", "training step", "refusal rate"};
  return plot_finish(&b, f, &txt, NULL, 0, true, NULL);
}

/* The number of layers L of the model, from a row whose carrier exists:
 * rel_depth = l* / L (csv-formats.md). 0 when no row tells. */
static int n_layers_of(const rg_csv *mig) {
  int lc = rg_csv_col(mig, "best_layer"), rc = rg_csv_col(mig, "rel_depth");
  if (lc < 0 || rc < 0) return 0;
  for (size_t r = 0; r < mig->n_rows; r++) {
    double l, rel;
    if (rg_csv_number(mig, r, lc, &l) < 0 || rg_csv_number(mig, r, rc, &rel) < 0) return -1;
    if (isfinite(l) && isfinite(rel) && rel > 0) return (int)lround(l / rel);
  }
  return 0;
}

/* The rows of migration.csv whose step has a carrier (status "carrier"), as a
 * view sharing MIG's cells; every row when the table predates the status
 * column. *PY_ROWS gets the same selection for pandas (NULL: all rows). */
static int carrier_rows(const rg_csv *mig, rg_csv *view, const char **py_rows) {
  *view = *mig;
  *py_rows = NULL;
  int sc = rg_csv_col(mig, "status");
  if (sc < 0) return 0;
  view->rows = malloc((mig->n_rows ? mig->n_rows : 1) * sizeof *view->rows);
  if (!view->rows) return rg_error_set("out of memory");
  view->n_rows = 0;
  for (size_t r = 0; r < mig->n_rows; r++)
    if (strcmp(mig->rows[r][sc], "carrier") == 0) view->rows[view->n_rows++] = mig->rows[r];
  *py_rows = ".query(\"status == 'carrier'\")";
  return 0;
}

static const char NO_CARRIER[] =
    "no step has a carrier: see the verdict and migration.csv's status column";

/* migration.csv's default labels as bands over the model's layers: early
 * below L/3, late from 2L/3 (csv-formats.md; a run with other thresholds
 * still gets these bands). Returns how many (0 when MIG is NULL or does not
 * tell L), or -1. */
static int layer_bands(const rg_csv *mig, rg_svg_hband bands[3]) {
  int n_layers = mig ? n_layers_of(mig) : 0;
  if (n_layers <= 0) return n_layers;
  double L = n_layers;
  bands[0] = (rg_svg_hband){0, L / 3, "early"};
  bands[1] = (rg_svg_hband){L / 3, 2 * L / 3, "middle"};
  bands[2] = (rg_svg_hband){2 * L / 3, L, "late"};
  return 3;
}

static int figure_carrier_layer(rg_figures *f, const rg_csv *mig, const rg_csv *carriers, const char *py_rows) {
  rg_svg_hband bands[3];
  int n_bands = layer_bands(mig, bands);
  if (n_bands < 0) return -1;
  bool intervals = rg_csv_col(mig, "layer_lo") >= 0 && rg_csv_col(mig, "layer_hi") >= 0;
  plot_builder b;
  if (plot_begin(&b, f) < 0) return -1;
  b.py_rows = py_rows;
  if (plot_csv_series(&b, carriers, "step", "best_layer", intervals ? "layer_lo" : NULL, intervals ? "layer_hi" : NULL,
                      NULL, 0, "carrier layer l* (bootstrap 95%)") < 0) {
    plot_discard(&b);
    return -1;
  }
  figure_text txt = {"migration", "Carrier migration and spectrum", "plot-carrier-layer",
                     "Migration: the selected carrier's layer", "training step", "layer"};
  return plot_finish(&b, f, &txt, bands, n_bands, true, NO_CARRIER);
}

/* The columns COLS of T (those it has) against step; no figure when it has
 * none of them. PY_ROWS (pandas) selects the rows T holds, EMPTY_NOTE says
 * why a frame without points is empty (both may be NULL). */
static int figure_columns(rg_figures *f, const rg_csv *t, const char *const *cols, int n_cols,
                          const figure_text *txt, const char *py_rows, const char *empty_note) {
  plot_builder b;
  if (plot_begin(&b, f) < 0) return -1;
  b.py_rows = py_rows;
  for (int k = 0; k < n_cols; k++)
    if (rg_csv_col(t, cols[k]) >= 0 && plot_csv_series(&b, t, "step", cols[k], NULL, NULL, NULL, 0, cols[k]) < 0) {
      plot_discard(&b);
      return -1;
    }
  if (b.set.n == 0) {
    plot_discard(&b);
    return 0;
  }
  return plot_finish(&b, f, txt, NULL, 0, true, empty_note);
}

/* ------------------------------------------------------------ heatmaps */

/* The eoi position the heatmaps show: the best carrier's at the first row
 * of migration.csv that has one, else the last prompt token. */
static int heatmap_position(const rg_csv *mig, int *pos) {
  *pos = -1;
  int pc = mig ? rg_csv_col(mig, "best_pos") : -1;
  for (size_t r = 0; pc >= 0 && r < mig->n_rows; r++) {
    double p;
    if (rg_csv_number(mig, r, pc, &p) < 0) return -1;
    if (isfinite(p)) {
      *pos = (int)p;
      break;
    }
  }
  return 0;
}

/* One heatmap: COLUMN of a CSV over the grid X_COL x Y_COL. */
typedef struct {
  const char *section_id, *section_title;
  const char *column, *value_label, *id, *title;
  const char *x_col, *y_col, *x_label, *y_label;
  const char *x_name, *y_name; /* the tooltip's words for a cell's x and y */
  bool diverging;              /* a cosine: fixed range [-1, 1], blue-white-red */
  bool annotate;               /* each value written in its cell (small grids) */
  size_t min_x;                /* fewer x columns than this draw nothing, and say FEW_X_NOTE */
  const char *few_x_note;
} heatmap_spec;

/* A heatmap of the rows FILTER selects (FILTER_COL == FILTER_VALUE; all rows
 * when FILTER_COL is NULL), titled TITLE. */
typedef struct {
  const char *filter_col;
  int filter_value;
  const char *title;
  const char *empty_note; /* no finite value */
  double lo, hi;
} heatmap_view;

static void py_note(FILE *py, const char *indent, const char *note) {
  fprintf(py, "%sax.text(0.5, 0.5, ", indent);
  py_str(py, note);
  fputs(", ha=\"center\", va=\"center\", wrap=True, transform=ax.transAxes, color=\"#555\")\n", py);
}

static char *heatmap_python(const rg_csv *t, const heatmap_spec *s, const heatmap_view *v, const char *run_real) {
  char *text = NULL;
  size_t size = 0;
  FILE *py = open_memstream(&text, &size);
  if (!py) return NULL;
  fputs(PY_HEAD, py);
  py_read_csv(py, "t", t->path, run_real);
  if (v->filter_col) {
    fputs("t = t[t[", py);
    py_str(py, v->filter_col);
    fprintf(py, "] == %d]\n", v->filter_value);
  }
  fputs("grid = t.set_index([", py);
  py_str(py, s->y_col);
  fputs(", ", py);
  py_str(py, s->x_col);
  fputs("])[", py);
  py_str(py, s->column);
  fputs("].unstack(", py);
  py_str(py, s->x_col);
  fputs(").sort_index()\nfig, ax = plt.subplots(figsize=(8.6, 4.2))\n", py);
  if (s->min_x > 1) {
    fprintf(py, "if grid.shape[1] < %zu:\n", s->min_x);
    py_note(py, "    ", s->few_x_note);
    fputs("elif not grid.notna().to_numpy().any():\n", py);
  } else {
    fputs("if not grid.notna().to_numpy().any():\n", py);
  }
  py_note(py, "    ", v->empty_note);
  fprintf(py, "else:\n    im = ax.pcolormesh(grid.to_numpy(dtype=float), cmap=\"%s\", vmin=%.17g, vmax=%.17g)\n",
          s->diverging ? "RdBu_r" : "YlGnBu", v->lo, v->hi);
  fputs("    ax.set_xticks([i + 0.5 for i in range(grid.shape[1])], [f\"{v:g}\" for v in grid.columns])\n"
        "    every = max(1, -(-grid.shape[0] // 12))\n"
        "    ax.set_yticks([i + 0.5 for i in range(0, grid.shape[0], every)],\n"
        "                  [f\"{v:g}\" for v in grid.index[::every]])\n"
        "    fig.colorbar(im, ax=ax, label=",
        py);
  py_str(py, s->value_label);
  fputs(")\n", py);
  if (s->annotate)
    fputs("    values = grid.to_numpy(dtype=float)\n"
          "    for i in range(values.shape[0]):\n"
          "        for j in range(values.shape[1]):\n"
          "            if values[i, j] == values[i, j]:  # light text on a dark cell (BT.601 luma)\n"
          "                r, g, b, _ = im.cmap(im.norm(values[i, j]))\n"
          "                ax.text(j + 0.5, i + 0.5, f\"{values[i, j]:.3g}\", ha=\"center\", va=\"center\",\n"
          "                        fontsize=8,\n"
          "                        color=\"#fff\" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else \"#222\")\n",
          py);
  fputs("ax.set(title=", py);
  py_str(py, v->title);
  fputs(", xlabel=", py);
  py_str(py, s->x_label);
  fputs(", ylabel=", py);
  py_str(py, s->y_label);
  fputs(")\nfig.tight_layout()\nplt.show()\n", py);
  fclose(py);
  return text;
}

/* The file name of PATH (its last component). */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Draws S from T's rows at FILTER_COL == FILTER_VALUE (FILTER_COL NULL: every
 * row); TITLE_SUFFIX follows the spec's title. */
static int figure_heatmap(rg_figures *f, const rg_csv *t, const heatmap_spec *s, const char *filter_col,
                          int filter_value, const char *title_suffix) {
  rg_grid g;
  if (rg_grid_from_csv(&g, t, s->x_col, s->y_col, s->column, filter_col, filter_value) < 0) return -1;
  char title[256], at[64] = "", empty_note[512];
  snprintf(title, sizeof title, "%s%s", s->title, title_suffix);
  if (filter_col) snprintf(at, sizeof at, " at %s %d", filter_col, filter_value);
  snprintf(empty_note, sizeof empty_note, "no finite %s in %s%s", s->column, base_name(t->path), at);
  const char *note = empty_note;
  if (g.n_x < s->min_x) { /* too few columns to compare: draw none */
    g.n_x = g.n_y = 0;
    note = s->few_x_note;
  }
  heatmap_view v = {.filter_col = filter_col, .filter_value = filter_value, .title = title, .empty_note = empty_note,
                    .lo = -1, .hi = 1};
  if (!s->diverging) {
    v.lo = INFINITY, v.hi = -INFINITY;
    for (size_t i = 0; i < g.n_x * g.n_y; i++)
      if (isfinite(g.value[i])) v.lo = fmin(v.lo, g.value[i]), v.hi = fmax(v.hi, g.value[i]);
    if (!(v.lo <= v.hi)) v.lo = 0, v.hi = 1; /* no finite value: an empty grid */
  }
  rg_svg_heatmap h = {.id = s->id, .title = title, .x_label = s->x_label, .y_label = s->y_label,
                      .value_label = s->value_label, .n_x = g.n_x, .n_y = g.n_y, .x = g.x, .y = g.y,
                      .value = g.value, .lo = v.lo, .hi = v.hi, .diverging = s->diverging, .x_name = s->x_name,
                      .y_name = s->y_name, .annotate = s->annotate, .empty_note = note};
  char *svg = NULL;
  size_t svg_size = 0;
  FILE *fp = open_memstream(&svg, &svg_size);
  int rc = fp ? 0 : rg_error_set("out of memory");
  if (fp) {
    rc = rg_svg_heatmap_write(fp, &h);
    fclose(fp);
  }
  char *python = rc == 0 ? heatmap_python(t, s, &v, f->run_real) : NULL;
  rg_grid_free(&g);
  if (rc < 0 || !python) {
    free(svg);
    free(python);
    return rc < 0 ? -1 : rg_error_set("out of memory");
  }
  figure_text txt = {s->section_id, s->section_title, s->id, title, s->x_label, s->y_label};
  return push_figure(f, &txt, svg, python);
}

/* geometry.csv's and carriers.csv's per-layer measures at one eoi position. */
static int figure_layer_heatmap(rg_figures *f, const rg_csv *t, const heatmap_spec *s, int pos) {
  char suffix[64];
  snprintf(suffix, sizeof suffix, " (eoi position %d)", pos);
  return figure_heatmap(f, t, s, "pos", pos, suffix);
}

/* ------------------------------------------------------------ the verdict's measures */

static const char *const BY_STEP[] = {"step"};

static const char NO_ROWS[] = "%s has no rows: no step was scored (see migration.csv's status)";

/* Y against X of T, one series per step ("step S"). EMPTY_NOTE says why
 * nothing is drawn when T has rows but no finite point; a T without rows
 * says so (NO_ROWS) unless KEEP_NOTE. */
static int figure_per_step(rg_figures *f, const rg_csv *t, const char *x, const char *y, const char *py_rows,
                           const figure_text *txt, const rg_svg_hband *bands, int n_bands, const char *empty_note,
                           bool keep_note) {
  char no_rows[512];
  if (t->n_rows == 0 && !keep_note) {
    snprintf(no_rows, sizeof no_rows, NO_ROWS, base_name(t->path));
    empty_note = no_rows;
  }
  plot_builder b;
  if (plot_begin(&b, f) < 0) return -1;
  b.py_rows = py_rows;
  b.x_from_zero = true; /* a KL budget, a KL, a layer: 0 is where they start */
  if (plot_csv_series(&b, t, x, y, NULL, NULL, BY_STEP, 1, "step ") < 0) {
    plot_discard(&b);
    return -1;
  }
  return plot_finish(&b, f, txt, bands, n_bands, true, empty_note);
}

static const char SENSITIVITY_ID[] = "sensitivity";
static const char SENSITIVITY_TITLE[] = "Sensitivity to the KL budget (reported, never deciding)";

/* sensitivity.csv: the admissible count and the selected layer per KL budget
 * tau, and pareto.csv's bypass-KL front, one series per step. */
static int figures_sensitivity(rg_figures *f, const rg_report_data *d) {
  if (d->sensitivity) {
    figure_text count = {SENSITIVITY_ID, SENSITIVITY_TITLE, "plot-sensitivity",
                         "Admissible candidates per KL budget \u03c4", "KL budget \u03c4", "admissible candidates"};
    if (figure_per_step(f, d->sensitivity, "kl_max", "n_admissible", NULL, &count, NULL, 0,
                        "no admissible count in sensitivity.csv", false) < 0)
      return -1;
    rg_svg_hband bands[3];
    int n_bands = layer_bands(d->migration, bands);
    if (n_bands < 0) return -1;
    figure_text layer = {SENSITIVITY_ID, SENSITIVITY_TITLE, "plot-sensitivity-layer",
                         "The layer selected under each KL budget \u03c4", "KL budget \u03c4", "layer"};
    if (figure_per_step(f, d->sensitivity, "kl_max", "best_layer", NULL, &layer, bands, n_bands,
                        "no admissible candidate at any step under any KL budget \u03c4 (sensitivity.csv)", false) < 0)
      return -1;
  }
  if (d->pareto) {
    figure_text front = {SENSITIVITY_ID, SENSITIVITY_TITLE, "plot-pareto",
                         "Bypass\u2013KL Pareto front per step (lower is better on both)",
                         "KL (harmless prompts, ablated)", "bypass (refusal log-odds)"};
    if (figure_per_step(f, d->pareto, "kl", "bypass", NULL, &front, NULL, 0,
                        "no Pareto front: no step has a candidate with finite bypass and KL (pareto.csv)", true) < 0)
      return -1;
  }
  return 0;
}

/* transfer.csv as two matrices, source step (whose carrier) x target step
 * (whose model): bypass under ablation, induce under addition. */
static int figures_transfer(rg_figures *f, const rg_csv *transfer) {
  static const char FEW[] = "no transfer: fewer than two scored steps in transfer.csv";
  heatmap_spec s = {.section_id = "transfer", .section_title = "Transfer of each step's carrier to every step's model",
                    .x_col = "to_step", .y_col = "from_step",
                    .x_label = "target step (the model the direction is scored in)",
                    .y_label = "source step (whose carrier)", .x_name = "target step", .y_name = "source step",
                    .annotate = true, .min_x = 2, .few_x_note = FEW};
  s.column = "bypass", s.id = "plot-transfer-bypass", s.value_label = "bypass (refusal log-odds; lower: stronger)";
  s.title = "Transfer: bypass of each step's carrier ablated in every step's model";
  /* the carriers' rows (transfer_layers adds every layer's best direction) */
  if (figure_heatmap(f, transfer, &s, "carrier", 1, "") < 0) return -1;
  s.column = "induce", s.id = "plot-transfer-induce", s.value_label = "induce (refusal log-odds; higher: stronger)";
  s.title = "Transfer: induce of each step's carrier added in every step's model";
  return figure_heatmap(f, transfer, &s, "carrier", 1, "");
}

/* The row of T with the highest finite VALUE_COL per (step, layer), as a
 * view sharing T's cells, in file order; a (step, layer) without a finite
 * value keeps its first row (a gap in the line). *PY_ROWS: the same for
 * pandas (NaN sorts last, the first of equal values stays). */
static int best_per_step_layer(const rg_csv *t, const char *value_col, rg_csv *view, const char **py_rows) {
  *view = *t;
  int sc = rg_csv_require_col(t, "step"), lc = rg_csv_require_col(t, "layer"), vc = rg_csv_require_col(t, value_col);
  if (sc < 0 || lc < 0 || vc < 0) return -1;
  view->rows = malloc((t->n_rows ? t->n_rows : 1) * sizeof *view->rows);
  double *best = malloc((t->n_rows ? t->n_rows : 1) * sizeof *best);
  if (!view->rows || !best) {
    free(view->rows);
    free(best);
    return rg_error_set("out of memory");
  }
  view->n_rows = 0;
  int rc = 0;
  for (size_t r = 0; r < t->n_rows && rc == 0; r++) {
    double v;
    if ((rc = rg_csv_number(t, r, vc, &v)) < 0) break;
    size_t k = 0;
    while (k < view->n_rows &&
           (strcmp(view->rows[k][sc], t->rows[r][sc]) != 0 || strcmp(view->rows[k][lc], t->rows[r][lc]) != 0))
      k++;
    if (k == view->n_rows) view->n_rows++, best[k] = v, view->rows[k] = t->rows[r];
    else if (isfinite(v) && !(v <= best[k])) best[k] = v, view->rows[k] = t->rows[r];
  }
  free(best);
  if (rc < 0) {
    free(view->rows);
    view->rows = NULL;
    return -1;
  }
  *py_rows = ".sort_values(\"auroc\", ascending=False, kind=\"stable\").drop_duplicates([\"step\", \"layer\"])"
             ".sort_index()";
  return 0;
}

/* probes.csv: per step, the AUROC of each layer's direction (its best eoi
 * position) for refused vs complied harmful val prompts, over the 0.8 mark
 * that migration.csv's probe_layer uses. */
static int figure_probes(rg_figures *f, const rg_csv *probes) {
  rg_csv best;
  const char *py_rows;
  if (best_per_step_layer(probes, "auroc", &best, &py_rows) < 0) return -1;
  static const rg_svg_hband READS[] = {{0.8, 1.0, "AUROC \u2265 0.8: the direction reads refusal (probe_layer)"}};
  figure_text txt = {"probes", "Held-out probes: where a direction reads the checkpoint's refusals", "plot-probes",
                     "Probe AUROC, refused vs complied harmful val prompts (best eoi position per layer)", "layer",
                     "AUROC"};
  int rc = figure_per_step(f, &best, "layer", "auroc", py_rows, &txt, READS, 1,
                           "no probe AUROC: at every step the harmful val prompts were all refused or all complied "
                           "with (probes.csv's n_refused, n_complied)",
                           false);
  free(best.rows);
  return rc;
}

static int build(rg_figures *f, const rg_report_data *d, const rg_report_inputs *in) {
  if ((d->n_asr > 0 || d->has_published) && figure_asr(f, d, in) < 0) return -1;
  if (d->n_refusal_rates > 0 && figure_overrefusal(f, d, in) < 0) return -1;
  if (d->migration) {
    static const char *const spectrum[] = {"erank_sigma", "erank_sigma2", "pr"};
    figure_text txt = {"migration", "Carrier migration and spectrum", "plot-spectrum",
                       "Effective rank (p \u221d \u03c3, p \u221d \u03c3\u00b2) and participation ratio of the carrier matrix",
                       "training step", "rank"};
    rg_csv carriers;
    const char *py_rows;
    if (carrier_rows(d->migration, &carriers, &py_rows) < 0) return -1;
    int rc = figure_carrier_layer(f, d->migration, &carriers, py_rows) < 0 ||
                     figure_columns(f, &carriers, spectrum, 3, &txt, py_rows, NO_CARRIER) < 0
                 ? -1
                 : 0;
    if (carriers.rows != d->migration->rows) free(carriers.rows);
    if (rc < 0) return -1;
  }
  if (figures_sensitivity(f, d) < 0) return -1;
  if (d->transfer && figures_transfer(f, d->transfer) < 0) return -1;
  if (d->probes && figure_probes(f, d->probes) < 0) return -1;
  int pos = -1;
  if ((d->geometry || d->carriers) && heatmap_position(d->migration, &pos) < 0) return -1;
  static const heatmap_spec LAYER_GRID = {.section_id = "layers", .section_title = "Per-layer measures",
                                          .x_col = "step", .y_col = "layer", .x_label = "training step",
                                          .y_label = "layer", .x_name = "step", .y_name = "layer", .min_x = 1};
  heatmap_spec cos = LAYER_GRID, bypass = LAYER_GRID;
  cos.column = "cos_step0", cos.value_label = "cosine", cos.id = "plot-cos-step0", cos.diverging = true;
  cos.title = "Refusal direction r[l]: cosine to step 0";
  bypass.column = "bypass", bypass.value_label = "bypass (refusal log-odds)", bypass.id = "plot-bypass";
  bypass.title = "Bypass score of r[l] (lower: a stronger carrier)";
  if (d->geometry && figure_layer_heatmap(f, d->geometry, &cos, pos) < 0) return -1;
  if (d->carriers && figure_layer_heatmap(f, d->carriers, &bypass, pos) < 0) return -1;
  if (d->train_log) {
    static const char *const losses[] = {"loss_total", "loss_utility", "loss_away", "loss_toward"};
    figure_text txt = {"training", "Training losses", "plot-losses", "R2D2 losses per optimizer update",
                       "training step", "loss (nats)"};
    if (figure_columns(f, d->train_log, losses, 4, &txt, NULL, NULL) < 0) return -1;
  }
  return 0;
}

int rg_figures_build(rg_figures *f, const rg_report_data *d, const rg_report_inputs *in) {
  *f = (rg_figures){.run_real = realpath(in->run_dir, NULL)};
  if (!f->run_real) return rg_error_set("%s: %s", in->run_dir, strerror(errno));
  if (build(f, d, in) == 0) return 0;
  rg_figures_free(f);
  return -1;
}

void rg_figures_free(rg_figures *f) {
  for (int i = 0; i < f->n; i++) {
    rg_figure *fig = &f->items[i];
    free(fig->section_id);
    free(fig->section_title);
    free(fig->title);
    free(fig->svg);
    free(fig->python);
  }
  free(f->items);
  free(f->run_real);
  *f = (rg_figures){0};
}
