/* report_html.c: the pieces of a self-contained HTML page (report_html.h). */
#include "report/report_html.h"

#include "report/svg_plot.h"

/* Plain system fonts: the page must not fetch any. */
static const char STYLE[] =
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-top:1em}"
    "table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f4f4f4}"
    "caption{text-align:left;font-weight:bold;padding:4px 0}"
    "pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:12px}"
    ".note{color:#555;font-size:.9em}svg.plot{display:block;margin:1em 0}"
    /* the verdict's lines are sentences: wrapped, never cut at the page's edge */
    "pre.verdict{white-space:pre-wrap;font-size:13px;border-left:4px solid #2a6;background:#f3faf5}";

void rg_html_begin(FILE *fp, const char *title) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", fp);
  rg_xml_escape(fp, title);
  fprintf(fp, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", STYLE);
  rg_xml_escape(fp, title);
  fputs("</h1>\n", fp);
}

void rg_html_end(FILE *fp) { fputs("</body>\n</html>\n", fp); }

void rg_html_section(FILE *fp, const char *id, const char *text) {
  fputs("<h2 id=\"", fp);
  rg_xml_escape(fp, id);
  fputs("\">", fp);
  rg_xml_escape(fp, text);
  fputs("</h2>\n", fp);
}

void rg_html_note(FILE *fp, const char *text) {
  fputs("<p class=\"note\">", fp);
  rg_xml_escape(fp, text);
  fputs("</p>\n", fp);
}

void rg_html_pre_class(FILE *fp, const char *cls, const char *text) {
  fputs("<pre class=\"", fp);
  rg_xml_escape(fp, cls);
  fputs("\">", fp);
  rg_xml_escape(fp, text);
  fputs("</pre>\n", fp);
}

void rg_html_pre(FILE *fp, const char *text) {
  fputs("<pre>", fp);
  rg_xml_escape(fp, text);
  fputs("</pre>\n", fp);
}

void rg_html_csv_table(FILE *fp, const rg_csv *t, size_t max_rows) {
  size_t shown = t->n_rows < max_rows ? t->n_rows : max_rows;
  fputs("<table>\n<caption>", fp);
  rg_xml_escape(fp, t->path);
  fputs("</caption>\n<tr>", fp);
  for (int c = 0; c < t->n_cols; c++) {
    fputs("<th>", fp);
    rg_xml_escape(fp, t->header[c]);
    fputs("</th>", fp);
  }
  fputs("</tr>\n", fp);
  for (size_t r = 0; r < shown; r++) {
    fputs("<tr>", fp);
    for (int c = 0; c < t->n_cols; c++) {
      fputs("<td>", fp);
      rg_xml_escape(fp, t->rows[r][c]);
      fputs("</td>", fp);
    }
    fputs("</tr>\n", fp);
  }
  fputs("</table>\n", fp);
  if (shown < t->n_rows)
    fprintf(fp, "<p class=\"note\">first %zu of %zu rows; the whole table is in the CSV</p>\n", shown, t->n_rows);
}
