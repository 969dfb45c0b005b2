/* test_sp: sequence parallelism (forward.h, rg_session_opts.sp) gives the
 * single-process results. CTest runs it under `mpirun -np 2` and
 * `mpirun -np 4` (tests/CMakeLists.txt); alone it runs with one rank.
 *
 * Every rank also runs the whole batch in a plain training session, which
 * is the reference. The batch has three sequences of 20, 7 and 11 tokens
 * (38 tokens: not divisible by 4, and the ranks' parts end inside
 * sequences), or for the tiny models also one of 5 and one of 33 tokens
 * (all-gather attention then trades query halves between ranks), with masked targets (scale 0, as a chat example's prompt
 * tokens) on both sides of a part boundary; the loss is weighted by the
 * count of valid targets over the whole batch, and each rank's targets are
 * the next tokens of the whole batch (shifted, then sliced). Both attention
 * modes run (forward.h rg_sp_mode: Ulysses where the heads divide over the
 * ranks, all-gather KV always), plain and with both recompute policies
 * (rg_recompute). Checked within 1e-5 relative (max-norm of the
 * difference over that of the reference, per tensor):
 *  - attention forward: every block's attn_out (o_proj of the attention,
 *    hooked) on this rank's rows, against the same rows of the reference;
 *  - the loss (summed over ranks), every parameter gradient (summed over
 *    ranks, rg_grads_allreduce) and the input-embedding gradient of this
 *    rank's rows: these carry attention's backward (dq; dk and dv gathered
 *    back from the head shards, or summed over the ranks whose queries read
 *    them);
 *  - five AdamW steps: every step's loss, and the final parameters in the
 *    relative L2 norm. Not their max-norm (printed): AdamW divides each
 *    element's step by that element's own gradient scale, so an element
 *    whose gradient is at its tensor's rounding level moves by up to lr
 *    either way, and the max-norm then measures Adam, not SP (it reached
 *    1.3e-5 where the L2 norm was 7e-7).
 * The SP pass differs from the reference only in summation order (matmuls
 * of fewer rows, query blocks of fewer rows in the attention backward,
 * gradients summed over ranks), so the differences are float rounding,
 * about 1e-6 relative; a misplaced position, mask, head block or row gives
 * O(1) (an offset of the positions by one part gave 1.2).
 * Models: the tiny Llama 3 (4 heads, 2 KV heads: Ulysses on 2 ranks, not
 * 4), the same with 8 / 4 heads (Ulysses on 4 ranks) and the tiny Mistral
 * (sliding window 16: the first sequence's last queries do not see its
 * first keys, which another rank computed), and SmolLM2 (9 / 3 heads:
 * all-gather) when REFGEO_MODEL is set and the build is not sanitized (a
 * 135M model 4 times over on 2 cores).
 *
 * Every rank reaches the same verdict: errors are reduced over the ranks
 * before any assertion, so a failing rank never leaves the others waiting
 * in a collective.
 */
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "adv_ft/optimizer.h"
#include "engine/backward.h"
#include "dist/comm.h"
#include "engine/forward.h"
#include "engine/weights.h"
#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/rng.h"

enum { NSEQ = 3, TOTAL = 38, MAX_CTX = 40, STEPS = 5 };
/* Two layouts of the batch's 38 tokens (0-terminated sequence lengths):
 * three sequences, and a short and a long one, the long one cut across the
 * ranks, on which all-gather attention trades query halves between ranks
 * (sp_attention.c trade_pays: on 2 ranks the busiest rank's keys fall from
 * 456 to 291, its block's work by 3.5%; the three sequences do not trade:
 * on 4 ranks 145 keys to 100, for SmolLM2 0.2% of the work). */
static const int LAYOUT_THREE[] = {20, 7, 11, 0}, LAYOUT_LONG[] = {5, 33, 0};
static const int *seq_len = LAYOUT_THREE;
static const double TOL = 1e-5;
/* The gradients of one pass against the unsplit pass: splitting a batch over
 * ranks changes the row count M of every product, and OpenBLAS picks its
 * blocking (so the order of float32 sums) by M on some CPUs (the AVX2
 * kernels of an AMD EPYC; not the AVX-512 ones). The reassociation error of
 * the backward grows with the blocks it runs through: TOL per two blocks.
 * Measured: 2-block tiny models 7e-7 to 1.1e-6; SmolLM2's 30 blocks 2.2e-5
 * on the AVX2 EPYC. A lost rank's rows, a shifted position or a missing
 * all-reduce err by O(1). */
static double grad_tol(int n_layers) { return TOL * (n_layers > 2 ? n_layers / 2.0 : 1.0); }

static rg_comm *world;

/* The whole batch: ids, sequence ids, next-token targets and loss weights
 * (row t predicts token t+1 of its sequence; the last token of each
 * sequence has none: weight 0). */
typedef struct {
  int32_t ids[TOTAL], targets[TOTAL];
  int seq[TOTAL];
  float scale[TOTAL];
} batch;

static void make_batch(batch *b, int vocab) {
  uint64_t r = 1234;
  int t = 0, valid = 0;
  for (int q = 0; seq_len[q]; q++)
    for (int p = 0; p < seq_len[q]; p++, t++) {
      b->ids[t] = (int32_t)(rg_splitmix64(&r) % (uint64_t)vocab);
      b->seq[t] = q;
    }
  for (t = 0; t < TOTAL; t++) {
    const bool last = t + 1 == TOTAL || b->seq[t + 1] != b->seq[t];
    /* masked: the first 5 targets and tokens 17..20 (the part boundary
     * at 19 of 2 and 4 ranks falls inside) */
    const bool masked = (t < 5) || (t >= 17 && t <= 20);
    b->targets[t] = last ? 0 : b->ids[t + 1];
    b->scale[t] = last || masked ? 0.0f : 1.0f;
    valid += b->scale[t] != 0;
  }
  for (t = 0; t < TOTAL; t++) b->scale[t] /= (float)valid;
}

/* This rank's part: tokens [*first, *first + *n). */
static void my_part(const rg_comm *c, int *first, int *n) {
  const int P = rg_comm_size(c), r = rg_comm_rank(c);
  *first = TOTAL * r / P;
  *n = TOTAL * (r + 1) / P - *first;
}

/* max |a - b| over max |b|, folded into *worst. */
static void rel_err(const float *a, const float *b, size_t n, double *worst) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    ref = fmax(ref, fabs((double)b[i]));
  }
  const double e = ref > 0 ? diff / ref : diff;
  if (!(e <= *worst)) *worst = e; /* NaN sticks */
}

/* attn_out rows of every block (hooks), for the rows this pass computes. */
typedef struct {
  float *rows; /* [n_layers, TOTAL, d] */
  int d;
} attn_capture;

static void on_hook(void *user, rg_hook_site site, int layer, const float *x, int n, int d, const int *seq,
                    const int *pos) {
  attn_capture *ac = user;
  memcpy(ac->rows + (size_t)layer * TOTAL * d, x, (size_t)n * d * sizeof *x);
}

/* One training pass: the eval of tokens [first, first + n) of B, the CE
 * loss of its rows (summed over ranks into *loss), backward into G (summed
 * over ranks), attn_out rows into AC and the input gradient into
 * d_embed[n, d]. Every collective runs on every rank whatever fails. */
static int pass(rg_session *s, rg_grads *g, const batch *b, int first, int n, rg_comm *c, attn_capture *ac,
                float *d_embed, double *loss) {
  int rows[TOTAL];
  float losses[TOTAL];
  for (int i = 0; i < n; i++) rows[i] = i;
  rg_session_reset(s);
  rg_grads_zero(g);
  const int nl = rg_session_model(s)->cfg.n_layers;
  uint32_t sites[64] = {0};
  for (int l = 0; l < nl && l < 64; l++) sites[l] = RG_HOOK_BIT(RG_HOOK_ATTN_OUT);
  const rg_capture cap = {.fn = on_hook, .user = ac, .layer_sites = sites};
  rg_session_set_capture(s, ac ? &cap : NULL);
  int rc = rg_session_eval(s, b->ids + first, b->seq + first, n, rows, n, NULL);
  if (rc == 0) rc = rg_session_loss_ce(s, b->targets + first, b->scale + first, losses);
  if (rc == 0) rc = rg_session_backward(s, g, d_embed);
  double sum = 0;
  for (int i = 0; rc == 0 && i < n; i++) sum += (double)b->scale[first + i] * losses[i];
  if (rc == 0) rc = rg_comm_allreduce_sum_f64(c, &sum, 1);
  if (rc == 0) rc = rg_grads_allreduce(g, c);
  *loss = sum;
  return rc;
}

typedef struct {
  rg_session *s;
  rg_grads *g;
} trainer;

static trainer open_trainer(rg_weights *w, rg_comm *sp, rg_sp_mode mode, int max_tokens, rg_recompute recompute) {
  const rg_session_opts so = {.max_batch_tokens = max_tokens, .max_logit_rows = max_tokens, .train = true,
                              .recompute = recompute, .sp = sp, .sp_mode = mode};
  trainer t = {.s = rg_session_new(w, NSEQ, MAX_CTX, &so)};
  if (!t.s) fail_msg("%s", rg_error_get());
  if (!(t.g = rg_grads_new(t.s))) fail_msg("%s", rg_error_get());
  return t;
}

static void close_trainer(trainer *t) {
  rg_grads_free(t->g);
  rg_session_free(t->s);
}

/* Folds this rank's worst error into every rank's: the verdict is shared. */
static double agreed(double worst) {
  double all[1] = {worst};
  /* a NaN must fail everywhere: count it as a huge error */
  if (!(all[0] <= 1e30)) all[0] = 1e30;
  double *per = calloc((size_t)rg_comm_size(world), sizeof *per);
  per[rg_comm_rank(world)] = all[0];
  if (rg_comm_allreduce_sum_f64(world, per, rg_comm_size(world)) != 0) fail_msg("%s", rg_error_get());
  double m = 0;
  for (int r = 0; r < rg_comm_size(world); r++) m = fmax(m, per[r]);
  free(per);
  return m;
}

static const char *const RECOMPUTE_NAME[] = {"", ", recompute full", ", recompute all but attention"};

static const char *mode_name(rg_sp_mode mode) { return mode == RG_SP_ULYSSES ? "Ulysses" : "all-gather KV"; }

/* One pass, SP against the whole batch alone, on fresh sessions. */
static void check_pass(rg_weights *w, const char *what, rg_sp_mode mode, rg_recompute recompute) {
  const rg_model *m = rg_weights_model(w);
  const int d = m->cfg.d_model, L = m->cfg.n_layers;
  batch b;
  make_batch(&b, m->cfg.vocab_size);
  int first, n;
  my_part(world, &first, &n);
  /* the reference: the whole batch in one process (the self communicator) */
  trainer ref = open_trainer(w, NULL, RG_SP_AUTO, TOTAL, RG_RECOMPUTE_NONE);
  attn_capture ac_ref = {.rows = calloc((size_t)L * TOTAL * d, sizeof(float)), .d = d};
  float *de_ref = malloc((size_t)TOTAL * d * sizeof *de_ref);
  double loss_ref;
  if (pass(ref.s, ref.g, &b, 0, TOTAL, rg_comm_self(), &ac_ref, de_ref, &loss_ref) != 0) fail_msg("%s", rg_error_get());
  /* the same batch split over the ranks */
  trainer sp = open_trainer(w, world, mode, (TOTAL + rg_comm_size(world) - 1) / rg_comm_size(world), recompute);
  attn_capture ac = {.rows = calloc((size_t)L * TOTAL * d, sizeof(float)), .d = d};
  float *de = malloc((size_t)n * d * sizeof *de);
  double loss;
  if (pass(sp.s, sp.g, &b, first, n, world, &ac, de, &loss) != 0) fail_msg("%s", rg_error_get());
  double e_loss = fabs(loss - loss_ref) / fabs(loss_ref), e_attn = 0, e_grad = 0, e_embed = 0;
  for (int l = 0; l < L; l++)
    rel_err(ac.rows + (size_t)l * TOTAL * d, ac_ref.rows + ((size_t)l * TOTAL + first) * d, (size_t)n * d, &e_attn);
  rel_err(de, de_ref + (size_t)first * d, (size_t)n * d, &e_embed);
  for (int i = 0; i < rg_grads_count(ref.g); i++) {
    const size_t k = (size_t)rg_tensor_nelems(rg_grads_tensor(ref.g, i));
    float *x = malloc(k * sizeof *x), *y = malloc(k * sizeof *y);
    if (rg_grads_download(sp.g, i, x) != 0 || rg_grads_download(ref.g, i, y) != 0) fail_msg("%s", rg_error_get());
    rel_err(x, y, k, &e_grad);
    free(x), free(y);
  }
  e_loss = agreed(e_loss), e_attn = agreed(e_attn), e_grad = agreed(e_grad), e_embed = agreed(e_embed);
  if (rg_comm_rank(world) == 0)
    print_message("%s, %d ranks, %s%s: loss %.9g, relative errors: loss %.2e, attn_out %.2e, gradients %.2e (%d "
                  "tensors), input gradient %.2e\n",
                  what, rg_comm_size(world), mode_name(mode), RECOMPUTE_NAME[recompute], loss_ref, e_loss, e_attn, e_grad,
                  rg_grads_count(ref.g), e_embed);
  assert_true(e_loss <= TOL);
  assert_true(e_attn <= TOL);
  assert_true(e_grad <= grad_tol(L));
  assert_true(e_embed <= TOL);
  free(ac.rows), free(ac_ref.rows), free(de), free(de_ref);
  close_trainer(&sp);
  close_trainer(&ref);
}

/* Every parameter of W, in order, into *params (allocated). */
static void all_params(rg_weights *w, float **params, size_t *n_params) {
  size_t total = 0;
  for (int i = 0; i < rg_weights_count(w); i++) total += (size_t)rg_tensor_nelems(rg_weights_tensor(w, i));
  *params = malloc(total * sizeof **params);
  *n_params = total;
  for (int i = 0, at = 0; i < rg_weights_count(w); i++) {
    if (rg_weights_download(w, i, *params + at) != 0) fail_msg("%s", rg_error_get());
    at += rg_tensor_nelems(rg_weights_tensor(w, i));
  }
}

/* STEPS AdamW steps from the same weights: on W with the batch split over
 * COMM's ranks (self: the whole batch); the losses into losses[STEPS] and
 * the final parameters into *params (allocated, every parameter in order). */
static void train_steps(rg_weights *w, rg_comm *comm, rg_sp_mode mode, double *losses, float **params,
                        size_t *n_params) {
  batch b;
  make_batch(&b, rg_weights_model(w)->cfg.vocab_size);
  int first = 0, n = TOTAL;
  if (comm != rg_comm_self()) my_part(comm, &first, &n);
  trainer t = open_trainer(w, comm == rg_comm_self() ? NULL : comm, mode, n + 1, RG_RECOMPUTE_NONE);
  rg_adamw_hparams h = rg_adamw_defaults();
  rg_optimizer *o = rg_optimizer_new(w, t.g, &h);
  if (!o) fail_msg("%s", rg_error_get());
  for (int k = 0; k < STEPS; k++)
    if (pass(t.s, t.g, &b, first, n, comm, NULL, NULL, &losses[k]) != 0 || rg_optimizer_step(o, 1e-3, 1.0, NULL) != 0)
      fail_msg("%s", rg_error_get());
  all_params(w, params, n_params);
  rg_optimizer_free(o);
  close_trainer(&t);
}

static rg_weights *trainable(rg_model *m) {
  rg_weights *w = rg_weights_open(m, &(rg_backend_opts){.threads = 1}, RG_WEIGHTS_AUTO);
  if (!w || rg_weights_make_trainable(w) != 0) fail_msg("%s", rg_error_get());
  return w;
}

/* Both attention modes (Ulysses where the heads divide over the ranks),
 * plain and recomputed, and with STEPS, the training steps. */
static void check_model(rg_model *m, const char *what, bool steps) {
  const int P = rg_comm_size(world);
  const bool ulysses = m->cfg.n_heads % P == 0 && m->cfg.n_kv_heads % P == 0;
  for (int k = 0; k < 2; k++) {
    const rg_sp_mode mode = k == 0 ? RG_SP_ALLGATHER : RG_SP_ULYSSES;
    if (mode == RG_SP_ULYSSES && !ulysses) {
      if (rg_comm_rank(world) == 0)
        print_message("%s, %d ranks: %d / %d heads do not divide: no Ulysses\n", what, P, m->cfg.n_heads,
                      m->cfg.n_kv_heads);
      continue;
    }
    rg_weights *w = trainable(m);
    for (int r = RG_RECOMPUTE_NONE; r <= RG_RECOMPUTE_MATMULS; r++) check_pass(w, what, mode, (rg_recompute)r);
    rg_weights_free(w);
    if (!steps) continue;
    double l_ref[STEPS], l_sp[STEPS];
    float *p_ref, *p_sp;
    size_t np;
    w = trainable(m);
    train_steps(w, rg_comm_self(), mode, l_ref, &p_ref, &np);
    rg_weights_free(w);
    w = trainable(m);
    train_steps(w, world, mode, l_sp, &p_sp, &np);
    rg_weights_free(w);
    double e_loss = 0, e_param = 0, e_max = 0, d2 = 0, p2 = 0, u2 = 0;
    for (int i = 0; i < STEPS; i++) e_loss = fmax(e_loss, fabs(l_sp[i] - l_ref[i]) / fabs(l_ref[i]));
    rel_err(p_sp, p_ref, np, &e_max);
    float *p0;
    size_t n0;
    w = trainable(m); /* the starting parameters */
    all_params(w, &p0, &n0);
    rg_weights_free(w);
    for (size_t i = 0; i < np; i++) {
      d2 += ((double)p_sp[i] - p_ref[i]) * ((double)p_sp[i] - p_ref[i]);
      p2 += (double)p_ref[i] * p_ref[i];
      u2 += ((double)p_ref[i] - p0[i]) * ((double)p_ref[i] - p0[i]);
    }
    e_param = sqrt(d2 / p2);
    e_loss = agreed(e_loss), e_param = agreed(e_param), e_max = agreed(e_max);
    const double e_update = agreed(sqrt(d2 / u2));
    if (rg_comm_rank(world) == 0)
      print_message("%s, %d ranks, %s: %d AdamW steps, losses %.6f -> %.6f, relative errors: losses %.2e, "
                    "parameters %.2e (L2; max-norm %.2e; of the update %.2e)\n",
                    what, P, mode_name(mode), STEPS, l_ref[0], l_ref[STEPS - 1], e_loss, e_param, e_max, e_update);
    assert_true(l_ref[STEPS - 1] < l_ref[0]); /* the steps train */
    assert_true(e_loss <= TOL);
    assert_true(e_param <= TOL);
    free(p_ref), free(p_sp), free(p0);
  }
}

static char *tiny_llama, *tiny_mistral, *tiny_heads8;

/* The tiny Llama 3 with 8 query heads of 8 dims and 4 KV heads, so that
 * Ulysses runs on 4 ranks too (made by `refgeo synth-model`, tokenizer
 * copied from the fixture). */
static char *make_heads8(void) {
  char *fixture = t_fixture_path("hf_tiny/llama3_bf16"), *cfg = rg_path_join(fixture, "config.json");
  char *text = rg_read_file(cfg, NULL);
  cJSON *j = cJSON_Parse(text);
  if (!j) fail_msg("%s: not JSON", cfg);
  cJSON_ReplaceItemInObject(j, "num_attention_heads", cJSON_CreateNumber(8));
  cJSON_ReplaceItemInObject(j, "num_key_value_heads", cJSON_CreateNumber(4));
  cJSON_ReplaceItemInObject(j, "head_dim", cJSON_CreateNumber(8));
  char *json = cJSON_Print(j), rel[64];
  snprintf(rel, sizeof rel, "sp-heads8-%ld.json", (long)getpid());
  char *cfg8 = t_write_tmp(rel, json, strlen(json));
  snprintf(rel, sizeof rel, "sp-heads8-%ld", (long)getpid());
  char *dir = t_tmp_path(rel), args[1024], *err = NULL;
  snprintf(args, sizeof args, "synth-model --config '%s' --out '%s' --seed 7 --dtype f32 --std 0.08 --norm-std 0.1",
           cfg8, dir);
  if (t_run_cli(args, NULL, &err) != 0) fail_msg("refgeo %s: %s", args, err);
  free(err);
  static const char *TOK[] = {"tokenizer.json", "tokenizer_config.json"};
  for (int k = 0; k < 2; k++) {
    char *from = rg_path_join(fixture, TOK[k]), *to = rg_path_join(dir, TOK[k]);
    if (rg_copy_file(from, to) != 0) fail_msg("%s", rg_error_get());
    free(from), free(to);
  }
  cJSON_Delete(j);
  free(json), free(text), free(cfg), free(cfg8), free(fixture);
  return dir;
}

static void test_tiny_llama(void **state) {
  rg_model *m = rg_model_load(tiny_llama);
  if (!m) fail_msg("%s", rg_error_get());
  check_model(m, "tiny llama3", true);
  seq_len = LAYOUT_LONG;
  check_model(m, "tiny llama3, sequences of 5 and 33", true);
  seq_len = LAYOUT_THREE;
  rg_model_free(m);
}

static void test_tiny_heads8(void **state) {
  rg_model *m = rg_model_load(tiny_heads8);
  if (!m) fail_msg("%s", rg_error_get());
  check_model(m, "tiny llama3, 8 / 4 heads", true);
  rg_model_free(m);
}

static void test_tiny_mistral_window(void **state) {
  rg_model *m = rg_model_load(tiny_mistral);
  if (!m) fail_msg("%s", rg_error_get());
  check_model(m, "tiny mistral (window 16)", false);
  seq_len = LAYOUT_LONG;
  check_model(m, "tiny mistral (window 16), sequences of 5 and 33", false);
  seq_len = LAYOUT_THREE;
  rg_model_free(m);
}

static void test_smollm2(void **state) {
  const char *path = getenv("REFGEO_MODEL");
  if (!path || !*path || getenv("REFGEO_SANITIZED")) {
    print_message("SmolLM2 skipped (%s)\n", path && *path ? "sanitized build" : "REFGEO_MODEL unset");
    return;
  }
  rg_model *m = rg_model_load(path);
  if (!m) fail_msg("%s", rg_error_get());
  rg_weights *w = trainable(m);
  check_pass(w, "SmolLM2-135M", RG_SP_AUTO, RG_RECOMPUTE_NONE); /* 9 / 3 heads: all-gather KV on 2 and 4 ranks */
  rg_weights_free(w);
  rg_model_free(m);
}

/* A sequence-parallel degree that does not divide the world is refused on
 * every rank, and a session refuses a batch that one rank refused. */
static void test_refusals(void **state) {
  const int P = rg_comm_size(world);
  if (P > 1) {
    rg_comm *across = NULL;
    assert_null(rg_comm_split(world, P + 1, &across));
    assert_non_null(strstr(rg_error_get(), "does not divide"));
  }
  rg_model *m = rg_model_load(tiny_llama);
  rg_weights *w = trainable(m);
  if (P > 1) { /* 4 / 2 heads: not on 4 ranks; 3 ranks divide neither */
    const rg_session_opts so = {.max_batch_tokens = 8, .train = true, .sp = world, .sp_mode = RG_SP_ULYSSES};
    const bool fits = m->cfg.n_heads % P == 0 && m->cfg.n_kv_heads % P == 0;
    rg_session *s = rg_session_new(w, NSEQ, MAX_CTX, &so);
    if (rg_comm_rank(world) == 0 && !s) print_message("Ulysses on %d ranks: \"%s\"\n", P, rg_error_get());
    assert_true(fits ? s != NULL : s == NULL);
    if (!fits) assert_non_null(strstr(rg_error_get(), "not multiples of"));
    rg_session_free(s);
  }
  trainer t = open_trainer(w, world, RG_SP_AUTO, TOTAL, RG_RECOMPUTE_NONE);
  int32_t ids[2] = {1, rg_comm_rank(world) == P - 1 ? 100000 : 2};
  int seq[2] = {0, 0}, rows[2] = {0, 1};
  const int rc = rg_session_eval(t.s, ids, seq, 2, rows, 2, NULL);
  if (rg_comm_rank(world) == 0) print_message("a bad token on rank %d: \"%s\"\n", P - 1, rg_error_get());
  assert_int_equal(rc, -1);
  assert_non_null(strstr(rg_error_get(), rg_comm_rank(world) == P - 1 ? "token id" : "refused"));
  assert_int_equal(rg_session_seq_len(t.s, 0), 0); /* nothing appended */
  close_trainer(&t);
  rg_weights_free(w);
  rg_model_free(m);
}

/* test_sp_rank_lost.sh: rank LOST dies (SIGKILL), or stalls (STALL: it
 * sleeps for ever), between its forward pass and its backward of a
 * training step; the others are then in that step's collectives. Returns 1
 * with the error printed if this rank finishes the step at all. */
static int lose_rank(int lost, bool stall) {
  rg_model *m = rg_model_load(tiny_llama);
  rg_weights *w = trainable(m);
  trainer t = open_trainer(w, world, RG_SP_AUTO, TOTAL, RG_RECOMPUTE_NONE);
  batch b;
  make_batch(&b, m->cfg.vocab_size);
  int first, n, rows[TOTAL];
  float losses[TOTAL];
  my_part(world, &first, &n);
  for (int i = 0; i < n; i++) rows[i] = i;
  int rc = rg_session_eval(t.s, b.ids + first, b.seq + first, n, rows, n, NULL);
  if (rc == 0) rc = rg_session_loss_ce(t.s, b.targets + first, b.scale + first, losses);
  while (rg_comm_rank(world) == lost) {
    if (!stall) raise(SIGKILL);
    pause();
  }
  if (rc == 0) rc = rg_session_backward(t.s, t.g, NULL);
  if (rc == 0) rc = rg_grads_allreduce(t.g, world);
  fprintf(stderr, "rank %d: %s\n", rg_comm_rank(world), rc == 0 ? "finished a step without its peer" : rg_error_get());
  return 1;
}

int main(void) {
  /* the fixtures are written (by the refgeo CLI) before MPI starts */
  tiny_llama = t_hf_tiny("llama3_bf16");
  tiny_mistral = t_hf_tiny("mistral_f16");
  tiny_heads8 = make_heads8();
  const char *lost = getenv("REFGEO_SP_LOSE_RANK"), *stall = getenv("REFGEO_SP_STALL_RANK");
  if (!(world = rg_comm_mpi_world(lost || stall ? 20 : 120))) {
    fprintf(stderr, "%s\n", rg_error_get());
    return 1;
  }
  if (lost || stall) {
    const int rc = lose_rank(atoi(lost ? lost : stall), stall != NULL);
    rg_comm_free(world); /* broken: ends the job */
    return rc;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiny_llama),
      cmocka_unit_test(test_tiny_heads8),
      cmocka_unit_test(test_tiny_mistral_window),
      cmocka_unit_test(test_smollm2),
      cmocka_unit_test(test_refusals),
  };
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rg_comm_free(world);
  free(tiny_llama), free(tiny_mistral), free(tiny_heads8);
  return rc;
}
