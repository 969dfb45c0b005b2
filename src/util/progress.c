#include "util/progress.h"

#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rg_progress_start(rg_progress *p, FILE *out, const char *label, int total) {
  *p = (rg_progress){.out = out, .label = label, .total = total > 0 ? total : 1, .t0 = now_s()};
  p->tty = out && isatty(fileno(out));
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

void rg_progress_tick(rg_progress *p, int done) {
  if (!p->out || done <= 0) return;
  const int tenth = (int)(10LL * done / p->total);
  if (!p->tty && tenth == p->last_tenth) return;
  p->last_tenth = tenth;
  const double spent = now_s() - p->t0;
  char left[32], used[32];
  format_duration(spent / done * (p->total - done), left, sizeof left);
  format_duration(spent, used, sizeof used);
  fprintf(p->out, "%s%s: %d/%d (%d%%), %s so far, about %s left%s", p->tty ? "\r" : "", p->label, done, p->total,
          (int)(100LL * done / p->total), used, left, p->tty ? "   " : "\n");
  fflush(p->out);
}

void rg_progress_end(rg_progress *p) {
  if (!p->out) return;
  char used[32];
  format_duration(now_s() - p->t0, used, sizeof used);
  fprintf(p->out, "%s%s: done in %s\n", p->tty ? "\r" : "", p->label, used);
  fflush(p->out);
}
