/* report_notebook.c: the report as a Jupyter notebook (report_notebook.h). */
#include "report/report_notebook.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_data.h"
#include "report/report_figures.h"
#include "util/error.h"
#include "util/fileio.h"

/* Markdown tables show at most this many rows (the CSV has them all). */
enum { MAX_MARKDOWN_ROWS = 60 };

/* nbformat 4.5 wants a cell id: 1-64 characters of [a-zA-Z0-9-_]. The
 * cell's index makes it unique and stable from one export to the next. */
static cJSON *new_cell(cJSON *cells, const char *type, const char *source) {
  cJSON *cell = cJSON_CreateObject();
  char id[32];
  snprintf(id, sizeof id, "cell-%d", cJSON_GetArraySize(cells));
  if (!cell || !cJSON_AddStringToObject(cell, "cell_type", type) || !cJSON_AddStringToObject(cell, "id", id) ||
      !cJSON_AddObjectToObject(cell, "metadata") || !cJSON_AddStringToObject(cell, "source", source) ||
      !cJSON_AddItemToArray(cells, cell)) {
    cJSON_Delete(cell);
    return NULL;
  }
  return cell;
}

static int add_markdown(cJSON *cells, const char *text) {
  return new_cell(cells, "markdown", text) ? 0 : rg_error_set("out of memory");
}

/* A code cell whose saved output shows SVG, as Jupyter saves a displayed
 * figure. */
/* A figure's code cell: RUN (the run directory, relative to the notebook's
 * folder, where Jupyter runs it) first, so that the cell reads the run's
 * CSVs wherever the two are copied together; after a move of the run alone,
 * RUN is the one line to change. */
static int add_code(cJSON *cells, const char *python, const char *svg, const char *run_rel) {
  char *source = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&source, &len);
  if (!fp) return rg_error_set("out of memory");
  fputs("from pathlib import Path\nRUN = Path(\"", fp);
  for (const char *c = run_rel; *c; c++) fprintf(fp, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
  fprintf(fp, "\")  # the run directory, relative to this notebook's folder\n%s", python);
  fclose(fp);
  cJSON *cell = new_cell(cells, "code", source);
  free(source);
  if (!cell || !cJSON_AddNullToObject(cell, "execution_count")) return rg_error_set("out of memory");
  cJSON *outputs = cJSON_AddArrayToObject(cell, "outputs"), *out = cJSON_CreateObject();
  if (!outputs || !out || !cJSON_AddItemToArray(outputs, out)) {
    cJSON_Delete(out);
    return rg_error_set("out of memory");
  }
  cJSON *data;
  if (!cJSON_AddStringToObject(out, "output_type", "display_data") || !(data = cJSON_AddObjectToObject(out, "data")) ||
      !cJSON_AddStringToObject(data, "image/svg+xml", svg) ||
      !cJSON_AddStringToObject(data, "text/plain", "<Figure: refgeo's SVG>") ||
      !cJSON_AddObjectToObject(out, "metadata"))
    return rg_error_set("out of memory");
  return 0;
}

/* Text from a file inside Markdown: HTML's special characters as entities
 * (Jupyter renders HTML in Markdown), and in table cells `|` escaped and
 * line breaks as spaces. */
static void md_text(FILE *fp, const char *s, int in_table) {
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", fp); break;
    case '<': fputs("&lt;", fp); break;
    case '>': fputs("&gt;", fp); break;
    case '|': fputs(in_table ? "\\|" : "|", fp); break;
    case '\n': fputs(in_table ? " " : "\n", fp); break;
    case '\r': break;
    default: fputc(*s, fp);
    }
  }
}

static void md_table(FILE *fp, const rg_csv *t) {
  fputs("**", fp);
  md_text(fp, t->path, 1);
  fputs("**\n\n|", fp);
  for (int c = 0; c < t->n_cols; c++) md_text(fp, t->header[c], 1), fputs("|", fp);
  fputs("\n|", fp);
  for (int c = 0; c < t->n_cols; c++) fputs("---|", fp);
  size_t shown = t->n_rows < MAX_MARKDOWN_ROWS ? t->n_rows : MAX_MARKDOWN_ROWS;
  for (size_t r = 0; r < shown; r++) {
    fputs("\n|", fp);
    for (int c = 0; c < t->n_cols; c++) md_text(fp, t->rows[r][c], 1), fputs("|", fp);
  }
  fputs("\n", fp);
  if (shown < t->n_rows) fprintf(fp, "\nfirst %zu of %zu rows; the whole table is in the CSV\n", shown, t->n_rows);
  fputs("\n", fp);
}

/* Markdown built in a memory stream, then added as one cell. */
typedef struct {
  char *text;
  size_t size;
  FILE *fp;
} md_buffer;

static int md_open(md_buffer *b) {
  *b = (md_buffer){0};
  return (b->fp = open_memstream(&b->text, &b->size)) ? 0 : rg_error_set("out of memory");
}

static int md_close_into(md_buffer *b, cJSON *cells) {
  fclose(b->fp);
  int rc = b->text ? add_markdown(cells, b->text) : rg_error_set("out of memory");
  free(b->text);
  return rc;
}

static int intro_cell(cJSON *cells, const rg_report_data *d, const rg_report_inputs *in) {
  md_buffer b;
  if (md_open(&b) < 0) return -1;
  const rg_provenance *p = &d->provenance;
  fputs("# refgeo report: ", b.fp);
  md_text(b.fp, in->run_dir, 0);
  fprintf(b.fp, "\n\nWritten by refgeo %s on %s (UTC). Each plot below is refgeo's own drawing, saved as the "
                "output of a code cell that redraws it from the run's CSVs with pandas and matplotlib: run the cells "
                "to redraw, or edit them.\n",
          p->version, p->date_utc);
  if (p->model) {
    fputs("\nModel: `", b.fp);
    md_text(b.fp, p->model, 0);
    fputs("`\n\n```\n", b.fp);
    fputs(p->model_sha256 ? p->model_sha256 : p->model_note, b.fp);
    fputs(p->model_sha256 ? "```\n" : "\n```\n", b.fp);
  }
  return md_close_into(&b, cells);
}

static int tables_cell(cJSON *cells, const rg_report_data *d) {
  md_buffer b;
  if (md_open(&b) < 0) return -1;
  fputs("## Tables\n\n", b.fp);
  for (int i = 0; i < d->n_asr; i++) md_table(b.fp, d->asr[i]);
  const rg_csv *small[] = {d->migration, d->sensitivity, d->transfer};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    if (small[i]) md_table(b.fp, small[i]);
  for (int i = 0; i < d->n_refusal_rates; i++) md_table(b.fp, d->refusal_rates[i]);
  const rg_csv *large[] = {d->train_log, d->pareto, d->probes, d->carriers, d->geometry};
  for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
    if (!large[i]) continue;
    fputs("- `", b.fp);
    md_text(b.fp, large[i]->path, 0);
    fprintf(b.fp, "`: %zu rows\n", large[i]->n_rows);
  }
  return md_close_into(&b, cells);
}

static cJSON *build(const rg_report_data *d, const rg_figures *figs, const rg_report_inputs *in,
                    const char *run_rel) {
  cJSON *nb = cJSON_CreateObject(), *meta, *kernel, *lang;
  cJSON *cells = nb ? cJSON_AddArrayToObject(nb, "cells") : NULL;
  if (!cells || !(meta = cJSON_AddObjectToObject(nb, "metadata")) ||
      !(kernel = cJSON_AddObjectToObject(meta, "kernelspec")) ||
      !cJSON_AddStringToObject(kernel, "name", "python3") ||
      !cJSON_AddStringToObject(kernel, "display_name", "Python 3") ||
      !cJSON_AddStringToObject(kernel, "language", "python") ||
      !(lang = cJSON_AddObjectToObject(meta, "language_info")) || !cJSON_AddStringToObject(lang, "name", "python") ||
      !cJSON_AddNumberToObject(nb, "nbformat", 4) || !cJSON_AddNumberToObject(nb, "nbformat_minor", 5)) {
    rg_error_set("out of memory");
    goto fail;
  }
  if (intro_cell(cells, d, in) < 0) goto fail;
  for (int i = 0; i < figs->n; i++) {
    const rg_figure *fig = &figs->items[i];
    md_buffer b;
    if (md_open(&b) < 0) goto fail;
    if (i == 0 || strcmp(fig->section_id, figs->items[i - 1].section_id) != 0) {
      fputs("## ", b.fp);
      md_text(b.fp, fig->section_title, 0);
      fputs("\n\n", b.fp);
    }
    fputs("### ", b.fp);
    md_text(b.fp, fig->title, 0);
    fputs("\n", b.fp);
    if (md_close_into(&b, cells) < 0 || add_code(cells, fig->python, fig->svg, run_rel) < 0) goto fail;
  }
  if (d->repro) {
    md_buffer b;
    if (md_open(&b) < 0) goto fail;
    fputs("## Reproduction verdict (refgeo repro)\n\n```\n", b.fp);
    fputs(d->repro, b.fp);
    fputs("\n```\n", b.fp);
    if (md_close_into(&b, cells) < 0) goto fail;
  }
  if (tables_cell(cells, d) < 0) goto fail;
  if (d->config) {
    md_buffer b;
    if (md_open(&b) < 0) goto fail;
    fputs("## config.ini\n\n```ini\n", b.fp);
    fputs(d->config, b.fp); /* inside a code fence Markdown shows text as written */
    fputs("\n```\n", b.fp);
    if (md_close_into(&b, cells) < 0) goto fail;
  }
  return nb;
fail:
  cJSON_Delete(nb);
  return NULL;
}

/* notebooks-export/ need not exist yet. */
static int make_parent_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return 0;
  char *dir = strndup(path, (size_t)(slash - path));
  int rc = dir ? rg_mkdir_p(dir) : rg_error_set("out of memory");
  free(dir);
  return rc;
}

int rg_report_notebook_write(const rg_report_inputs *in, const char *out_path) {
  rg_report_data d;
  if (rg_report_data_load(&d, in) < 0) return -1;
  rg_figures figs;
  int rc = rg_figures_build(&figs, &d, in);
  char *run_rel = NULL, *nb_dir = rc == 0 ? strdup(out_path) : NULL;
  if (rc == 0) rc = make_parent_dir(out_path);
  if (rc == 0 && nb_dir) {
    char *slash = strrchr(nb_dir, '/');
    if (slash) *(slash == nb_dir ? slash + 1 : slash) = '\0';
    run_rel = rg_path_relative(slash ? nb_dir : ".", in->run_dir);
  }
  if (rc == 0 && !run_rel) rc = -1;
  cJSON *nb = rc == 0 ? build(&d, &figs, in, run_rel) : NULL;
  char *text = nb ? cJSON_Print(nb) : NULL;
  if (rc == 0 && !text) rc = nb ? rg_error_set("out of memory") : -1;
  if (rc == 0) rc = rg_write_file_atomic(out_path, text, strlen(text));
  free(text);
  free(run_rel);
  free(nb_dir);
  cJSON_Delete(nb);
  rg_figures_free(&figs);
  rg_report_data_free(&d);
  return rc;
}
