/* test_attention_memory: the attention's own memory, forward and backward,
 * does not grow with the sequence (issue 14: "its memory is independent of
 * S^2").
 *
 * For S = 1024, 2048 and 4096 tokens of one sequence, a child process (this
 * program, re-run with S as its argument, so that each S starts from a
 * fresh heap) allocates and fills every input and output of the two
 * operations, notes its resident set, runs attention forward (with the
 * log-sum-exp) and backward, and prints how far its peak resident set rose
 * above that: the operations' own allocations (their per-thread tiles, the
 * query-block index, OpenBLAS's buffers). The parent checks that this rise
 * stays under a bound independent of S, and that it grows by less than
 * 2 MiB from S = 1024 to 4096, while the inputs grow fourfold. A matrix of
 * S x S floats, which a non-tiled attention would hold per head at least
 * once, is 64 MiB at S = 4096, so either check would fail on it; so would
 * a backward that kept a [query block, S] matrix per thread (4 MiB each at
 * S = 4096 with 128 queries).
 *
 * Shapes: SmolLM2's head_dim (64) and group of 3 query heads per KV head,
 * one KV head to keep the run short (about a second). Skipped under the
 * sanitizers, whose shadow memory and quarantine change resident sets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend/backend.h"
#include "testlib.h"

enum { NH = 3, NKV = 1, HD = 64 };
static const int LENGTHS[] = {1024, 2048, 4096};
enum { N_LENGTHS = sizeof LENGTHS / sizeof LENGTHS[0] };
/* OpenBLAS's per-thread buffers and the tiles, whatever S; measured at
 * about 2-5 MiB with 2 threads */
static const double OWN_MIB_MAX = 32.0;
static const double GROWTH_MIB_MAX = 2.0;

static double resident_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  if (f) fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
}

static rg_buf *filled(rg_backend *be, size_t n, unsigned seed) {
  rg_buf *b = rg_buf_new(be, n);
  float *h = malloc(n * sizeof *h);
  if (!b || !h) abort();
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    h[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  rg_buf_upload(be, b, 0, h, n);
  free(h);
  return b;
}

/* Child: prints "inputs_mib own_mib" for S tokens. */
static int child(int S) {
  rg_backend *be = rg_backend_new(&(rg_backend_opts){.threads = 2});
  const size_t qn = (size_t)S * NH * HD, kn = (size_t)S * NKV * HD;
  int *seq = calloc((size_t)S, sizeof *seq), *pos = malloc((size_t)S * sizeof *pos);
  for (int t = 0; t < S; t++) pos[t] = t;
  rg_batch *b = rg_batch_new(be, S);
  rg_batch_set(be, b, NULL, seq, pos, S);
  const rg_attn_desc a = {.batch = b, .n_heads = NH, .n_kv_heads = NKV, .head_dim = HD, .max_ctx = S};
  rg_buf *q = filled(be, qn, 1), *k = filled(be, kn, 2), *v = filled(be, kn, 3), *dy = filled(be, qn, 4);
  rg_buf *kc = filled(be, kn, 0), *vc = filled(be, kn, 0), *out = filled(be, qn, 0), *lse = filled(be, (size_t)S * NH, 0);
  rg_buf *dq = filled(be, qn, 0), *dkc = filled(be, kn, 0), *dvc = filled(be, kn, 0);
  rg_buf_zero(be, dq, 0, qn);
  rg_buf_zero(be, dkc, 0, kn);
  rg_buf_zero(be, dvc, 0, kn);
  rg_op_kv_store(be, kc, vc, k, v, &a);
  const double before = resident_mib();
  rg_op_attention(be, out, lse, q, kc, vc, &a);
  rg_op_attention_backward(be, dq, dkc, dvc, dy, q, out, lse, kc, vc, &a);
  if (rg_backend_status(be) < 0) return 1;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double peak = (double)ru.ru_maxrss / 1024.0;
  printf("%.3f %.3f\n", (double)((5 * qn + 6 * kn + (size_t)S * NH) * sizeof(float)) / (1 << 20), peak - before);
  return 0;
}

static void test_memory_flat_in_length(void **state) {
  (void)state;
  if (getenv("REFGEO_SANITIZED")) skip(); /* resident sets mean little under ASan */
  double own[N_LENGTHS];
  for (int i = 0; i < N_LENGTHS; i++) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe %d", (int)getpid(), LENGTHS[i]);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    double inputs = 0;
    const int got = fscanf(p, "%lf %lf", &inputs, &own[i]);
    const int rc = pclose(p);
    if (got != 2 || rc != 0) fail_msg("S = %d: the child failed (exit %d)", LENGTHS[i], rc);
    const double s2 = (double)LENGTHS[i] * LENGTHS[i] * sizeof(float) / (1 << 20);
    print_message("S = %4d: inputs and outputs %6.1f MiB, attention's own peak %5.2f MiB (one S x S matrix: %5.1f MiB)\n",
                  LENGTHS[i], inputs, own[i], s2);
    if (own[i] > OWN_MIB_MAX) fail_msg("S = %d: attention took %.1f MiB of its own", LENGTHS[i], own[i]);
  }
  const double growth = own[N_LENGTHS - 1] - own[0];
  print_message("growth from S = %d to %d: %.2f MiB\n", LENGTHS[0], LENGTHS[N_LENGTHS - 1], growth);
  if (growth > GROWTH_MIB_MAX) fail_msg("attention's own memory grew %.2f MiB with the sequence", growth);
}

int main(int argc, char **argv) {
  if (argc == 2) return child(atoi(argv[1]));
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_memory_flat_in_length)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
