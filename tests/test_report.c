/* test_report: `refgeo report RUN_DIR` writes one self-contained
 * report.html whose plots have one <circle> per finite CSV point
 * (src/report/svg_plot.h's convention), with every text HTML-escaped.
 *
 * The inputs are hand-written CSVs: train_log.csv (5 updates), asr.csv (2
 * attacks x 3 steps, Wilson cells computed by hand from n and successes),
 * migration.csv (4 steps, the last without an admissible carrier), a
 * refusal_rates.csv (3 groups x 2 steps) and a 2-point published curve;
 * for the verdict's measures a two-step series' sensitivity.csv, pareto.csv,
 * transfer.csv and probes.csv, and a series with nothing to show. Expected
 * counts, tick labels, point values and notes come from those files, not
 * from refgeo. Old main had no `report`
 * command: every case here fails on it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testlib.h"
#include "util/fileio.h"

/* A behavior-like string that breaks HTML when written raw. */
#define NASTY "<b>\"x\" & y</b>"
#define NASTY_CSV "\"<b>\"\"x\"\" & y</b>\""
#define NASTY_ESCAPED "&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;"

static const char TRAIN_LOG[] = "step,lr,loss_total,loss_utility,loss_away,loss_toward,grad_norm\n"
                                "1,1e-5,3.0,1.0,2.0,2.0,1\n"
                                "2,1e-5,2.5,0.9,1.6,1.6,1\n"
                                "3,1e-5,2.0,0.8,1.2,1.2,1\n"
                                "4,1e-5,1.8,0.8,1.0,1.0,1\n"
                                "5,1e-5,1.7,0.75,0.95,0.95,1\n";

/* Wilson 95% intervals (z = 1.96) of 10, 4, 1, 12, 6, 2 successes in 20,
 * rounded to 3 decimals by hand; repro's reader accepts them at that
 * precision. Steps are out of order in the file on purpose: lines are drawn
 * in step order. */
static const char ASR[] = "step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi\n"
                          "50,DirectRequest,harmbench,20,4,0.2,0.081,0.416\n"
                          "0,DirectRequest,harmbench,20,10,0.5,0.299,0.701\n"
                          "100,DirectRequest,harmbench,20,1,0.05,0.009,0.236\n"
                          "0," NASTY_CSV ",harmbench,20,12,0.6,0.387,0.781\n"
                          "50," NASTY_CSV ",harmbench,20,6,0.3,0.145,0.519\n"
                          "100," NASTY_CSV ",harmbench,20,2,0.1,0.028,0.301\n";

/* L = 30 layers (10 / 0.3333333); step 150 has no admissible carrier. */
static const char MIGRATION[] =
    "step,best_layer,best_pos,rel_depth,label,bypass,induce,kl,n_admissible,angle_vs_step0_deg,erank_sigma,"
    "erank_sigma2,pr,matrix\n"
    "0,10,-1,0.3333333,middle,-2.1,3.0,0.05,40,0,3.2,2.5,2.1,carrier\n"
    "50,14,-2,0.4666667,middle,-1.8,2.5,0.04,35,12.5,3.0,2.4,2.0,carrier\n"
    "100,22,-1,0.7333333,late,-1.1,1.9,0.06,20,33.1,2.8,2.2,1.9,carrier\n"
    "150,,,nan,none,nan,nan,nan,0,nan,nan,nan,nan,none\n";

/* XSTest-style over-refusal: per step the all/all row, then one per label. */
static const char REFUSAL_RATES[] =
    "step,attack,classifier,group_column,group,n,refusals,refusal_rate,wilson95_lo,wilson95_hi\n"
    "0,xstest,refusal-xstest,all,all,20,8,0.4,0.219,0.613\n"
    "0,xstest,refusal-xstest,label,safe,10,2,0.2,0.057,0.510\n"
    "0,xstest,refusal-xstest,label,unsafe,10,6,0.6,0.313,0.832\n"
    "100,xstest,refusal-xstest,all,all,20,11,0.55,0.342,0.742\n"
    "100,xstest,refusal-xstest,label,safe,10,4,0.4,0.168,0.687\n"
    "100,xstest,refusal-xstest,label,unsafe,10,7,0.7,0.397,0.892\n";

/* Two steps x 3 layers x 2 eoi positions. The heatmaps show position -1,
 * migration.csv's first best_pos: 5 finite cos_step0 cells there (step
 * 100, layer 0 is nan) and 5 bypass cells (carriers.csv has no step-100
 * layer-2 row). The position -2 rows must not be drawn. */
static const char GEOMETRY[] = "step,checkpoint,layer,pos,hook,cos_step0\n"
                               "0,c0,0,-2,blocks.0.hook_resid_pre,1\n"
                               "0,c0,0,-1,blocks.0.hook_resid_pre,1\n"
                               "0,c0,1,-1,blocks.1.hook_resid_pre,1\n"
                               "0,c0,2,-1,blocks.2.hook_resid_pre,1\n"
                               "100,c100,0,-1,blocks.0.hook_resid_pre,nan\n"
                               "100,c100,1,-1,blocks.1.hook_resid_pre,0.5\n"
                               "100,c100,2,-1,blocks.2.hook_resid_pre,-0.25\n"
                               "100,c100,2,-2,blocks.2.hook_resid_pre,0.9\n";
static const char CARRIERS[] = "step,pos,layer,bypass,induce,kl,admissible,reject_reason,rank\n"
                               "0,-2,0,3.5,1,0.01,1,,1\n"
                               "0,-1,0,1.0,1,0.01,1,,2\n"
                               "0,-1,1,-2.0,1,0.01,1,,1\n"
                               "0,-1,2,0.5,1,0.01,1,,3\n"
                               "100,-1,0,2.0,1,0.01,1,,2\n"
                               "100,-1,1,-1.5,1,0.01,1,,1\n";

/* The verdict's reported measures of a two-step series (steps 0 and 100)
 * of a 12-layer model (migration.csv: 10 / 0.8333333), as `refgeo geometry`
 * writes them into RUN/geometry (csv-formats.md).
 * sensitivity.csv: 2 steps x 3 KL budgets; step 0 has no admissible
 * candidate at tau = 0.05 (6 counts, 5 layers). */
static const char V_MIGRATION[] =
    "step,best_layer,best_pos,rel_depth,label,bypass,induce,kl,n_admissible,angle_vs_step0_deg,erank_sigma,"
    "erank_sigma2,pr,matrix,status,probe_layer\n"
    "0,10,-1,0.8333333,late,-2.0,1.5,0.08,5,0,1.2,1.1,1.05,carrier,carrier,1\n"
    "100,3,-1,0.25,early,-1.0,1.2,0.09,6,80,1.3,1.2,1.1,carrier,carrier,1\n";
static const char V_SENSITIVITY[] = "step,kl_max,n_admissible,best_layer,best_pos,best_bypass\n"
                                    "0,0.05,0,,,nan\n"
                                    "0,0.1,2,9,-1,-1.5\n"
                                    "0,0.5,5,10,-1,-2.0\n"
                                    "100,0.05,1,3,-1,-0.5\n"
                                    "100,0.1,3,3,-2,-1.0\n"
                                    "100,0.5,6,4,-1,-1.8\n";
/* Step 0's front has 3 candidates, listed out of KL order (the line runs in
 * KL order); step 100's one point draws no line. */
static const char V_PARETO[] = "step,pos,layer,bypass,kl\n"
                               "0,-1,10,-2.0,0.4\n"
                               "0,-1,9,-1.5,0.08\n"
                               "0,-2,5,-0.3,0.04\n"
                               "100,-1,3,-1.0,0.09\n";
/* Sources 0 and 100, targets 0, 50, 100; 100 -> 50 has no number: 5 cells. */
/* The matrices draw the carriers' rows only: a layer's row (carrier 0, from
 * transfer_layers) would overwrite cell (0, 100) with -9 / 9. */
static const char V_TRANSFER[] = "from_step,to_step,pos,layer,carrier,bypass,induce,base_harmful,base_harmless\n"
                                 "0,0,-1,10,1,-2,1.5,3,-2\n"
                                 "0,50,-1,10,1,-1,0.5,2.5,-2\n"
                                 "0,100,-1,10,1,0.5,-1,2,-2\n"
                                 "0,100,-2,4,0,-9,9,2,-2\n"
                                 "100,0,-1,3,1,-0.5,0.2,3,-2\n"
                                 "100,50,-1,3,1,nan,nan,2.5,-2\n"
                                 "100,100,-1,3,1,-1.0,1.2,2,-2\n";
/* 2 steps x 3 layers x 2 positions. The plot keeps each layer's best
 * position: step 0 reads 0.55, 0.9, 0.95 at layers 0, 1, 2; step 100 has no
 * AUROC at layer 0 (a gap), then 0.82 and 0.7. */
static const char V_PROBES[] = "step,layer,pos,auroc,n_refused,n_complied\n"
                               "0,0,-2,0.4,5,5\n"
                               "0,0,-1,0.55,5,5\n"
                               "0,1,-2,0.9,5,5\n"
                               "0,1,-1,0.7,5,5\n"
                               "0,2,-2,0.85,5,5\n"
                               "0,2,-1,0.95,5,5\n"
                               "100,0,-2,nan,5,0\n"
                               "100,0,-1,nan,5,0\n"
                               "100,1,-2,0.6,5,5\n"
                               "100,1,-1,0.82,5,5\n"
                               "100,2,-2,0.5,5,5\n"
                               "100,2,-1,0.7,5,5\n";
/* A series with nothing to show: one step, nothing admissible, no front, no
 * probe AUROC (every harmful val prompt refused). */
static const char V_NONE_MIGRATION[] = "step,best_layer,best_pos,rel_depth,label,status\n"
                                       "0,,,nan,none,none admissible\n";
static const char V_NONE_SENSITIVITY[] = "step,kl_max,n_admissible,best_layer,best_pos,best_bypass\n"
                                         "0,0.1,0,,,nan\n"
                                         "0,1,0,,,nan\n";
static const char V_NONE_PARETO[] = "step,pos,layer,bypass,kl\n";
static const char V_NONE_TRANSFER[] = "from_step,to_step,pos,layer,carrier,bypass,induce,base_harmful,base_harmless\n"
                                      "0,0,-1,5,1,-0.2,0.1,1,-1\n";
static const char V_NONE_PROBES[] = "step,layer,pos,auroc,n_refused,n_complied\n"
                                    "0,0,-1,nan,8,0\n"
                                    "0,1,-1,nan,8,0\n";

/* The model a run names: 3 bytes "abc", whose sha256 is FIPS 180-2's first
 * example. */
#define MODEL_SHA256 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static const char PUBLISHED[] = "source,method,attack,category,step,asr,n\n"
                                "paper,R2D2,DirectRequest,all,0,0.45,\n"
                                "paper,R2D2,DirectRequest,all,100,0.10,\n"
                                "paper,R2D2,DirectRequest,all,,0.2,\n"; /* no step: not drawn */

static char *g_root;

static char *path_in(const char *rel) { return rg_path_join(g_root, rel); }

static void write_in(const char *rel, const char *text) {
  char *p = path_in(rel);
  assert_int_equal(rg_write_file_atomic(p, text, strlen(text)), 0);
  free(p);
}

static void make_dir(const char *rel) {
  char *p = path_in(rel);
  assert_int_equal(rg_mkdir_p(p), 0);
  free(p);
}

static int setup(void **state) {
  char name[64];
  snprintf(name, sizeof name, "report-%d", (int)getpid());
  g_root = t_tmp_path(name); /* a fresh folder per process */
  make_dir("run");
  make_dir("asr");
  make_dir("geo");
  make_dir("xstest");
  make_dir("empty");
  make_dir("bad");
  write_in("run/train_log.csv", TRAIN_LOG);
  char *model = path_in("model.gguf"), config[1024];
  write_in("model.gguf", "abc");
  snprintf(config, sizeof config, "[model]\nmodel = %s\n[train]\nbehavior = " NASTY "\n", model);
  free(model);
  write_in("run/config.ini", config);
  write_in("run/repro.txt", "step 100 DirectRequest: published 0.10 inside [0.009, 0.236]: reproduced\n");
  write_in("asr/asr.csv", ASR);
  write_in("geo/migration.csv", MIGRATION);
  write_in("geo/geometry.csv", GEOMETRY);
  write_in("geo/carriers.csv", CARRIERS);
  write_in("xstest/refusal_rates.csv", REFUSAL_RATES);
  write_in("published.csv", PUBLISHED);
  make_dir("vrun/geometry");
  write_in("vrun/geometry/migration.csv", V_MIGRATION);
  write_in("vrun/geometry/sensitivity.csv", V_SENSITIVITY);
  write_in("vrun/geometry/pareto.csv", V_PARETO);
  write_in("vrun/geometry/transfer.csv", V_TRANSFER);
  write_in("vrun/geometry/probes.csv", V_PROBES);
  make_dir("vnone");
  write_in("vnone/migration.csv", V_NONE_MIGRATION);
  write_in("vnone/sensitivity.csv", V_NONE_SENSITIVITY);
  write_in("vnone/pareto.csv", V_NONE_PARETO);
  write_in("vnone/transfer.csv", V_NONE_TRANSFER);
  write_in("vnone/probes.csv", V_NONE_PROBES);
  return 0;
}

static int teardown(void **state) {
  free(g_root);
  return 0;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The <svg> element with id ID, as a malloc'd string (fails when absent). */
static char *svg_of(const char *html, const char *id) {
  char key[96];
  snprintf(key, sizeof key, " id=\"%s\"", id);
  const char *at = strstr(html, key), *start = at;
  if (!at) fail_msg("no plot %s", id);
  while (start > html && strncmp(start, "<svg class=\"plot", 16) != 0) start--;
  if (strncmp(start, "<svg class=\"plot", 16) != 0 || strchr(start, '>') < at) fail_msg("%s is not a plot", id);
  const char *end = strstr(start, "</svg>");
  assert_non_null(end);
  return strndup(start, (size_t)(end - start) + 6);
}

typedef struct {
  const char *id;
  size_t circles, series, lines, bands, hbands;
} plot_counts;

static void check_plot(const char *html, const plot_counts *want) {
  char *svg = svg_of(html, want->id);
  size_t got[] = {count(svg, "<circle"), count(svg, "<g class=\"series\""), count(svg, "class=\"line\""),
                  count(svg, "class=\"band\""), count(svg, "class=\"hband\"")};
  size_t exp[] = {want->circles, want->series, want->lines, want->bands, want->hbands};
  static const char *const what[] = {"circles", "series", "lines", "bands", "hbands"};
  for (int i = 0; i < 5; i++)
    if (got[i] != exp[i]) fail_msg("%s: %zu %s, want %zu", want->id, got[i], what[i], exp[i]);
  free(svg);
}

static void run_report(const char *args, int want_rc, char **err) {
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "report %s", args);
  int rc = t_run_cli(cmd, NULL, err);
  if (rc != want_rc) fail_msg("refgeo %s: exit %d, want %d (%s)", cmd, rc, want_rc, err ? *err : "");
}

static void test_report_plots(void **state) {
  char args[1024], *err = NULL;
  snprintf(args, sizeof args, "%s/run --asr %s/asr --geometry %s/geo", g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  char *path = path_in("run/report.html");
  char *html = rg_read_file(path, NULL);
  assert_non_null(html);

  /* Self-contained: no URL, no external or inline script, no image. */
  static const char *const banned[] = {"http", "src=", "<script", "<link", "<img", "url(", "@import"};
  for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
    if (strstr(html, banned[i])) fail_msg("report.html holds '%s'", banned[i]);
  /* One file: the run dir holds the inputs and report.html, no temp file. */
  char *run_dir = path_in("run");
  char ls[1200];
  snprintf(ls, sizeof ls, "ls -A %s | wc -l", run_dir);
  FILE *p = popen(ls, "r");
  int n_files = 0;
  assert_int_equal(fscanf(p, "%d", &n_files), 1);
  pclose(p);
  assert_int_equal(n_files, 4); /* train_log.csv, config.ini, repro.txt, report.html */
  free(run_dir);

  /* Marks per plot, counted from the CSVs above: ASR 2 attacks x 3 rows with
   * bands; losses 4 columns x 5 rows; the carrier's layer 3 of 4 rows (step
   * 150 has none) over 3 bands; spectrum 3 columns x 3 finite rows. */
  const plot_counts want[] = {
      {"plot-asr", 6, 2, 2, 2, 0},
      {"plot-losses", 20, 4, 4, 0, 0},
      {"plot-carrier-layer", 3, 1, 1, 0, 3},
      {"plot-spectrum", 9, 3, 3, 0, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) check_plot(html, &want[i]);
  assert_null(strstr(html, "id=\"plot-overrefusal\""));

  /* Heatmaps: one cell per finite value at position -1, with its value. */
  char *cos = svg_of(html, "plot-cos-step0"), *bypass = svg_of(html, "plot-bypass");
  assert_int_equal(count(cos, "class=\"cell\""), 5);
  assert_int_equal(count(bypass, "class=\"cell\""), 5);
  assert_non_null(strstr(cos, "step 100, layer 2: -0.25</title>"));
  assert_null(strstr(cos, ": 0.9</title>")); /* position -2 */
  assert_non_null(strstr(cos, "(eoi position -1)"));
  assert_non_null(strstr(bypass, "step 0, layer 1: -2</title>"));
  /* cos = 1 is the diverging scale's red end (ColorBrewer RdBu #b2182b),
   * bypass = -2 (the minimum) the sequential scale's light end (#ffffcc). */
  assert_non_null(strstr(cos, "fill=\"#b2182b\"><title>step 0, layer 0: 1</title>"));
  assert_non_null(strstr(bypass, "fill=\"#ffffcc\"><title>step 0, layer 1: -2</title>"));
  free(cos);
  free(bypass);

  /* The repro verdict of the run dir, as written. */
  assert_non_null(strstr(html, "<h2 id=\"repro\">"));
  assert_non_null(strstr(html, "inside [0.009, 0.236]: reproduced"));

  /* Provenance: the version CMake states and the model's sha256. */
  assert_non_null(strstr(html, "<th>refgeo</th><td>" REFGEO_VERSION "</td>"));
  assert_non_null(strstr(html, MODEL_SHA256 "  model.gguf"));

  /* The points carry the CSV's values (tooltips "NAME: step, value"), and
   * the ASR axes have round ticks: y 0..0.8 by 0.2 (data 0.009..0.781 and
   * 0), x 0..100 by 20. */
  char *asr = svg_of(html, "plot-asr");
  assert_non_null(strstr(asr, "DirectRequest / harmbench: 50, 0.2</title>"));
  assert_non_null(strstr(asr, NASTY_ESCAPED " / harmbench: 100, 0.1</title>"));
  static const char *const ticks[] = {">0</text>", ">0.2</text>", ">0.4</text>", ">0.6</text>", ">0.8</text>",
                                      ">20</text>", ">100</text>"};
  for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++)
    if (!strstr(asr, ticks[i])) fail_msg("plot-asr lacks the tick %s", ticks[i]);
  assert_null(strstr(asr, ">1</text>"));
  /* Sorted by step although the file lists step 50 first: the
   * DirectRequest line runs through x = 70, 315, 560 (plot area 70..560
   * for steps 0..100, svg_plot.c's LEFT and WIDTH - RIGHT). */
  const char *dr = strstr(asr, "<g class=\"series\" data-name=\"DirectRequest / harmbench\">");
  assert_non_null(dr);
  const char *line = strstr(dr, "<path class=\"line\" d=\"");
  assert_non_null(line);
  assert_int_equal(strncmp(line + strlen("<path class=\"line\" d=\""), "M70.0 ", 6), 0);
  const char *x315 = strstr(line, "L315.0 "), *x560 = strstr(line, "L560.0 ");
  assert_true(x315 && x560 && x315 < x560 && x560 < strchr(line, '>'));
  free(asr);
  char *layer = svg_of(html, "plot-carrier-layer");
  assert_non_null(strstr(layer, ">early</text>"));
  assert_non_null(strstr(layer, ">late</text>"));
  assert_non_null(strstr(layer, ">30</text>")); /* L = 30 layers: the late band's top */
  free(layer);

  /* Escaping: the raw string never appears; legend, table and config show
   * it escaped. */
  assert_null(strstr(html, NASTY));
  assert_true(count(html, NASTY_ESCAPED) >= 3 + 3 + 1 + 1); /* 3 tooltips, 3 table cells, legend, config */
  free(html);
  free(path);
}

static void test_report_published_and_overrefusal(void **state) {
  char args[1024], *err = NULL;
  snprintf(args, sizeof args,
           "%s/run --asr %s/asr --published %s/published.csv --overrefusal %s/xstest --out %s/with-published.html",
           g_root, g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  char *path = path_in("with-published.html");
  char *html = rg_read_file(path, NULL);
  assert_non_null(html);
  /* Over-refusal: 3 groups (all, safe, unsafe) x 2 steps, each with its band. */
  check_plot(html, &(plot_counts){"plot-overrefusal", 6, 3, 3, 3, 0});
  char *over = svg_of(html, "plot-overrefusal");
  assert_non_null(strstr(over, "xstest / refusal-xstest / label / safe: 100, 0.4</title>"));
  free(over);
  /* + the 2 published points with a step, one dashed series. */
  check_plot(html, &(plot_counts){"plot-asr", 8, 3, 3, 2, 0});
  char *asr = svg_of(html, "plot-asr");
  assert_int_equal(count(asr, "stroke-dasharray"), 1);
  assert_non_null(strstr(asr, "published: DirectRequest (R2D2): 100, 0.1</title>"));
  free(asr);
  free(html);
  /* Two --asr folders: each series named by its folder's own name (the
   * legend is narrow; the full path is in the tables). */
  snprintf(args, sizeof args, "%s/run --asr %s/asr --asr %s/asr/ --out %s/two.html", g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  free(path);
  path = path_in("two.html");
  html = rg_read_file(path, NULL);
  assert_non_null(html);
  check_plot(html, &(plot_counts){"plot-asr", 12, 4, 4, 4, 0});
  assert_non_null(strstr(html, "data-name=\"asr: DirectRequest / harmbench\""));
  free(html);
  free(path);
  /* Two --overrefusal folders accumulate (refgeo run passes one per prompt
   * set): both drawn, each series named by its folder. */
  snprintf(args, sizeof args, "mkdir -p %s/xstest-copy && cp %s/xstest/refusal_rates.csv %s/xstest-copy/", g_root,
           g_root, g_root);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "%s/run --overrefusal %s/xstest --overrefusal %s/xstest-copy --out %s/two-over.html",
           g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  path = path_in("two-over.html");
  html = rg_read_file(path, NULL);
  assert_non_null(html);
  check_plot(html, &(plot_counts){"plot-overrefusal", 12, 6, 6, 6, 0});
  over = svg_of(html, "plot-overrefusal");
  assert_non_null(strstr(over, "xstest: xstest / refusal-xstest / label / safe: 100, 0.4</title>"));
  assert_non_null(strstr(over, "xstest-copy: xstest / refusal-xstest / label / safe: 100, 0.4</title>"));
  free(over);
  free(html);
  free(path);
}

/* --notebook: an nbformat 4.5 notebook whose code cells redraw each plot
 * from the CSVs and carry, as saved output, the very SVG of report.html.
 * (nbformat's own validator and an executed run are the optional Python
 * check tests/check_notebook.py.) */
static void test_report_notebook(void **state) {
  char args[1024], *err = NULL;
  snprintf(args, sizeof args, "%s/run --asr %s/asr --geometry %s/geo --out %s/nb.html --notebook --notebook-dir %s/nb/",
           g_root, g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  char *nb_path = path_in("nb/run.ipynb"), *html_path = path_in("nb.html");
  char *text = rg_read_file(nb_path, NULL), *html = rg_read_file(html_path, NULL);
  assert_non_null(text);
  assert_non_null(html);
  cJSON *nb = cJSON_Parse(text);
  assert_non_null(nb);
  assert_int_equal(cJSON_GetObjectItem(nb, "nbformat")->valueint, 4);
  assert_int_equal(cJSON_GetObjectItem(nb, "nbformat_minor")->valueint, 5);
  static const char *const ids[] = {"plot-asr", "plot-carrier-layer", "plot-spectrum", "plot-cos-step0",
                                    "plot-bypass", "plot-losses"};
  size_t n_code = 0;
  const cJSON *cell;
  cJSON_ArrayForEach(cell, cJSON_GetObjectItem(nb, "cells")) {
    const char *type = cJSON_GetObjectItem(cell, "cell_type")->valuestring;
    assert_non_null(cJSON_GetObjectItem(cell, "id"));
    if (strcmp(type, "code") != 0) continue;
    assert_true(n_code < sizeof ids / sizeof ids[0]);
    const char *source = cJSON_GetObjectItem(cell, "source")->valuestring;
    const cJSON *out = cJSON_GetArrayItem(cJSON_GetObjectItem(cell, "outputs"), 0);
    const char *svg = cJSON_GetObjectItem(cJSON_GetObjectItem(out, "data"), "image/svg+xml")->valuestring;
    char *want = svg_of(html, ids[n_code]);
    if (strncmp(svg, want, strlen(want)) != 0) fail_msg("code cell %zu: its SVG is not %s's", n_code, ids[n_code]);
    free(want);
    /* every cell names the run relative to the notebook's folder (nb/): the
     * run's own CSVs are read below RUN, and the small tables of the folders
     * given outside it (asr/, geo/) are written into the cell, so nothing is
     * read by absolute path */
    assert_non_null(strstr(source, "RUN = Path(\"../run\")"));
    assert_non_null(strstr(source, "pd.read_csv("));
    assert_null(strstr(source, "pd.read_csv(\"/"));
    if (strcmp(ids[n_code], "plot-asr") == 0) assert_non_null(strstr(source, "pd.read_csv(io.StringIO(\"step,"));
    if (strcmp(ids[n_code], "plot-losses") == 0) assert_non_null(strstr(source, "RUN / \"train_log.csv\""));
    n_code++;
  }
  assert_int_equal(n_code, sizeof ids / sizeof ids[0]);
  /* The escaped behavior name in the Markdown table, never raw HTML. */
  assert_null(strstr(text, NASTY_CSV));
  assert_non_null(strstr(text, "&lt;b&gt;"));
  cJSON_Delete(nb);
  free(text);
  free(html);
  free(nb_path);
  free(html_path);
}

/* Runs tests/check/SCRIPT with the check environment's Python; a script
 * that exits 77 (no browser, no nbformat) skips the test. */
static void run_check(const char *python, const char *script, const char *args) {
  char *path = t_fixture_path(script), cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s' '%s' %s", python, path, args);
  free(path);
  int rc = system(cmd);
  int code = rc >= 0 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (code == 77) skip();
  if (code != 0) fail_msg("%s failed (exit %d)", script, code);
}

/* Acceptance of the report in the tools people read it with: report.html
 * in headless Chromium (each plot's marks in the parsed DOM, a screenshot
 * that is not blank) and the notebook in Jupyter (nbformat.validate, then
 * nbconvert --execute). Needs REFGEO_CHECK_PYTHON (scripts/check-env.sh
 * makes it; scripts/test.sh passes it); skipped without it. */
static void test_report_in_browser_and_jupyter(void **state) {
  const char *python = getenv("REFGEO_CHECK_PYTHON");
  if (!python || !*python) {
    print_message("skipped: REFGEO_CHECK_PYTHON is not set (scripts/check-env.sh)\n");
    skip();
  }
  char args[2048], *err = NULL;
  snprintf(args, sizeof args, "cd %s && mkdir -p ext && cp -r asr geo xstest published.csv ext/", g_root);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args,
           "%s/run --asr %s/ext/asr --geometry %s/ext/geo --overrefusal %s/ext/xstest --published %s/ext/published.csv "
           "--out %s/full.html --notebook --notebook-dir %s/full-nb",
           g_root, g_root, g_root, g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  /* Marks per plot from the CSVs above: ASR 2 x 3 measured + 2 published
   * points, over-refusal 3 groups x 2 steps, the carrier's layer 3,
   * spectrum 3 x 3, heatmaps 5 cells each, losses 4 x 5. */
  snprintf(args, sizeof args,
           "%s/full.html %s/report.png plot-asr=8 plot-overrefusal=6 plot-carrier-layer=3 plot-spectrum=9 "
           "plot-cos-step0=5 plot-bypass=5 plot-losses=20",
           g_root, g_root);
  run_check(python, "../check/check_report_browser.py", args);
  /* The notebook runs with only the run directory: the copies of the
   * folders given outside it are gone when it executes. */
  snprintf(args, sizeof args, "rm -r %s/ext", g_root);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "%s/full-nb/run.ipynb %s/executed", g_root, g_root);
  run_check(python, "../check/check_notebook.py", args);
  /* The verdict's measures (test_report_verdict_measures' counts), and the
   * notebook's code for them, with data and without. */
  snprintf(args, sizeof args,
           "%s/vrun --geometry %s/vrun/geometry --out %s/vfull.html --notebook --notebook-dir %s/vfull-nb", g_root,
           g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  snprintf(args, sizeof args,
           "%s/vfull.html %s/vreport.png plot-sensitivity=6 plot-sensitivity-layer=5 plot-pareto=4 "
           "plot-transfer-bypass=5 plot-transfer-induce=5 plot-probes=5",
           g_root, g_root);
  run_check(python, "../check/check_report_browser.py", args);
  snprintf(args, sizeof args, "%s/vfull-nb/vrun.ipynb %s/vexecuted", g_root, g_root);
  run_check(python, "../check/check_notebook.py", args);
  snprintf(args, sizeof args, "%s/run --geometry %s/vnone --out %s/vnone-nb.html --notebook --notebook-dir %s/vnone-nb",
           g_root, g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  snprintf(args, sizeof args, "%s/vnone-nb/run.ipynb %s/vnone-executed", g_root, g_root);
  run_check(python, "../check/check_notebook.py", args);
}

/* One line on stderr, naming NAME, exit 1, and no report written. */
static void expect_error(const char *args, const char *name) {
  char *err = NULL;
  run_report(args, 1, &err);
  if (!strstr(err, name)) fail_msg("error '%s' does not name %s", err, name);
  if (count(err, "\n") != 1 || err[strlen(err) - 1] != '\n') fail_msg("not one line: '%s'", err);
  free(err);
}

static void test_report_bad_inputs(void **state) {
  char args[1024], file[1024];
  snprintf(args, sizeof args, "%s/empty", g_root);
  snprintf(file, sizeof file, "%s/empty: no CSV to report", g_root);
  expect_error(args, file);
  char *report = path_in("empty/report.html");
  assert_false(rg_path_exists(report));
  free(report);

  /* An unterminated quote: csv_table refuses it. */
  write_in("bad/asr.csv", "step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi\n0,\"Direct,h,20,1,0.05,0,1\n");
  snprintf(args, sizeof args, "%s/run --asr %s/bad", g_root, g_root);
  snprintf(file, sizeof file, "%s/bad/asr.csv", g_root);
  expect_error(args, file);

  /* A loss that is not a number. */
  write_in("bad/train_log.csv", "step,loss_total\n1,2.0\n2,abc\n");
  snprintf(args, sizeof args, "%s/bad --out %s/bad.html", g_root, g_root);
  snprintf(file, sizeof file, "%s/bad/train_log.csv: row 2, column loss_total: 'abc' is not a number", g_root);
  expect_error(args, file);
  char *bad_html = path_in("bad.html");
  assert_false(rg_path_exists(bad_html));
  free(bad_html);

  /* A published curve that does not parse, and --asr on a folder without asr.csv. */
  write_in("bad/published.csv", "source,attack,step\nx,y,1\n"); /* no asr column */
  snprintf(args, sizeof args, "%s/run --asr %s/asr --published %s/bad/published.csv", g_root, g_root, g_root);
  snprintf(file, sizeof file, "%s/bad/published.csv", g_root);
  expect_error(args, file);
  snprintf(args, sizeof args, "%s/run --asr %s/geo", g_root, g_root);
  snprintf(file, sizeof file, "%s/geo: no asr.csv", g_root);
  expect_error(args, file);
}

/* The text of the one <text class="empty-note"> of SVG with its tspans'
 * lines joined by spaces, malloc'd; NULL when SVG has none. */
static char *empty_note_of(const char *svg) {
  const char *at = strstr(svg, "class=\"empty-note\"");
  if (!at) return NULL;
  assert_null(strstr(at + 1, "class=\"empty-note\""));
  const char *end = strstr(at, "</text>");
  assert_non_null(end);
  char *out = calloc((size_t)(end - at) + 1, 1);
  size_t n = 0;
  for (const char *p = strchr(at, '>') + 1; p < end;) {
    if (*p == '<') {
      if (strncmp(p, "<tspan", 6) == 0 && n > 0) out[n++] = ' ';
      p = strchr(p, '>') + 1;
      continue;
    }
    out[n++] = *p++;
  }
  return out;
}

static void expect_note(const char *html, const char *id, const char *note) {
  char *svg = svg_of(html, id), *got = empty_note_of(svg);
  if (!got || strcmp(got, note) != 0) fail_msg("%s: empty note '%s', want '%s'", id, got ? got : "(none)", note);
  free(got);
  free(svg);
}

static void expect_in(const char *html, const char *id, const char *const *texts, size_t n) {
  char *svg = svg_of(html, id);
  for (size_t i = 0; i < n; i++)
    if (!strstr(svg, texts[i])) fail_msg("%s lacks '%s'", id, texts[i]);
  assert_null(empty_note_of(svg)); /* a plot with data says no "why empty" */
  free(svg);
}

/* The verdict's reported measures, from RUN/geometry: sensitivity curves,
 * Pareto fronts, the transfer matrices and the probe AUROC, each with the
 * marks and values of the CSVs above; the notebook redraws each from the
 * CSVs below RUN. */
static void test_report_verdict_measures(void **state) {
  char args[1024], *err = NULL;
  snprintf(args, sizeof args, "%s/vrun --geometry %s/vrun/geometry --notebook --notebook-dir %s/vnb", g_root, g_root,
           g_root);
  run_report(args, 0, &err);
  free(err);
  char *path = path_in("vrun/report.html");
  char *html = rg_read_file(path, NULL);
  assert_non_null(html);

  const plot_counts want[] = {
      {"plot-sensitivity", 6, 2, 2, 0, 0},
      {"plot-sensitivity-layer", 5, 2, 2, 0, 3}, /* over the early/middle/late bands of 12 layers */
      {"plot-pareto", 4, 2, 1, 0, 0},
      {"plot-probes", 5, 2, 2, 0, 1}, /* the AUROC >= 0.8 band */
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) check_plot(html, &want[i]);
  /* tooltips "series: x, y" carry the CSV's values; series are named by step */
  static const char *const sens[] = {"data-name=\"step 0\"", "data-name=\"step 100\"", "step 0: 0.1, 2</title>",
                                     "step 100: 0.5, 6</title>", ">KL budget \u03c4</text>",
                                     ">admissible candidates</text>"};
  expect_in(html, "plot-sensitivity", sens, sizeof sens / sizeof sens[0]);
  static const char *const sens_layer[] = {"step 0: 0.1, 9</title>", "step 100: 0.5, 4</title>", ">late</text>"};
  expect_in(html, "plot-sensitivity-layer", sens_layer, sizeof sens_layer / sizeof sens_layer[0]);
  static const char *const pareto[] = {"step 0: 0.08, -1.5</title>", "step 100: 0.09, -1</title>"};
  expect_in(html, "plot-pareto", pareto, sizeof pareto / sizeof pareto[0]);
  /* step 0's front in KL order: x = 0.04, 0.08, 0.4 on an axis 0..0.4 over
   * pixels 70..560 (svg_plot.c's LEFT, WIDTH - RIGHT): 119, 168, 560 */
  char *svg = svg_of(html, "plot-pareto");
  const char *line = strstr(strstr(svg, "data-name=\"step 0\""), "<path class=\"line\" d=\"M119.0 ");
  assert_non_null(line);
  const char *x168 = strstr(line, "L168.0 "), *x560 = strstr(line, "L560.0 ");
  assert_true(x168 && x560 && x168 < x560 && x560 < strchr(line, '>'));
  free(svg);
  /* probes: each layer's best position; layer 1 of step 0 reads 0.9, not
   * position -1's 0.7 */
  static const char *const probes[] = {"step 0: 0, 0.55</title>", "step 0: 1, 0.9</title>", "step 0: 2, 0.95</title>",
                                       "step 100: 1, 0.82</title>", "step 100: 2, 0.7</title>",
                                       "AUROC \u2265 0.8", ">layer</text>"};
  expect_in(html, "plot-probes", probes, sizeof probes / sizeof probes[0]);
  svg = svg_of(html, "plot-probes");
  assert_null(strstr(svg, "step 0: 1, 0.7</title>"));
  assert_null(strstr(svg, ", 0.4</title>"));
  free(svg);

  /* transfer: source x target matrices, one cell and one written value per
   * finite number, named by both steps; both axes say what they are */
  char *bypass = svg_of(html, "plot-transfer-bypass"), *induce = svg_of(html, "plot-transfer-induce");
  assert_int_equal(count(bypass, "class=\"cell\""), 5);
  assert_int_equal(count(induce, "class=\"cell\""), 5);
  assert_int_equal(count(bypass, "class=\"cell-value\""), 5);
  assert_non_null(strstr(bypass, "<title>target step 100, source step 0: 0.5</title>"));
  assert_non_null(strstr(induce, "<title>target step 0, source step 100: 0.2</title>"));
  assert_null(strstr(bypass, "target step 50, source step 100"));
  assert_non_null(strstr(bypass, ">target step (the model the direction is scored in)</text>"));
  assert_non_null(strstr(bypass, ">source step (whose carrier)</text>"));
  assert_non_null(strstr(bypass, ">bypass (refusal log-odds; lower: stronger)</text>"));
  /* bypass -2, the minimum, is the sequential scale's light end (#ffffcc) */
  assert_non_null(strstr(bypass, "fill=\"#ffffcc\"><title>target step 0, source step 0: -2</title>"));
  assert_null(empty_note_of(bypass));
  free(bypass);
  free(induce);

  /* page order: the verdict's measures after the migration plots */
  const char *mig = strstr(html, "id=\"plot-carrier-layer\""), *sens_at = strstr(html, "<h2 id=\"sensitivity\">"),
             *tr = strstr(html, "<h2 id=\"transfer\">"), *pr = strstr(html, "<h2 id=\"probes\">");
  assert_true(mig && sens_at && tr && pr && mig < sens_at && sens_at < tr && tr < pr);
  /* and their CSVs as tables */
  static const char *const tables[] = {"sensitivity.csv", "pareto.csv", "transfer.csv", "probes.csv"};
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char key[128];
    snprintf(key, sizeof key, "/vrun/geometry/%s</", tables[i]);
    if (!strstr(html, key)) fail_msg("no table of %s", tables[i]);
  }

  /* The notebook: a code cell per plot whose saved output is the page's SVG
   * and whose code reads the CSV below RUN. */
  char *nb_path = path_in("vnb/vrun.ipynb"), *text = rg_read_file(nb_path, NULL);
  assert_non_null(text);
  cJSON *nb = cJSON_Parse(text);
  assert_non_null(nb);
  static const struct {
    const char *id, *csv;
  } cells[] = {{"plot-sensitivity", "RUN / \"geometry/sensitivity.csv\""},
               {"plot-sensitivity-layer", "RUN / \"geometry/sensitivity.csv\""},
               {"plot-pareto", "RUN / \"geometry/pareto.csv\""},
               {"plot-transfer-bypass", "RUN / \"geometry/transfer.csv\""},
               {"plot-transfer-induce", "RUN / \"geometry/transfer.csv\""},
               {"plot-probes", "RUN / \"geometry/probes.csv\""}};
  for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
    char *page_svg = svg_of(html, cells[i].id);
    bool found = false;
    const cJSON *cell;
    cJSON_ArrayForEach(cell, cJSON_GetObjectItem(nb, "cells")) {
      if (strcmp(cJSON_GetObjectItem(cell, "cell_type")->valuestring, "code") != 0) continue;
      const cJSON *out = cJSON_GetArrayItem(cJSON_GetObjectItem(cell, "outputs"), 0);
      const char *got = cJSON_GetObjectItem(cJSON_GetObjectItem(out, "data"), "image/svg+xml")->valuestring;
      if (strncmp(got, page_svg, strlen(page_svg)) != 0) continue;
      const char *source = cJSON_GetObjectItem(cell, "source")->valuestring;
      assert_non_null(strstr(source, "RUN = Path(\"../vrun\")"));
      if (!strstr(source, cells[i].csv)) fail_msg("%s: its cell does not read %s", cells[i].id, cells[i].csv);
      found = true;
    }
    if (!found) fail_msg("the notebook has no cell for %s", cells[i].id);
    free(page_svg);
  }
  assert_non_null(strstr(text, "drop_duplicates([\\\"step\\\", \\\"layer\\\"])")); /* the probes' best position */
  cJSON_Delete(nb);
  free(text);
  free(nb_path);
  free(html);
  free(path);
}

/* Each of these plots without data says why, inside it. */
static void test_report_verdict_empty_notes(void **state) {
  char args[1024], *err = NULL;
  snprintf(args, sizeof args, "%s/run --geometry %s/vnone --out %s/vnone.html", g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  char *path = path_in("vnone.html");
  char *html = rg_read_file(path, NULL);
  assert_non_null(html);
  /* zero counts are data: drawn */
  check_plot(html, &(plot_counts){"plot-sensitivity", 2, 1, 1, 0, 0});
  char *zeros = svg_of(html, "plot-sensitivity"); /* counts of 0 sit at the bottom of a 0..1 axis */
  assert_non_null(strstr(zeros, ">1</text>"));
  assert_null(strstr(zeros, ">-0.2</text>"));
  free(zeros);
  check_plot(html, &(plot_counts){"plot-sensitivity-layer", 0, 1, 0, 0, 0});
  expect_note(html, "plot-sensitivity-layer",
              "no admissible candidate at any step under any KL budget \u03c4 (sensitivity.csv)");
  check_plot(html, &(plot_counts){"plot-pareto", 0, 0, 0, 0, 0});
  char *frame = svg_of(html, "plot-pareto"); /* KL and bypass: an empty frame from 0, not centred on it */
  assert_null(strstr(frame, ">-0."));
  free(frame);
  expect_note(html, "plot-pareto", "no Pareto front: no step has a candidate with finite bypass and KL (pareto.csv)");
  static const char *const heat[] = {"plot-transfer-bypass", "plot-transfer-induce"};
  for (int i = 0; i < 2; i++) {
    char *svg = svg_of(html, heat[i]);
    assert_int_equal(count(svg, "class=\"cell\""), 0); /* a 1 x 1 matrix is no transfer */
    assert_null(strstr(svg, "class=\"colorbar\""));     /* nor a scale with nothing on it */
    free(svg);
    expect_note(html, heat[i], "no transfer: fewer than two scored steps in transfer.csv");
  }
  check_plot(html, &(plot_counts){"plot-probes", 0, 1, 0, 0, 1});
  expect_note(html, "plot-probes",
              "no probe AUROC: at every step the harmful val prompts were all refused or all complied with "
              "(probes.csv&#39;s n_refused, n_complied)");
  free(html);
  free(path);
  /* a probes.csv without rows: no step was scored */
  make_dir("vnorows");
  write_in("vnorows/migration.csv", V_NONE_MIGRATION);
  write_in("vnorows/probes.csv", "step,layer,pos,auroc,n_refused,n_complied\n");
  snprintf(args, sizeof args, "%s/run --geometry %s/vnorows --out %s/vnorows.html", g_root, g_root, g_root);
  run_report(args, 0, &err);
  free(err);
  path = path_in("vnorows.html");
  html = rg_read_file(path, NULL);
  assert_non_null(html);
  check_plot(html, &(plot_counts){"plot-probes", 0, 0, 0, 0, 1});
  expect_note(html, "plot-probes", "probes.csv has no rows: no step was scored (see migration.csv&#39;s status)");
  assert_null(strstr(html, "id=\"plot-transfer-bypass\"")); /* no transfer.csv: no plot */
  free(html);
  free(path);
}

/* A broken verdict CSV: one line naming the file, no report. */
static void test_report_verdict_bad_csv(void **state) {
  static const struct {
    const char *file, *text, *error;
  } bad[] = {
      {"transfer.csv", "from_step,to_step,bypass,induce\n0,\"1,2,3\n", "transfer.csv"},
      {"probes.csv", "step,layer,pos,auroc\n0,1,-1,high\n", "probes.csv: row 1, column auroc: 'high' is not a number"},
      {"pareto.csv", "step,pos,layer,bypass\n0,-1,3,-1\n", "pareto.csv: missing column kl"},
      {"sensitivity.csv", "step,kl_max,n_admissible\n0,0.1\n", "sensitivity.csv"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char dir[64], rel[128], args[1024], file[1024];
    snprintf(dir, sizeof dir, "vbad-%zu", i);
    make_dir(dir);
    snprintf(rel, sizeof rel, "%s/migration.csv", dir);
    write_in(rel, V_MIGRATION);
    snprintf(rel, sizeof rel, "%s/%s", dir, bad[i].file);
    write_in(rel, bad[i].text);
    snprintf(args, sizeof args, "%s/run --geometry %s/%s --out %s/%s.html", g_root, g_root, dir, g_root, dir);
    snprintf(file, sizeof file, "%s/%s/%s", g_root, dir, bad[i].error);
    expect_error(args, file);
    snprintf(rel, sizeof rel, "%s.html", dir);
    char *out = path_in(rel);
    assert_false(rg_path_exists(out));
    free(out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_report_plots),
      cmocka_unit_test(test_report_published_and_overrefusal),
      cmocka_unit_test(test_report_notebook),
      cmocka_unit_test(test_report_in_browser_and_jupyter),
      cmocka_unit_test(test_report_bad_inputs),
      cmocka_unit_test(test_report_verdict_measures),
      cmocka_unit_test(test_report_verdict_empty_notes),
      cmocka_unit_test(test_report_verdict_bad_csv),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
