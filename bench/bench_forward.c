/* bench_forward: prefill throughput of the forward pass.
 *
 *   bench_forward --model PATH --batch B --tokens T [--threads N] [--repeats R]
 *                 [--capture-resid-pre] [--f32 | --tiled] [--share]
 *   bench_forward --sgemm-peak [--threads N]
 *
 * Runs R prefills of B prompts of T random tokens (seeded, so every run sees
 * the same ids) and prints tokens/s and GFLOP/s per repeat and the median.
 * --capture-resid-pre keeps resid_pre of every layer at every position in
 * memory (n_layers * B * T * d_model floats), as activation capture does.
 * --f32 / --tiled force the CPU weight mode (default: f32 copy when it fits
 * in a quarter of RAM). --sgemm-peak times a 2048^3 OpenBLAS sgemm on the
 * same threads, the ceiling a prefill's GFLOP/s is compared with. --share
 * times that sgemm right before every prefill and prints each prefill's
 * GFLOP/s as a share of it, and the median share (bench/prefill.sh): on a
 * shared machine whose speed drifts, a peak taken seconds away from the
 * prefill is a different machine's.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cli.h"
#include "backend/cpu/blas_core.h"
#include "engine/forward.h"
#include "model/model.h"
#include "util/error.h"

/* Multiply-adds x 2 that one prefill does: every block's products and
 * attention (over positions 0..p for the token at p) for every token, but
 * the last block's only for each prompt's last token beyond its keys and
 * values (forward.c, last_block_on_rows), and the lm_head for that token. */
static double prefill_flops(const rg_config *c, int B, int T) {
  const double d = c->d_model, qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
  const double kv = 2 * 2 * d * kvd, rest = 2 * (d * qd + qd * d + 3 * d * c->d_ff); /* per token and block */
  const double attn = 2.0 * 2.0 * qd * ((double)T * (T + 1) / 2);                   /* QK^T and PV, per block */
  const double last_block = T * kv + rest + 2.0 * 2.0 * qd * T;
  return B * ((T * (kv + rest) + attn) * (c->n_layers - 1) + last_block + 2 * d * c->vocab_size);
}

/* The 2048^3 sgemm whose GFLOP/s a prefill is compared with: OpenBLAS's own
 * threads (threads of them), each operand filled once. */
typedef struct {
  int n, threads;
  float *a, *b, *c;
} sgemm_peak;

static int sgemm_peak_init(sgemm_peak *p, int threads) {
  p->n = 2048;
  p->threads = threads;
  const size_t nn = (size_t)p->n * p->n;
  p->a = malloc(nn * sizeof *p->a), p->b = malloc(nn * sizeof *p->b), p->c = malloc(nn * sizeof *p->c);
  if (!p->a || !p->b || !p->c) return rg_error_set("bench_forward: out of memory for the sgemm operands");
  for (size_t i = 0; i < nn; i++) {
    p->a[i] = (float)(i % 7) * 0.1f;
    p->b[i] = (float)(i % 5) * 0.1f;
  }
  return 0;
}

static void sgemm_peak_free(sgemm_peak *p) {
  free(p->a);
  free(p->b);
  free(p->c);
}

/* Best GFLOP/s of 3 timed sgemms after one that warms up the threads and
 * pages. OpenBLAS runs the sgemm on p->threads of its own threads and is set
 * back to 1 after: the CPU backend runs one single-threaded sgemm per OpenMP
 * thread (backend/cpu/cpu.c). OpenBLAS's idle threads spin a while before they
 * sleep, on the cores the next prefill wants, so it returns after a pause of
 * half a second (without it one first prefill read 61% of the peak and the
 * next ones 93-96%, though on a shared machine one run proves little). */
static double sgemm_peak_gflops(const sgemm_peak *p) {
  const int n = p->n;
  openblas_set_num_threads(p->threads);
  double best = 1e30;
  for (int r = 0; r < 4; r++) {
    double t0 = bench_now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, p->a, n, p->b, n, 0.0f, p->c, n);
    double t = bench_now_s() - t0;
    if (r > 0 && t < best) best = t;
  }
  openblas_set_num_threads(1);
  nanosleep(&(struct timespec){.tv_nsec = 500000000}, NULL);
  return 2.0 * n * n * n / best / 1e9;
}

typedef struct {
  float *rows; /* [n_layers, B*T, d] */
  int B, T;
} capture_all;

static void keep_resid(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d, const int *seq,
                       const int *pos) {
  capture_all *c = user;
  for (int i = 0; i < n_rows; i++)
    memcpy(c->rows + (((size_t)layer * c->B + seq[i]) * c->T + pos[i]) * d, rows + (size_t)i * d,
           (size_t)d * sizeof(float));
}

int main(int argc, char **argv) {
  cli_runtime_env(argv); /* as refgeo itself runs: the same libgomp spin and OpenBLAS kernels */
  const char *model = NULL;
  int B = 1, T = 128, threads = 0, repeats = 5;
  bool capture = false, f32 = false, tiled = false, peak = false, share = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory"},
      {"batch", CLI_INT, &B, "prompts per prefill (1)"},
      {"tokens", CLI_INT, &T, "tokens per prompt (128)"},
      {"threads", CLI_INT, &threads, "threads (all CPUs)"},
      {"repeats", CLI_INT, &repeats, "timed prefills (5)"},
      {"capture-resid-pre", CLI_BOOL, &capture, "capture resid_pre of every layer and position"},
      {"f32", CLI_BOOL, &f32, "force a one-time f32 copy of the weights"},
      {"tiled", CLI_BOOL, &tiled, "force on-the-fly dequantization of weight tiles"},
      {"sgemm-peak", CLI_BOOL, &peak, "time a 2048^3 sgemm instead"},
      {"share", CLI_BOOL, &share, "each prefill's GFLOP/s as a share of that sgemm, timed just before it"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "--model PATH [flags] | --sgemm-peak", pos,
                     0, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  sgemm_peak sp = {0};
  if ((peak || share) && sgemm_peak_init(&sp, threads > 0 ? threads : openblas_get_num_procs()) != 0) {
    sgemm_peak_free(&sp);
    return cli_fail();
  }
  if (peak) {
    /* the GFLOP/s stay the last field but one: scripts read them so */
    printf("sgemm %d^3 (OpenBLAS %s kernels): %.1f GFLOP/s\n", sp.n, rg_blas_core_name(), sgemm_peak_gflops(&sp));
    sgemm_peak_free(&sp);
    return 0;
  }
  if (!model || B < 1 || T < 1 || repeats < 1) {
    rg_error_set("bench_forward: need --model and positive --batch, --tokens, --repeats");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  rg_backend_opts bo = {.threads = threads};
  rg_session_opts so = {.max_batch_tokens = B * T};
  double t0 = bench_now_s();
  rg_weights *w = rg_weights_open(m, &bo, f32 ? RG_WEIGHTS_F32 : tiled ? RG_WEIGHTS_TILED : RG_WEIGHTS_AUTO);
  rg_session *s = w ? rg_session_new(w, B, T, &so) : NULL;
  if (!s) {
    rg_weights_free(w);
    rg_model_free(m);
    return cli_fail();
  }
  printf("model %s: %d layers, d %d; session ready in %.2f s (%.0f MiB of f32 weights)\n", m->id, m->cfg.n_layers,
         m->cfg.d_model, bench_now_s() - t0, (double)rg_weights_bytes(w) / (1 << 20));

  int32_t **prompts = malloc((size_t)B * sizeof *prompts);
  int *lens = malloc((size_t)B * sizeof *lens);
  float *logits = malloc((size_t)B * m->cfg.vocab_size * sizeof *logits);
  double *tps = malloc((size_t)repeats * sizeof *tps), *gfs = malloc((size_t)repeats * sizeof *gfs);
  double *shares = malloc((size_t)repeats * sizeof *shares);
  if (!prompts || !lens || !logits || !tps || !gfs || !shares) {
    fprintf(stderr, "bench_forward: out of memory\n");
    return 1;
  }
  uint64_t x = 12345;
  for (int b = 0; b < B; b++) {
    prompts[b] = malloc((size_t)T * sizeof(int32_t));
    lens[b] = T;
    for (int t = 0; t < T; t++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      prompts[b][t] = (int32_t)((x >> 33) % (uint64_t)m->cfg.vocab_size);
    }
  }
  capture_all cap = {NULL, B, T};
  uint32_t *sites = NULL;
  if (capture) {
    cap.rows = malloc((size_t)m->cfg.n_layers * B * T * m->cfg.d_model * sizeof(float));
    sites = malloc((size_t)m->cfg.n_layers * sizeof *sites);
    if (!cap.rows || !sites) {
      fprintf(stderr, "bench_forward: out of memory for the capture buffer\n");
      return 1;
    }
    for (int l = 0; l < m->cfg.n_layers; l++) sites[l] = RG_HOOK_BIT(RG_HOOK_RESID_PRE);
    rg_capture spec = {.fn = keep_resid, .user = &cap, .layer_sites = sites};
    rg_session_set_capture(s, &spec);
  }
  const double flops = prefill_flops(&m->cfg, B, T);
  int status = 0;
  for (int r = 0; r < repeats; r++) {
    const double peak_gf = share ? sgemm_peak_gflops(&sp) : 0.0;
    t0 = bench_now_s();
    if (rg_session_prefill(s, (const int32_t *const *)prompts, lens, B, logits) < 0) {
      status = cli_fail();
      break;
    }
    double dt = bench_now_s() - t0;
    tps[r] = B * T / dt;
    gfs[r] = flops / dt / 1e9;
    printf("repeat %d: %.1f tokens/s, %.1f GFLOP/s (%.3f s)", r + 1, tps[r], gfs[r], dt);
    if (share) {
      shares[r] = 100.0 * gfs[r] / peak_gf;
      printf(", %.0f%% of the sgemm's %.1f GFLOP/s just before", shares[r], peak_gf);
    }
    printf("\n");
  }
  if (status == 0) {
    /* bench/prefill.sh reads fields 2 and 4, and with --share field 6 */
    printf("median: %.1f tokens/s, %.1f GFLOP/s", bench_median(tps, repeats), bench_median(gfs, repeats));
    if (share) printf(", %.0f%% of the sgemm peak", bench_median(shares, repeats));
    printf("\n");
  }
  for (int b = 0; b < B; b++) free(prompts[b]);
  free(prompts);
  free(lens);
  free(logits);
  free(tps);
  free(gfs);
  free(shares);
  sgemm_peak_free(&sp);
  free(cap.rows);
  free(sites);
  rg_session_free(s);
  rg_weights_free(w);
  rg_model_free(m);
  return status;
}
