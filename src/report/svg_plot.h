/* svg_plot.h: a small line-and-marker plot written as inline SVG text.
 *
 * The report draws every plot itself so that report.html needs no script,
 * font or network. One plot has x/y axes with ticks at round values (1, 2
 * or 5 times a power of ten), axis labels, a legend, any number of series,
 * an optional band per series (e.g. the Wilson 95% interval) and optional
 * horizontal bands (e.g. early/middle/late layers).
 *
 * Countable marks (tests rely on it; docs/ARCHITECTURE.md states it):
 *   - each series is one <g class="series" data-name="..."> holding one
 *     <path class="line"> (when it has two or more finite points), one
 *     <path class="band"> (when it has a band with a finite point) and one
 *     <circle> per point whose x and y are finite;
 *   - nothing else in the plot is a <circle> (legend swatches are <rect>s),
 *     so the circles of a plot are exactly its finite data points.
 * A point with a non-finite x or y (an empty CSV cell) is left out and
 * breaks the line there.
 */
#ifndef RG_SVG_PLOT_H
#define RG_SVG_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
  const char *name; /* legend text */
  size_t n;
  const double *x, *y;
  const double *lo, *hi; /* band edges per point, or NULL for none */
  bool dashed;           /* e.g. a published curve next to measured ones */
} rg_svg_series;

typedef struct {
  double y0, y1;     /* data range the band covers */
  const char *label; /* written inside the band, at its left */
} rg_svg_hband;

typedef struct {
  const char *id; /* the <svg> element's id */
  const char *title, *x_label, *y_label;
  const rg_svg_series *series;
  int n_series;
  const rg_svg_hband *hbands;
  int n_hbands;
  bool y_from_zero; /* include 0 in the y range (rates, losses) */
  bool x_from_zero; /* include 0 in the x range (a KL budget, a layer) */
  const char *empty_note; /* said inside the frame when no series has a point to draw (NULL: nothing) */
} rg_svg_plot;

/* Writes the plot as one <svg> element to FP. Every text is XML-escaped.
 * Returns 0, or -1 with the error set when FP fails. */
int rg_svg_plot_write(FILE *fp, const rg_svg_plot *p);

/* TEXT, escaped, as up to MAX_LINES <tspan> lines (LINE_PX apart, each
 * starting at x = X) of at most MAX_BYTES bytes, broken after a space, '/'
 * or ':' where one is near; text beyond the last line ends in an ellipsis.
 * Goes inside a <text> element. Returns the lines written (at least 1). */
int rg_svg_wrapped_text(FILE *fp, const char *text, int x, int max_bytes, int max_lines, int line_px);

/* NOTE (why a frame has nothing to draw) centred between x = X0 and X1 at
 * height Y, wrapped to stay inside: <text class="empty-note">. */
void rg_svg_empty_note(FILE *fp, const char *note, int x0, int x1, int y);

/* Writes S to FP with &, <, >, " and ' escaped (HTML and SVG text and
 * attribute values). */
void rg_xml_escape(FILE *fp, const char *s);

#endif
