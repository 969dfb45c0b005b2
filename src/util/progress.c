/* progress.c: a progress bar with rate and time left (progress.h). */
#include "util/progress.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

void rg_progress_start(rg_progress *p, FILE *out, const char *label, int total) {
  const char *v = getenv("REFGEO_VERBOSITY");
  *p = (rg_progress){.out = v && strcmp(v, "quiet") == 0 ? NULL : out, .label = label, .total = total > 0 ? total : 1,
                     .t0 = rg_now_seconds(), .verbose = v && strcmp(v, "verbose") == 0};
  p->tty = p->out && isatty(fileno(p->out));
}

/* "1h02m", "4m05s" or "12s". */
static void format_duration(double s, char *buf, size_t n) {
  const long t = s > 0 ? (long)(s + 0.5) : 0;
  if (t >= 3600)
    snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(buf, n, "%lds", t);
}

/* "2.3/s" or, for slow items, "4.1s each". */
static void format_rate(double per_s, char *buf, size_t n) {
  if (per_s >= 1 || per_s <= 0) snprintf(buf, n, "%.1f/s", per_s);
  else snprintf(buf, n, "%.1fs each", 1 / per_s);
}

enum { BAR_WIDTH = 24 };

void rg_progress_tick(rg_progress *p, int done) {
  if (done > 0) p->done = done;
  if (!p->out || done <= 0) return;
  if (!p->tty) { /* a log gets the end line only; --verbose adds a line per tenth */
    const int tenth = (int)(10LL * done / p->total);
    if (p->verbose && tenth > p->last_tenth) {
      p->last_tenth = tenth;
      fprintf(p->out, "%s: %d/%d (%d%%)\n", p->label, done, p->total, (int)(100LL * done / p->total));
      fflush(p->out);
    }
    return;
  }
  const double spent = rg_now_seconds() - p->t0;
  char bar[BAR_WIDTH + 1], left[32], rate[32];
  const int filled = (int)((long long)BAR_WIDTH * (done < p->total ? done : p->total) / p->total);
  for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  format_duration(spent / done * (p->total - done), left, sizeof left);
  format_rate(spent > 0 ? done / spent : 0, rate, sizeof rate);
  /* trailing blanks wipe what a longer line before left behind */
  fprintf(p->out, "\r%s [%s] %d/%d %3d%%  %s  ETA %s    ", p->label, bar, done, p->total,
          (int)(100LL * done / p->total), rate, left);
  fflush(p->out);
}

void rg_progress_note(rg_progress *p, const char *fmt, ...) {
  if (!p->out) return;
  if (p->tty) fputs("\r", p->out);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->out, fmt, ap);
  va_end(ap);
  /* on a terminal: blanks over the rest of the bar, then the bar again */
  fputs(p->tty ? "                                        \n" : "\n", p->out);
  fflush(p->out);
  if (p->tty && p->done > 0) rg_progress_tick(p, p->done);
}

void rg_progress_end(rg_progress *p) {
  if (!p->out) return;
  const double spent = rg_now_seconds() - p->t0;
  char used[32], rate[32];
  format_duration(spent, used, sizeof used);
  format_rate(spent > 0 ? p->done / spent : 0, rate, sizeof rate);
  fprintf(p->out, "%s%s: %d done in %s (%s)%s\n", p->tty ? "\r" : "", p->label, p->done, used, rate,
          p->tty ? "                                        " : "");
  fflush(p->out);
}
