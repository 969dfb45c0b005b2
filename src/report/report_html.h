/* report_html.h: the pieces of a self-contained HTML page.
 *
 * The page carries its own style sheet and no script, link, image or URL,
 * so it reads the same offline, from an e-mail attachment or an archive.
 * Every text that comes from a file (CSV cells, config.ini, file names) is
 * escaped with rg_xml_escape, so a behavior such as `<b>"x" & y</b>` shows
 * as written and cannot break the page.
 */
#ifndef RG_REPORT_HTML_H
#define RG_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "util/csv_table.h"

/* <!DOCTYPE html>, <head> with TITLE and the style sheet, <body>, <h1>. */
void rg_html_begin(FILE *fp, const char *title);
/* Closes the body and the document. */
void rg_html_end(FILE *fp);

/* <h2>TEXT</h2> with id ID (a section of the page). */
void rg_html_section(FILE *fp, const char *id, const char *text);
/* <p class="note">TEXT</p>. */
void rg_html_note(FILE *fp, const char *text);
/* <pre>TEXT</pre>. */
void rg_html_pre(FILE *fp, const char *text);
/* TEXT in a <pre> of class CLS (e.g. "verdict": wrapped lines). */
void rg_html_pre_class(FILE *fp, const char *cls, const char *text);

/* The CSV T as a table headed by its file name; at most MAX_ROWS data rows,
 * with a note of how many were left out (geometry.csv has one row per step,
 * layer and position). */
void rg_html_csv_table(FILE *fp, const rg_csv *t, size_t max_rows);

#endif
