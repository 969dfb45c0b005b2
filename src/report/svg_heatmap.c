/* svg_heatmap.c: a grid of coloured cells (layer x step) as inline SVG (svg_heatmap.h). */
#include "report/svg_heatmap.h"

#include <math.h>
#include <stdbool.h>

#include "report/svg_plot.h"
#include "util/error.h"

/* Canvas in SVG user units: same width as the line plots, taller so that a
 * 32-layer model still gets rows a few pixels high. */
enum { WIDTH = 860, HEIGHT = 420, LEFT = 70, RIGHT = 150, TOP = 34, BOTTOM = 52, MAX_Y_LABELS = 12 };
/* A value written inside its cell needs about this much room (11 px text,
 * "-0.123" wide). */
enum { ANNOTATE_MIN_W = 44, ANNOTATE_MIN_H = 16 };

typedef struct {
  double r, g, b;
} rgb;

/* Anchor colours, evenly spaced over [0, 1]. Diverging: ColorBrewer RdBu
 * ends around white; sequential: a light-yellow to dark-blue ramp (ColorBrewer
 * YlGnBu), both readable in grey and by most colour-blind readers. */
static const rgb DIVERGING[] = {{33, 102, 172}, {146, 197, 222}, {247, 247, 247}, {244, 165, 130}, {178, 24, 43}};
static const rgb SEQUENTIAL[] = {{255, 255, 204}, {161, 218, 180}, {65, 182, 196}, {44, 127, 184}, {37, 52, 148}};
enum { N_ANCHORS = 5 };

static rgb colour_at(double t, bool diverging) {
  const rgb *a = diverging ? DIVERGING : SEQUENTIAL;
  if (!(t > 0)) t = 0; /* also NaN: callers never pass one, but stay in range */
  if (t > 1) t = 1;
  double pos = t * (N_ANCHORS - 1);
  int i = (int)pos;
  if (i >= N_ANCHORS - 1) i = N_ANCHORS - 2;
  double f = pos - i;
  return (rgb){a[i].r + f * (a[i + 1].r - a[i].r), a[i].g + f * (a[i + 1].g - a[i].g),
               a[i].b + f * (a[i + 1].b - a[i].b)};
}

static rgb colour_of(const rg_svg_heatmap *h, double v) {
  double span = h->hi - h->lo;
  return colour_at(span > 0 ? (v - h->lo) / span : 0.5, h->diverging);
}

static void write_colour(FILE *fp, const rg_svg_heatmap *h, double v) {
  rgb c = colour_of(h, v);
  fprintf(fp, "#%02x%02x%02x", (int)lround(c.r), (int)lround(c.g), (int)lround(c.b));
}

static void write_labels(FILE *fp, const rg_svg_heatmap *h, double cell_w, double cell_h) {
  fputs("<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n", fp);
  for (size_t ix = 0; ix < h->n_x; ix++)
    fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.6g</text>\n", LEFT + (ix + 0.5) * cell_w,
            HEIGHT - BOTTOM + 16, h->x[ix]);
  size_t every = (h->n_y + MAX_Y_LABELS - 1) / MAX_Y_LABELS;
  for (size_t iy = 0; iy < h->n_y; iy += every ? every : 1)
    fprintf(fp, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.6g</text>\n", LEFT - 6,
            HEIGHT - BOTTOM - (iy + 0.5) * cell_h + 4, h->y[iy]);
  fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">", (LEFT + WIDTH - RIGHT) / 2,
          HEIGHT - 14);
  rg_xml_escape(fp, h->x_label);
  fprintf(fp, "</text>\n<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">",
          (TOP + HEIGHT - BOTTOM) / 2);
  rg_xml_escape(fp, h->y_label);
  fprintf(fp, "</text>\n<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">", LEFT);
  rg_xml_escape(fp, h->title);
  fputs("</text>\n</g>\n", fp);
}

/* A vertical bar of 20 steps from lo (bottom) to hi (top), labelled at both
 * ends and in the middle. Its rects have class "colorbar", not "cell". */
static void write_colour_bar(FILE *fp, const rg_svg_heatmap *h) {
  enum { STEPS = 20, BAR_W = 16 };
  const int x = WIDTH - RIGHT + 24;
  const double step_h = (double)(HEIGHT - TOP - BOTTOM) / STEPS;
  fputs("<g class=\"colorbar\" font-size=\"11\">\n", fp);
  for (int k = 0; k < STEPS; k++) {
    double v = h->lo + (h->hi - h->lo) * (k + 0.5) / STEPS;
    fprintf(fp, "<rect class=\"colorbar\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"", x,
            HEIGHT - BOTTOM - (k + 1) * step_h, BAR_W, step_h + 0.5);
    write_colour(fp, h, v);
    fputs("\"/>\n", fp);
  }
  const double mid = (h->lo + h->hi) / 2;
  fprintf(fp, "<text x=\"%d\" y=\"%d\">%.3g</text>\n", x + BAR_W + 4, HEIGHT - BOTTOM, h->lo);
  fprintf(fp, "<text x=\"%d\" y=\"%d\">%.3g</text>\n", x + BAR_W + 4, (TOP + HEIGHT - BOTTOM) / 2 + 4, mid);
  fprintf(fp, "<text x=\"%d\" y=\"%d\">%.3g</text>\n", x + BAR_W + 4, TOP + 8, h->hi);
  /* the title along the bar, reading upwards, right of the tick labels:
   * above the bar it would run past the page's edge */
  fprintf(fp, "<text transform=\"translate(%d %d) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">",
          WIDTH - 12, (TOP + HEIGHT - BOTTOM) / 2);
  rg_xml_escape(fp, h->value_label);
  fputs("</text>\n</g>\n", fp);
}

int rg_svg_heatmap_write(FILE *fp, const rg_svg_heatmap *h) {
  const double cell_w = (double)(WIDTH - LEFT - RIGHT) / (double)(h->n_x ? h->n_x : 1);
  const double cell_h = (double)(HEIGHT - TOP - BOTTOM) / (double)(h->n_y ? h->n_y : 1);
  fputs("<svg class=\"plot heatmap\" id=\"", fp);
  rg_xml_escape(fp, h->id);
  fprintf(fp, "\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" font-family=\"sans-serif\">\n", WIDTH,
          HEIGHT, WIDTH, HEIGHT);
  fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#eee\" stroke=\"#555\"/>\n", LEFT, TOP,
          WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM); /* grey shows through where a cell has no value */
  size_t n_cells = 0;
  for (size_t iy = 0; iy < h->n_y; iy++)
    for (size_t ix = 0; ix < h->n_x; ix++) {
      double v = h->value[iy * h->n_x + ix];
      if (!isfinite(v)) continue;
      /* +0.5: adjacent cells overlap by half a unit so no hairline gaps show */
      fprintf(fp, "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"",
              LEFT + ix * cell_w, HEIGHT - BOTTOM - (iy + 1) * cell_h, cell_w + 0.5, cell_h + 0.5);
      write_colour(fp, h, v);
      fputs("\"><title>", fp);
      rg_xml_escape(fp, h->x_name ? h->x_name : "step");
      fprintf(fp, " %.6g, ", h->x[ix]);
      rg_xml_escape(fp, h->y_name ? h->y_name : "layer");
      fprintf(fp, " %.6g: %.6g</title></rect>\n", h->y[iy], v);
      n_cells++;
      if (h->annotate && cell_w >= ANNOTATE_MIN_W && cell_h >= ANNOTATE_MIN_H) {
        rgb c = colour_of(h, v); /* light text on a dark cell (ITU-R BT.601 luma) */
        bool dark = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 128;
        fprintf(fp,
                "<text class=\"cell-value\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                "fill=\"%s\">%.3g</text>\n",
                LEFT + (ix + 0.5) * cell_w, HEIGHT - BOTTOM - (iy + 0.5) * cell_h + 4, dark ? "#fff" : "#222", v);
      }
    }
  if (n_cells == 0 && h->empty_note)
    rg_svg_empty_note(fp, h->empty_note, LEFT, WIDTH - RIGHT, TOP + (HEIGHT - TOP - BOTTOM) / 2);
  write_labels(fp, h, cell_w, cell_h);
  if (n_cells > 0) write_colour_bar(fp, h); /* no colours to map */
  fputs("</svg>\n", fp);
  return ferror(fp) ? rg_error_set("writing an SVG heatmap failed") : 0;
}
