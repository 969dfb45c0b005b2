/* capture.c: checkpoints x splits x sites -> acts_h5 (see capture.h). */
#include "capture/capture.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/acts_h5.h"
#include "tokenizer/chat_template.h"
#include "engine/context_len.h"
#include "engine/forward.h"
#include "model/model.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/progress.h"

enum { DEFAULT_BATCH = 16 };

/* ---------------------------------------------------------------- tokens */

/* The chat-formatted token ids of one split. */
typedef struct {
  int n;
  int32_t **ids;
  int *lens;
} split_tokens;

static void split_tokens_free(split_tokens *t) {
  for (int i = 0; t->ids && i < t->n; i++) free(t->ids[i]);
  free(t->ids);
  free(t->lens);
  *t = (split_tokens){0};
}

static int tokenize_split(const rg_model *m, const rg_chat_template *t, const rg_prompt_set *ps, int n_pos,
                          split_tokens *out) {
  *out = (split_tokens){.n = ps->n, .ids = calloc((size_t)ps->n, sizeof(int32_t *)),
                        .lens = calloc((size_t)ps->n, sizeof(int))};
  if (!out->ids || !out->lens) return rg_error_set("%s: out of memory", ps->path);
  for (int i = 0; i < ps->n; i++) {
    if (rg_prompt_encode_chat(m, t, NULL, ps->items[i].text, true, &out->ids[i], &out->lens[i]) < 0)
      return rg_error_prefix("%s: prompt %d", ps->path, i + 1);
    if (out->lens[i] < n_pos)
      return rg_error_set("%s: prompt %d has %d tokens, fewer than the %d eoi positions", ps->path, i + 1,
                          out->lens[i], n_pos);
  }
  return 0;
}

/* The eoi token ids: the template text after the instruction, without BOS. */
static int eoi_tokens(const rg_model *m, const rg_chat_template *t, int32_t **ids, int *n) {
  char *post = rg_chat_post_instruction(t);
  if (!post) return -1;
  int rc = rg_tokenize(m->tokenizer, post, strlen(post), true, false, ids, n);
  free(post);
  if (rc == 0 && *n == 0) {
    free(*ids);
    *ids = NULL;
    rc = rg_error_set("%s: chat template %s has no post-instruction tokens", m->path, rg_chat_template_name(t->kind));
  }
  return rc;
}

/* ---------------------------------------------------------------- hook */

/* Where the hook puts the eoi rows of every captured site for the current
 * batch: buf[site][slot][layer][k][d_model], k = position - (len - n_pos). */
typedef struct {
  uint32_t sites; /* mask of RG_HOOK_BIT(site) */
  int n_layers, d_model, n_pos;
  const int *lens; /* token count of each batch slot */
  int *from_pos;   /* [batch] lens[j] - n_pos: the session hands over only these rows (rg_capture.from_pos) */
  float *buf[RG_HOOK_N_SITES];
} eoi_sink;

static void keep_eoi_rows(void *user, rg_hook_site site, int layer, const float *rows, int n_rows, int d,
                          const int *seq, const int *pos) {
  eoi_sink *k = user;
  if (!(k->sites & RG_HOOK_BIT(site))) return;
  for (int i = 0; i < n_rows; i++) {
    int p = pos[i] - (k->lens[seq[i]] - k->n_pos);
    if (p < 0 || p >= k->n_pos) continue;
    size_t at = (((size_t)seq[i] * k->n_layers + layer) * k->n_pos + p) * (size_t)d;
    memcpy(k->buf[site] + at, rows + (size_t)i * d, (size_t)d * sizeof(float));
  }
}

/* ---------------------------------------------------------------- one step */

typedef struct {
  rg_acts_file *file;
  const rg_capture_opts *opts;
  int n_pos, batch;
  long long tokens; /* prompt tokens run through the model in this step */
  double forward_s; /* time spent in prefill (the throughput figure) */
  rg_progress progress; /* prompts of every split done in this step */
  int n_done;
} step_ctx;

/* Opens the dataset of every requested site of SPLIT. */
static int begin_sites(step_ctx *c, const char *split, int n) {
  for (int site = 0; site < RG_HOOK_N_SITES; site++)
    if ((c->opts->sites & RG_HOOK_BIT(site)) && rg_acts_begin_site(c->file, split, (rg_hook_site)site, n, c->n_pos) < 0)
      return -1;
  return 0;
}

/* Closes them, each checked to hold every prompt. */
static int end_sites(step_ctx *c) {
  for (int site = 0; site < RG_HOOK_N_SITES; site++)
    if ((c->opts->sites & RG_HOOK_BIT(site)) && rg_acts_end_site(c->file, (rg_hook_site)site) < 0) return -1;
  return 0;
}

/* One pass over a split: each batch is prefilled once, with every requested
 * site hooked, and each prompt's rows are written to each site's dataset. */
static int capture_split(step_ctx *c, rg_session *s, const rg_model *m, const rg_capture_split *sp,
                         const split_tokens *tk, eoi_sink *sink, float *logits) {
  const rg_prompt_set *ps = sp->prompts;
  const char **texts = malloc((size_t)ps->n * sizeof *texts), **cats = malloc((size_t)ps->n * sizeof *cats);
  int rc = texts && cats ? 0 : rg_error_set("%s: out of memory", ps->path);
  for (int i = 0; rc == 0 && i < ps->n; i++) {
    texts[i] = ps->items[i].text;
    cats[i] = ps->items[i].category;
  }
  if (rc == 0)
    rc = rg_acts_write_prompts(c->file, sp->name, ps->n, texts, cats, (const int32_t *const *)tk->ids, tk->lens);
  free(texts);
  free(cats);
  if (rc == 0) rc = begin_sites(c, sp->name, tk->n);
  const size_t per_prompt = (size_t)m->cfg.n_layers * c->n_pos * m->cfg.d_model;
  for (int b = 0; rc == 0 && b < tk->n; b += c->batch) {
    int nb = tk->n - b < c->batch ? tk->n - b : c->batch;
    sink->lens = tk->lens + b;
    for (int j = 0; j < nb; j++) sink->from_pos[j] = sink->lens[j] - c->n_pos;
    rg_session_reset(s);
    double t0 = rg_now_seconds();
    rc = rg_session_prefill(s, (const int32_t *const *)tk->ids + b, tk->lens + b, nb, logits);
    c->forward_s += rg_now_seconds() - t0;
    for (int j = 0; rc == 0 && j < nb; j++) c->tokens += tk->lens[b + j];
    for (int site = 0; rc == 0 && site < RG_HOOK_N_SITES; site++)
      for (int j = 0; rc == 0 && (sink->sites & RG_HOOK_BIT(site)) && j < nb; j++)
        rc = rg_acts_write_prompt(c->file, (rg_hook_site)site, b + j, sink->buf[site] + (size_t)j * per_prompt);
    if (rc == 0) rg_progress_tick(&c->progress, c->n_done += nb);
  }
  if (rc < 0) return rg_error_prefix("%s", sp->name);
  return end_sites(c);
}

static int capture_step(rg_acts_file *f, const rg_checkpoint *ck, const rg_model *m, const rg_chat_template *t,
                        int n_pos, const rg_capture_opts *o) {
  step_ctx c = {.file = f, .opts = o, .n_pos = n_pos, .batch = o->batch > 0 ? o->batch : DEFAULT_BATCH};
  split_tokens *tk = calloc((size_t)o->n_splits, sizeof *tk);
  if (!tk) return rg_error_set("%s: out of memory", ck->path);
  int rc = 0, max_len = 1;
  for (int i = 0; rc == 0 && i < o->n_splits; i++) {
    rc = tokenize_split(m, t, o->splits[i].prompts, n_pos, &tk[i]);
    for (int j = 0; rc == 0 && j < tk[i].n; j++)
      if (tk[i].lens[j] > max_len) max_len = tk[i].lens[j];
  }
  if (rc == 0 && rg_context_len(&m->cfg, max_len, 0, &max_len) < 0) rc = rg_error_prefix("%s", ck->path);
  rg_session *s = NULL;
  const size_t per_prompt = (size_t)m->cfg.n_layers * n_pos * m->cfg.d_model;
  eoi_sink sink = {.sites = o->sites, .n_layers = m->cfg.n_layers, .d_model = m->cfg.d_model, .n_pos = n_pos};
  for (int site = 0; site < RG_HOOK_N_SITES; site++)
    if ((o->sites & RG_HOOK_BIT(site)) && !(sink.buf[site] = malloc((size_t)c.batch * per_prompt * sizeof(float))))
      rc = rg_error_set("%s: out of memory", ck->path);
  float *logits = malloc((size_t)c.batch * m->cfg.vocab_size * sizeof(float));
  uint32_t *layer_sites = malloc((size_t)m->cfg.n_layers * sizeof *layer_sites);
  sink.from_pos = malloc((size_t)c.batch * sizeof *sink.from_pos);
  if (rc == 0 && (!logits || !layer_sites || !sink.from_pos)) rc = rg_error_set("%s: out of memory", ck->path);
  for (int l = 0; rc == 0 && l < m->cfg.n_layers; l++) layer_sites[l] = o->sites;
  rg_backend_opts bo = {.threads = o->threads};
  rg_weights *w = rc == 0 ? rg_weights_open(m, &bo, RG_WEIGHTS_AUTO) : NULL;
  if (rc == 0 && (!w || !(s = rg_session_new(w, c.batch, max_len, NULL)))) rc = -1;
  rg_capture spec = {.fn = keep_eoi_rows, .user = &sink, .layer_sites = layer_sites, .from_pos = sink.from_pos};
  if (rc == 0) rg_session_set_capture(s, &spec);
  double t0 = rg_now_seconds();
  int n_prompts = 0;
  for (int i = 0; i < o->n_splits; i++) n_prompts += tk[i].n;
  char label[64];
  snprintf(label, sizeof label, "step %ld: capture", ck->step);
  rg_progress_start(&c.progress, o->log, label, n_prompts);
  if (rc == 0) rc = rg_acts_begin_step(f, ck->step, ck->path);
  for (int i = 0; rc == 0 && i < o->n_splits; i++) rc = capture_split(&c, s, m, &o->splits[i], &tk[i], &sink, logits);
  if (rc == 0) rc = rg_acts_end_step(f);
  if (rc == 0) rg_progress_end(&c.progress);
  double dt = rg_now_seconds() - t0;
  if (rc == 0 && o->log) {
    fprintf(o->log, "step %ld: %lld prompt tokens, forward %.2f s (%.1f tokens/s), step %.2f s\n", ck->step,
            c.tokens, c.forward_s, c.forward_s > 0 ? (double)c.tokens / c.forward_s : 0.0, dt);
    fflush(o->log);
  }
  rg_session_free(s);
  rg_weights_free(w);
  free(layer_sites);
  free(sink.from_pos);
  free(logits);
  for (int site = 0; site < RG_HOOK_N_SITES; site++) free(sink.buf[site]);
  for (int i = 0; i < o->n_splits; i++) split_tokens_free(&tk[i]);
  free(tk);
  return rc;
}

/* ---------------------------------------------------------------- series */

/* Everything the file records about the model, from the first checkpoint. */
typedef struct {
  rg_chat_template tmpl;
  int32_t *eoi;
  int n_eoi;
} model_view;

static int view_model(const rg_model *m, const char *template_name, model_view *v) {
  *v = (model_view){0};
  if (rg_prompt_template(m, template_name, &v->tmpl) < 0) return -1;
  if (eoi_tokens(m, &v->tmpl, &v->eoi, &v->n_eoi) < 0) {
    rg_chat_template_free(&v->tmpl);
    return -1;
  }
  return 0;
}

static void model_view_free(model_view *v) {
  rg_chat_template_free(&v->tmpl);
  free(v->eoi);
  *v = (model_view){0};
}

/* A later checkpoint must match the first in everything the file fixes. */
static int same_shape(const rg_model *first, const model_view *fv, const rg_model *m, const model_view *v) {
  if (m->cfg.n_layers != first->cfg.n_layers || m->cfg.d_model != first->cfg.d_model)
    return rg_error_set("%s: %d layers x %d d_model, but the series started with %d x %d", m->path, m->cfg.n_layers,
                        m->cfg.d_model, first->cfg.n_layers, first->cfg.d_model);
  if (v->n_eoi != fv->n_eoi || memcmp(v->eoi, fv->eoi, (size_t)v->n_eoi * sizeof *v->eoi) != 0)
    return rg_error_set("%s: eoi tokens differ from the first checkpoint's", m->path);
  return 0;
}

static const char *weight_dtype(const rg_model *m) {
  const rg_dtype_info *info = rg_dtype_get(m->layers[0].wq->type);
  return info ? info->name : "";
}

int rg_capture_series(const rg_checkpoint_series *series, const char *out_path, const rg_capture_opts *opts) {
  rg_capture_opts o = *opts;
  if (o.sites == 0) o.sites = RG_HOOK_BIT(RG_HOOK_RESID_PRE);
  if (series->n <= 0 || o.n_splits <= 0) return rg_error_set("%s: nothing to capture", out_path);
  rg_model *first = rg_model_load(series->items[0].path);
  if (!first) return -1;
  model_view fv;
  if (view_model(first, o.chat_template, &fv) < 0) {
    rg_model_free(first);
    return -1;
  }
  rg_acts_meta meta = {.model_id = first->id, .model_dtype = weight_dtype(first),
                       .chat_template = rg_chat_template_name(fv.tmpl.kind), .n_layers = first->cfg.n_layers,
                       .d_model = first->cfg.d_model, .eoi_token_ids = fv.eoi, .n_eoi = fv.n_eoi,
                       .float16 = o.float16};
  rg_acts_file *f = rg_acts_open(out_path, &meta);
  int rc = f ? 0 : -1;
  for (int i = 0; rc == 0 && i < series->n; i++) {
    const rg_checkpoint *ck = &series->items[i];
    if (i > 0) rg_fault_point("capture-step"); /* tests: a kill between two steps of a series */
    if (rg_acts_has_step(f, ck->step)) {
      if (o.log) fprintf(o.log, "step %ld: already captured\n", ck->step);
      continue;
    }
    if (i == 0) {
      rc = capture_step(f, ck, first, &fv.tmpl, fv.n_eoi, &o);
      continue;
    }
    rg_model *m = rg_model_load(ck->path);
    model_view v = {0};
    rc = m && view_model(m, o.chat_template, &v) == 0 ? same_shape(first, &fv, m, &v) : -1;
    if (rc == 0) rc = capture_step(f, ck, m, &v.tmpl, v.n_eoi, &o);
    model_view_free(&v);
    rg_model_free(m);
  }
  if (f) rg_acts_close(f);
  model_view_free(&fv);
  rg_model_free(first);
  return rc;
}

int rg_capture_parse_sites(const char *flag, const char *list, uint32_t *mask) {
  *mask = 0;
  const char *p = list;
  while (1) {
    size_t n = strcspn(p, ",");
    int found = -1;
    for (int s = 0; s < RG_HOOK_N_SITES; s++) {
      const char *name = rg_hook_site_name((rg_hook_site)s);
      if (strlen(name) == n && strncmp(p, name, n) == 0) found = s;
    }
    if (found < 0)
      return rg_error_set("%s: unknown site '%.*s' (resid_pre, attn_out, resid_mid, mlp_out, resid_post)", flag,
                          (int)n, p);
    *mask |= RG_HOOK_BIT(found);
    if (p[n] == '\0') return 0;
    p += n + 1;
  }
}
