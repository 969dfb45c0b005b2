/* svg_heatmap.h: a grid of coloured cells (layer x step) as inline SVG.
 *
 * The report shows per-layer measures across checkpoints this way (the
 * refusal direction's cosine to step 0, the carrier's bypass score) and the
 * transfer matrix (source step x target step). Both axes are categorical:
 * one column per x value, one row per y value, ascending, the first row at
 * the bottom (checkpoint steps are unevenly spaced). A colour bar at the
 * right maps values to colours (none when no cell is finite); its title
 * runs along it.
 *
 * Countable marks (tests rely on it): one <rect class="cell"> per finite
 * value, each with a <title> "X_NAME x, Y_NAME y: V" ("step S, layer L: V"
 * by default); a NaN value (a cell the CSV has no number for) draws nothing.
 * Nothing else has class "cell".
 */
#ifndef RG_SVG_HEATMAP_H
#define RG_SVG_HEATMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
  const char *id; /* the <svg> element's id */
  const char *title, *x_label, *y_label, *value_label;
  size_t n_x, n_y;
  const double *x;     /* n_x column values (steps) */
  const double *y;     /* n_y row values (layers), bottom row first */
  const double *value; /* n_y x n_x, row-major: value[iy * n_x + ix]; NaN = no cell */
  /* Colour range. DIVERGING: blue through white (the midpoint) to red,
   * for signed measures such as a cosine; otherwise a light-to-dark ramp. */
  double lo, hi;
  bool diverging;
  const char *x_name, *y_name; /* the tooltip's words for x and y (NULL: "step", "layer") */
  bool annotate;               /* write each value inside its cell when the cells are large enough to hold it */
  const char *empty_note;      /* said inside the frame when no cell is finite (NULL: nothing) */
} rg_svg_heatmap;

/* Writes the heatmap as one <svg> element to FP. Returns 0, or -1 with the
 * error set when FP fails. */
int rg_svg_heatmap_write(FILE *fp, const rg_svg_heatmap *h);

#endif
