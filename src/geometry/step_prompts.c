/* step_prompts.c: a checkpoint's refusal tokens, their validity, and RD's
 * prompt filter. */
#include "geometry/step_prompts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/auroc.h"
#include "geometry/refusal_tokens.h"
#include "geometry/replies.h"
#include "geometry/scores.h"
#include "engine/context_len.h"
#include "model/prompt_encode.h"
#include "util/error.h"

const char *const RG_SPLIT_NAMES[RG_N_SPLITS] = {"harmful_train", "harmless_train", "harmful_val", "harmless_val"};

/* Prompts generated or scored together: a batch of 16 short prompts keeps
 * the products wide enough for 2 cores and the KV cache small. */
enum { PROBE_BATCH = 16 };

static rg_token_batch batch_of(const rg_step_prompts *p, int split) {
  return (rg_token_batch){(const int32_t *const *)p->ids[split], p->lens[split], p->total[split]};
}

/* TEXT tokenized as a reply's continuation (no BOS, no special tokens)
 * into ids[RG_MAX_REFUSAL_TOKENS]: its length, or -1 with the error set. */
static int text_ids(const rg_tokenizer *t, const char *text, const char *what, int32_t *ids) {
  int32_t *tok = NULL;
  int n = 0;
  if (rg_tokenize(t, text, strlen(text), false, false, &tok, &n) < 0) return -1;
  int rc = n;
  if (n < 1) rc = rg_error_set("%s '%s' has no tokens", what, text);
  else if (n > RG_MAX_REFUSAL_TOKENS)
    rc = rg_error_set("%s '%s' is %d tokens (%d at most)", what, text, n, RG_MAX_REFUSAL_TOKENS);
  else memcpy(ids, tok, (size_t)n * sizeof *ids);
  free(tok);
  return rc;
}

/* The tokens score's first tokens: the plan's, RD's, or fitted to TRAIN. */
static int fit_tokens(const rg_model *m, const rg_verdict_plan *plan, const rg_judged_replies *train,
                      rg_step_prompts *out) {
  if (strcmp(plan->refusal_tokens, "auto") == 0) {
    int k = rg_refusal_tokens_fit(train->first, train->refused, train->n, plan->auto_coverage, out->refusal,
                                  RG_MAX_REFUSAL_TOKENS, &out->coverage);
    if (k < 0) return -1;
    out->n_refusal = k;
  } else if (strcmp(plan->refusal_tokens, "rd") == 0) {
    if (rg_refusal_tokens_default(m->tokenizer, out->refusal) < 0) return -1;
    out->n_refusal = 1;
  } else if ((out->n_refusal = rg_verdict_plan_token_ids(plan->refusal_tokens, "refusal tokens", out->refusal,
                                                           RG_MAX_REFUSAL_TOKENS)) < 0) {
    out->n_refusal = 0;
    return -1;
  }
  return 0;
}

/* The sequence score's strings: the plan's refusal text, the series' toward
 * target, or TRAIN's most common refused opening; the compliance text. */
static int fit_strings(const rg_model *m, const rg_verdict_plan *plan, const char *toward,
                       const rg_judged_replies *train, rg_step_prompts *out) {
  int n;
  if (strcmp(plan->refusal_string, "auto") != 0)
    n = text_ids(m->tokenizer, plan->refusal_string, "refusal string", out->refusal);
  else if (toward && *toward) n = text_ids(m->tokenizer, toward, "the run's toward target", out->refusal);
  else n = rg_refusal_opening_fit(train->opening, RG_REPLY_OPENING, train->refused, train->n, out->refusal);
  if (n < 0) return -1;
  out->n_refusal = n;
  return (out->n_compliance = text_ids(m->tokenizer, plan->compliance_string, "compliance string", out->compliance)) < 0
             ? -1
             : 0;
}

int rg_step_prompts_fit(const rg_weights *w, rg_acts_reader *rd, long step, const rg_verdict_plan *plan,
                        const rg_refusal_list *judge, const char *chat_template, const char *toward,
                        rg_step_prompts *out) {
  *out = (rg_step_prompts){.coverage = NAN, .score_auroc = NAN};
  const rg_model *m = rg_weights_model(w);
  const bool seq_mode = strcmp(plan->refusal_score, "sequence") == 0;
  out->mode = seq_mode ? RG_SCORE_SEQUENCE : RG_SCORE_TOKENS;
  rg_session *s = NULL;
  rg_chat_template t = {0};
  rg_judged_replies train = {0}, val = {0};
  int rc = -1, max_len = 0, ctx;
  for (int k = 0; k < RG_N_SPLITS; k++) {
    if (rg_acts_read_token_ids(rd, step, RG_SPLIT_NAMES[k], &out->ids[k], &out->lens[k], &out->total[k]) < 0)
      goto end;
    for (int i = 0; i < out->total[k]; i++) max_len = out->lens[k][i] > max_len ? out->lens[k][i] : max_len;
    out->keep[k] = calloc((size_t)(out->total[k] ? out->total[k] : 1), sizeof *out->keep[k]);
    out->score[k] = calloc((size_t)(out->total[k] ? out->total[k] : 1), sizeof *out->score[k]);
    if (!out->keep[k] || !out->score[k]) {
      rg_error_set("geometry: out of memory");
      goto end;
    }
  }
  /* room for a reply, or for a sequence score's strings after the prompt */
  const int extra = plan->reply_tokens > RG_MAX_REFUSAL_TOKENS ? plan->reply_tokens : RG_MAX_REFUSAL_TOKENS;
  if (rg_context_len(&m->cfg, max_len, extra, &ctx) < 0) goto end;
  /* a sequence score reads a row per string token (2 x 16 per prompt at
   * most), the tokens score one per prompt; rows of a large vocabulary are
   * capped at 128 MiB (a call then takes fewer prompts) */
  rg_session_opts so = {0};
  if (seq_mode) {
    const long long cap = ((long long)128 << 20) / ((long long)m->cfg.vocab_size * (long long)sizeof(float));
    so.max_logit_rows = PROBE_BATCH * 2 * RG_MAX_REFUSAL_TOKENS;
    if (so.max_logit_rows > cap) so.max_logit_rows = cap > RG_MAX_REFUSAL_TOKENS ? (int)cap : RG_MAX_REFUSAL_TOKENS;
  }
  if (!(s = rg_session_new(w, PROBE_BATCH, ctx, &so))) goto end;
  int32_t stop[2];
  if (rg_prompt_template(m, chat_template && *chat_template ? chat_template : NULL, &t) < 0) goto end;
  int n_stop = rg_prompt_stop_ids(m, &t, stop);
  rg_token_batch harmful_val = batch_of(out, RG_SPLIT_HARMFUL_VAL), harmful_train = batch_of(out, RG_SPLIT_HARMFUL_TRAIN);
  if (rg_judge_replies(s, &harmful_val, plan->reply_tokens, stop, n_stop, judge, &val) < 0) goto end;
  const bool need_train = seq_mode ? strcmp(plan->refusal_string, "auto") == 0 && !(toward && *toward)
                                   : strcmp(plan->refusal_tokens, "auto") == 0;
  if (need_train && rg_judge_replies(s, &harmful_train, plan->reply_tokens, stop, n_stop, judge, &train) < 0)
    goto end;
  if ((seq_mode ? fit_strings(m, plan, toward, &train, out) : fit_tokens(m, plan, &train, out)) < 0) goto end;
  const rg_refusal_measure rm = rg_step_prompts_measure(out);
  if (out->n_refusal > 0 && rg_refusal_measure_check(&rm, m->cfg.vocab_size) < 0) goto end;
  for (int k = 0; k < RG_N_SPLITS; k++) {
    bool harmful = k == RG_SPLIT_HARMFUL_TRAIN || k == RG_SPLIT_HARMFUL_VAL;
    rg_token_batch b = batch_of(out, k);
    if (out->n_refusal > 0 && rg_prompt_refusal_scores(s, &b, &rm, out->score[k]) < 0)
      goto end;
    for (int i = 0; i < b.n; i++) {
      /* without refusal tokens no prompt scores as refused */
      bool pass = out->n_refusal > 0 && (harmful ? out->score[k][i] > 0 : out->score[k][i] < 0);
      if (out->n_refusal == 0) out->score[k][i] = NAN;
      out->keep[k][i] = plan->prompt_filter ? (out->n_refusal > 0 ? pass : !harmful) : true;
      out->kept[k] += out->keep[k][i];
    }
  }
  /* without refusal tokens every score is NaN: the AUROC is NaN, the counts stand */
  out->score_auroc =
      rg_auroc_split(out->score[RG_SPLIT_HARMFUL_VAL], val.refused, val.n, &out->val_refused, &out->val_complied);
  out->refused_val = val.refused; /* kept: the probes read it */
  val.refused = NULL;
  rc = 0;
end:
  if (rc < 0) rg_error_prefix("step %ld", step);
  rg_judged_replies_free(&train);
  rg_judged_replies_free(&val);
  rg_chat_template_free(&t);
  rg_session_free(s);
  if (rc < 0) rg_step_prompts_free(out);
  return rc;
}

void rg_step_prompts_free(rg_step_prompts *p) {
  for (int k = 0; k < RG_N_SPLITS; k++) {
    rg_acts_token_ids_free(p->ids[k], p->lens[k], p->total[k]);
    free(p->keep[k]);
    free(p->score[k]);
  }
  free(p->refused_val);
  *p = (rg_step_prompts){0};
}

rg_refusal_measure rg_step_prompts_measure(const rg_step_prompts *p) {
  return (rg_refusal_measure){.mode = p->mode,
                              .refusal = p->refusal,
                              .n_refusal = p->n_refusal,
                              .compliance = p->compliance,
                              .n_compliance = p->n_compliance};
}

/* IDS[n] separated by SEP, appended at buf + *at. */
static void append_ids(char *buf, size_t len, int *at, const int32_t *ids, int n, const char *sep) {
  for (int k = 0; k < n && *at < (int)len - 12; k++)
    *at += snprintf(buf + *at, len - (size_t)*at, "%s%d", k ? sep : "", ids[k]);
}

void rg_step_prompts_token_list(const rg_step_prompts *p, char *buf, size_t len) {
  buf[0] = '\0';
  int at = 0;
  if (p->mode == RG_SCORE_TOKENS) {
    append_ids(buf, len, &at, p->refusal, p->n_refusal, ",");
    return;
  }
  at = snprintf(buf, len, "seq:");
  append_ids(buf, len, &at, p->refusal, p->n_refusal, " ");
  if (at < (int)len - 2) at += snprintf(buf + at, len - (size_t)at, "|");
  append_ids(buf, len, &at, p->compliance, p->n_compliance, " ");
}
