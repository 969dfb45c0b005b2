/* svg_plot.c: a small line-and-marker plot as inline SVG (svg_plot.h). */
#include "report/svg_plot.h"

#include <math.h>
#include <string.h>

#include "util/error.h"

/* Canvas and plot-area geometry in SVG user units. The legend sits right of
 * the plot area so that it never hides a point. */
enum { WIDTH = 860, HEIGHT = 360, LEFT = 70, RIGHT = 300, TOP = 34, BOTTOM = 52, TARGET_TICKS = 5 };
/* Legend names are wrapped into lines of at most LEGEND_MAX bytes, at most
 * LEGEND_LINES of them, so that every label stays inside the page (a longer
 * name ends in an ellipsis; the whole name is in each point's tooltip and in
 * the tables). */
enum { LEGEND_MAX = 44, LEGEND_LINES = 3, LEGEND_LINE_PX = 13 };

/* Colour-blind-safe palette (Okabe & Ito, "Color Universal Design", 2008). */
static const char *const PALETTE[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000", "#F0E442"};
enum { N_PALETTE = sizeof PALETTE / sizeof PALETTE[0] };

void rg_xml_escape(FILE *fp, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", fp); break;
    case '<': fputs("&lt;", fp); break;
    case '>': fputs("&gt;", fp); break;
    case '"': fputs("&quot;", fp); break;
    case '\'': fputs("&#39;", fp); break;
    default: fputc(*s, fp);
    }
  }
}

typedef struct {
  double lo, hi, step; /* axis range, extended to whole ticks */
} axis;

/* The tick spacing: RANGE / TARGET_TICKS rounded up to 1, 2 or 5 times a
 * power of ten (Heckbert, "Nice numbers for graph labels", Graphics Gems,
 * 1990), so labels read 0, 0.2, 0.4 rather than 0, 0.173, 0.346. */
static double nice_step(double range) {
  double raw = range / TARGET_TICKS;
  double mag = pow(10.0, floor(log10(raw)));
  double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static axis make_axis(double lo, double hi) {
  if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1; /* no finite data: an empty frame */
  if (hi - lo < 1e-12 * fmax(1.0, fabs(hi))) lo -= 0.5, hi += 0.5; /* one value: centre it */
  axis a = {.step = nice_step(hi - lo)};
  a.lo = floor(lo / a.step + 1e-9) * a.step;
  a.hi = ceil(hi / a.step - 1e-9) * a.step;
  return a;
}

static double px_x(const axis *a, double v) { return LEFT + (v - a->lo) / (a->hi - a->lo) * (WIDTH - LEFT - RIGHT); }
static double px_y(const axis *a, double v) { return HEIGHT - BOTTOM - (v - a->lo) / (a->hi - a->lo) * (HEIGHT - TOP - BOTTOM); }

static int finite_point(const rg_svg_series *s, size_t i) { return isfinite(s->x[i]) && isfinite(s->y[i]); }
static int finite_band(const rg_svg_series *s, size_t i) {
  return s->lo && s->hi && isfinite(s->x[i]) && isfinite(s->lo[i]) && isfinite(s->hi[i]);
}

static void widen(double *lo, double *hi, double v) {
  if (!isfinite(v)) return;
  if (!isfinite(*lo) || v < *lo) *lo = v;
  if (!isfinite(*hi) || v > *hi) *hi = v;
}

static void data_ranges(const rg_svg_plot *p, axis *ax, axis *ay) {
  double xlo = NAN, xhi = NAN, ylo = NAN, yhi = NAN;
  for (int k = 0; k < p->n_series; k++) {
    const rg_svg_series *s = &p->series[k];
    for (size_t i = 0; i < s->n; i++) {
      if (finite_point(s, i)) widen(&xlo, &xhi, s->x[i]), widen(&ylo, &yhi, s->y[i]);
      if (finite_band(s, i)) widen(&ylo, &yhi, s->lo[i]), widen(&ylo, &yhi, s->hi[i]);
    }
  }
  for (int k = 0; k < p->n_hbands; k++) widen(&ylo, &yhi, p->hbands[k].y0), widen(&ylo, &yhi, p->hbands[k].y1);
  /* only zeros, or nothing, on an axis from zero: 0 at its start, not centred */
  if (p->x_from_zero) {
    widen(&xlo, &xhi, 0.0);
    if (xlo == 0 && xhi == 0) xhi = 1;
  }
  if (p->y_from_zero) {
    widen(&ylo, &yhi, 0.0);
    if (ylo == 0 && yhi == 0) yhi = 1;
  }
  *ax = make_axis(xlo, xhi);
  *ay = make_axis(ylo, yhi);
}

/* A tick value as text; the step's scale decides the digits, and values
 * that are zero up to rounding print as 0 rather than -1.4e-17. */
static void print_tick(FILE *fp, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  fprintf(fp, "%.6g", v);
}

static void write_axes(FILE *fp, const rg_svg_plot *p, const axis *ax, const axis *ay) {
  double x0 = LEFT, x1 = WIDTH - RIGHT, y0 = HEIGHT - BOTTOM, y1 = TOP;
  fprintf(fp, "<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n");
  for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step) {
    double x = px_x(ax, v);
    fprintf(fp, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", x, y0, x, y1);
    fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x, y0 + 16);
    print_tick(fp, v, ax->step);
    fputs("</text>\n", fp);
  }
  for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step) {
    double y = px_y(ay, v);
    fprintf(fp, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", x0, y, x1, y);
    fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", x0 - 6, y + 4);
    print_tick(fp, v, ay->step);
    fputs("</text>\n", fp);
  }
  fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#555\"/>\n", LEFT, TOP,
          WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
  fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">", (x0 + x1) / 2, HEIGHT - 14);
  rg_xml_escape(fp, p->x_label);
  fprintf(fp, "</text>\n<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">",
          (y0 + y1) / 2);
  rg_xml_escape(fp, p->y_label);
  fprintf(fp, "</text>\n<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">", LEFT);
  rg_xml_escape(fp, p->title);
  fputs("</text>\n</g>\n", fp);
}

static void write_hbands(FILE *fp, const rg_svg_plot *p, const axis *ay) {
  static const char *const shades[] = {"#f3f6fb", "#fbf6ee", "#f1f8f3"};
  for (int k = 0; k < p->n_hbands; k++) {
    const rg_svg_hband *b = &p->hbands[k];
    double ya = px_y(ay, b->y1), yb = px_y(ay, b->y0);
    fprintf(fp, "<rect class=\"hband\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>", LEFT, ya,
            WIDTH - LEFT - RIGHT, yb - ya, shades[k % 3]);
    fprintf(fp, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" fill=\"#777\">", LEFT + 4, ya + 12);
    rg_xml_escape(fp, b->label);
    fputs("</text>\n", fp);
  }
}

/* The band: along the upper edge left to right, back along the lower edge,
 * over the finite band points only. */
static void write_band(FILE *fp, const rg_svg_series *s, const axis *ax, const axis *ay, const char *colour) {
  int any = 0;
  for (size_t i = 0; i < s->n; i++) any |= finite_band(s, i);
  if (!any) return;
  fputs("<path class=\"band\" d=\"", fp);
  char cmd = 'M';
  for (size_t i = 0; i < s->n; i++)
    if (finite_band(s, i)) fprintf(fp, "%c%.1f %.1f ", cmd, px_x(ax, s->x[i]), px_y(ay, s->hi[i])), cmd = 'L';
  for (size_t i = s->n; i-- > 0;)
    if (finite_band(s, i)) fprintf(fp, "L%.1f %.1f ", px_x(ax, s->x[i]), px_y(ay, s->lo[i]));
  fprintf(fp, "Z\" fill=\"%s\" fill-opacity=\"0.15\" stroke=\"none\"/>\n", colour);
}

static void write_series(FILE *fp, const rg_svg_series *s, const axis *ax, const axis *ay, const char *colour) {
  fputs("<g class=\"series\" data-name=\"", fp);
  rg_xml_escape(fp, s->name);
  fputs("\">\n", fp);
  write_band(fp, s, ax, ay, colour);
  size_t n_finite = 0;
  for (size_t i = 0; i < s->n; i++) n_finite += (size_t)finite_point(s, i);
  if (n_finite >= 2) {
    fputs("<path class=\"line\" d=\"", fp);
    char cmd = 'M';
    for (size_t i = 0; i < s->n; i++) {
      if (!finite_point(s, i)) {
        cmd = 'M'; /* a gap in the data is a gap in the line */
        continue;
      }
      fprintf(fp, "%c%.1f %.1f ", cmd, px_x(ax, s->x[i]), px_y(ay, s->y[i]));
      cmd = 'L';
    }
    fprintf(fp, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s/>\n", colour,
            s->dashed ? " stroke-dasharray=\"6 4\"" : "");
  }
  for (size_t i = 0; i < s->n; i++) {
    if (!finite_point(s, i)) continue;
    fprintf(fp, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" stroke=\"%s\"><title>", px_x(ax, s->x[i]),
            px_y(ay, s->y[i]), s->dashed ? "#fff" : colour, colour);
    rg_xml_escape(fp, s->name);
    fprintf(fp, ": %.6g, %.6g</title></circle>\n", s->x[i], s->y[i]);
  }
  fputs("</g>\n", fp);
}

/* Where a line of TEXT (remaining) ends: within MAX bytes, after the last
 * space, '/' or ':' there when there is one, never inside a UTF-8
 * character. */
static size_t wrap_line_end(const char *text, size_t max) {
  size_t len = strlen(text);
  if (len <= max) return len;
  size_t cut = max;
  while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
  for (size_t i = cut; i > max / 2; i--)
    if (text[i - 1] == ' ' || text[i - 1] == '/' || text[i - 1] == ':') return i;
  return cut;
}

int rg_svg_wrapped_text(FILE *fp, const char *text, int x, int max_bytes, int max_lines, int line_px) {
  enum { LINE_CAP = 255 };
  size_t max = max_bytes < 8 ? 8 : max_bytes > LINE_CAP ? LINE_CAP : (size_t)max_bytes;
  int lines = 0;
  while (*text && lines < max_lines) {
    size_t end = wrap_line_end(text, max);
    char line[LINE_CAP + 1];
    memcpy(line, text, end);
    size_t shown = end;
    while (shown > 0 && line[shown - 1] == ' ') shown--; /* a break at a space shows none */
    line[shown] = '\0';
    fprintf(fp, "<tspan x=\"%d\" dy=\"%d\">", x, lines ? line_px : 0);
    rg_xml_escape(fp, line);
    text += end;
    while (*text == ' ') text++;
    if (*text && lines == max_lines - 1) fputs("\u2026", fp);
    fputs("</tspan>", fp);
    lines++;
  }
  return lines ? lines : 1;
}

static void write_legend(FILE *fp, const rg_svg_plot *p) {
  fprintf(fp, "<g class=\"legend\" font-size=\"11\">\n");
  int y = TOP + 8;
  for (int k = 0; k < p->n_series; k++) {
    const char *colour = PALETTE[k % N_PALETTE];
    fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"%d\" fill=\"%s\"/>", WIDTH - RIGHT + 14, y,
            p->series[k].dashed ? 2 : 4, colour);
    fprintf(fp, "<text x=\"%d\" y=\"%d\">", WIDTH - RIGHT + 38, y + 5);
    int lines =
        rg_svg_wrapped_text(fp, p->series[k].name, WIDTH - RIGHT + 38, LEGEND_MAX, LEGEND_LINES, LEGEND_LINE_PX);
    fputs("</text>\n", fp);
    y += 18 + LEGEND_LINE_PX * (lines - 1);
  }
  fputs("</g>\n", fp);
}

void rg_svg_empty_note(FILE *fp, const char *note, int x0, int x1, int y) {
  /* 13 px sans-serif averages under 7 px a character: lines of (x1 - x0) / 7
   * bytes stay inside the frame */
  fprintf(fp, "<text class=\"empty-note\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\" fill=\"#555\">",
          (x0 + x1) / 2, y);
  rg_svg_wrapped_text(fp, note, (x0 + x1) / 2, (x1 - x0) / 7, 4, 17);
  fputs("</text>\n", fp);
}

int rg_svg_plot_write(FILE *fp, const rg_svg_plot *p) {
  axis ax, ay;
  data_ranges(p, &ax, &ay);
  /* No xmlns: inline SVG in HTML5 needs none, and the report must not hold
   * a single URL. */
  fputs("<svg class=\"plot\" id=\"", fp);
  rg_xml_escape(fp, p->id);
  fprintf(fp, "\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" font-family=\"sans-serif\">\n", WIDTH,
          HEIGHT, WIDTH, HEIGHT);
  write_hbands(fp, p, &ay);
  write_axes(fp, p, &ax, &ay);
  for (int k = 0; k < p->n_series; k++) write_series(fp, &p->series[k], &ax, &ay, PALETTE[k % N_PALETTE]);
  size_t points = 0;
  for (int k = 0; k < p->n_series; k++)
    for (size_t i = 0; i < p->series[k].n; i++) points += finite_point(&p->series[k], i);
  if (points == 0 && p->empty_note) {
    /* an empty frame says why, inside it */
    rg_svg_empty_note(fp, p->empty_note, LEFT, WIDTH - RIGHT, TOP + (HEIGHT - TOP - BOTTOM) / 2);
  }
  write_legend(fp, p);
  fputs("</svg>\n", fp);
  return ferror(fp) ? rg_error_set("writing an SVG plot failed") : 0;
}
