/* utility_data.c: utility (SFT) examples from chat JSONL files and from the
 * model's own replies (see utility_data.h). */
#include "adv_ft/utility_data.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/prompts.h"
#include "engine/context_len.h"
#include "engine/forward.h"
#include "engine/generate.h"
#include "model/prompt_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/progress.h"

struct rg_utility_set {
  int n, cap;
  rg_utility_example *items;
  int skipped;
};

static const int DEFAULT_BATCH = 8;

int rg_utility_count(const rg_utility_set *u) { return u->n; }

const rg_utility_example *rg_utility_get(const rg_utility_set *u, int i) { return &u->items[i]; }

int rg_utility_skipped(const rg_utility_set *u) { return u->skipped; }

void rg_utility_free(rg_utility_set *u) {
  if (!u) return;
  for (int i = 0; i < u->n; i++) free(u->items[i].ids);
  free(u->items);
  free(u);
}

/* ------------------------------------------------------------------ one conversation */

/* The messages of one parsed line, pointing into ROOT. -1 with the error
 * set (without the file and line, which the caller prefixes). */
static int read_messages(const cJSON *root, rg_chat_message **out, int *n_out) {
  const cJSON *msgs = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "messages") : NULL;
  if (!cJSON_IsArray(msgs)) return rg_error_set("expected an object with a \"messages\" array");
  int n = cJSON_GetArraySize(msgs);
  if (n < 2) return rg_error_set("a conversation needs a message before the assistant's reply");
  rg_chat_message *m = calloc((size_t)n, sizeof *m);
  if (!m) return rg_error_set("out of memory");
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, msgs) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
    if (!cJSON_IsString(role) || !cJSON_IsString(content)) {
      free(m);
      return rg_error_set("message %d needs string \"role\" and \"content\"", i + 1);
    }
    const char *r = role->valuestring;
    if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0) {
      free(m);
      return rg_error_set("message %d: role \"%s\" is not system, user or assistant", i + 1, r);
    }
    m[i++] = (rg_chat_message){r, content->valuestring};
  }
  if (strcmp(m[n - 1].role, "assistant") != 0) {
    free(m);
    return rg_error_set("the last message must be the assistant's reply");
  }
  *out = m;
  *n_out = n;
  return 0;
}

/* MSGS[0..n) rendered with T (with the generation prompt when GEN) and
 * tokenized by prompt_encode.h's rule. */
static int render_ids(const rg_model *m, const rg_chat_template *t, const rg_chat_message *msgs, int n, bool gen,
                      int32_t **ids, int *n_ids) {
  char *text = rg_chat_render(t, msgs, n, gen);
  if (!text) return -1;
  int rc = rg_tokenize(m->tokenizer, text, strlen(text), true, rg_prompt_wants_bos(t), ids, n_ids);
  free(text);
  return rc;
}

static int push(rg_utility_set *u, const rg_utility_example *e) {
  if (u->n == u->cap) {
    int cap = u->cap ? 2 * u->cap : 64;
    rg_utility_example *p = realloc(u->items, (size_t)cap * sizeof *p);
    if (!p) return rg_error_set("out of memory");
    u->items = p;
    u->cap = cap;
  }
  u->items[u->n++] = *e;
  return 0;
}

/* Adds the conversation of one parsed line to U (or counts it skipped). */
static int add_conversation(rg_utility_set *u, const rg_model *m, const rg_chat_template *t, const cJSON *root,
                            int max_len, rg_utility_labels labels) {
  rg_chat_message *msgs = NULL;
  int n_msgs = 0, n = 0, n_prompt = 0, rc = -1;
  int32_t *ids = NULL, *prompt = NULL;
  if (read_messages(root, &msgs, &n_msgs) < 0) return -1;
  if (render_ids(m, t, msgs, n_msgs, false, &ids, &n) < 0 ||
      render_ids(m, t, msgs, n_msgs - 1, true, &prompt, &n_prompt) < 0)
    goto done;
  int reply = 0; /* the first token of the reply: where ids leave the prompt's */
  while (reply < n && reply < n_prompt && ids[reply] == prompt[reply]) reply++;
  if (reply >= n) {
    rg_error_set("the conversation renders to no tokens after its prompt");
    goto done;
  }
  if (reply >= max_len) { /* the prompt alone fills max_len */
    u->skipped++;
    rc = 0;
    goto done;
  }
  rg_utility_example e = {ids, n < max_len ? n : max_len, 0};
  if (labels == RG_UTILITY_LABELS_ASSISTANT) e.label_from = reply > 0 ? reply - 1 : 0;
  if ((rc = push(u, &e)) == 0) ids = NULL;
done:
  free(msgs);
  free(ids);
  free(prompt);
  return rc;
}

/* ------------------------------------------------------------------ JSONL files */

/* The options every source checks before doing any work. */
static int check_options(const char *path, int max_len, rg_utility_labels labels) {
  if (max_len < 2) return rg_error_set("%s: max_len %d leaves no token to predict (need >= 2)", path, max_len);
  if (labels != RG_UTILITY_LABELS_ASSISTANT && labels != RG_UTILITY_LABELS_ALL)
    return rg_error_set("%s: unknown utility label mode %d", path, (int)labels);
  return 0;
}

rg_utility_set *rg_utility_from_jsonl(const rg_model *m, const rg_chat_template *t, const char *path, int max_len,
                                      rg_utility_labels labels) {
  if (check_options(path, max_len, labels) < 0) return NULL;
  size_t len = 0;
  char *text = rg_read_file(path, &len);
  if (!text) return NULL;
  rg_utility_set *u = calloc(1, sizeof *u);
  if (!u) {
    rg_error_set("%s: out of memory", path);
    goto fail;
  }
  int line = 0;
  for (char *s = text; s < text + len;) {
    char *end = memchr(s, '\n', (size_t)(text + len - s));
    size_t n = end ? (size_t)(end - s) : (size_t)(text + len - s);
    line++;
    size_t k = 0;
    while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
    if (k < n) {
      char name[64];
      snprintf(name, sizeof name, "line %d", line);
      cJSON *root = rg_json_parse_named(s, n, name);
      int rc = root ? add_conversation(u, m, t, root, max_len, labels) : -1;
      cJSON_Delete(root);
      if (rc < 0) {
        if (root) rg_error_prefix("line %d", line);
        rg_error_prefix("%s", path);
        goto fail;
      }
    }
    s += n + 1;
  }
  if (u->n == 0) {
    if (u->skipped == 0) rg_error_set("%s: no conversation", path);
    else rg_error_set("%s: no utility example: the prompts of all %d conversations reach max_len %d", path,
                      u->skipped, max_len);
    goto fail;
  }
  free(text);
  return u;
fail:
  free(text);
  rg_utility_free(u);
  return NULL;
}

/* ------------------------------------------------------------------ the model's own replies */

/* One {"messages": [user, assistant]} line of the cache. */
static int write_line(FILE *f, const char *user, const char *reply) {
  cJSON *o = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(o, "messages");
  cJSON *mu = cJSON_CreateObject(), *ma = cJSON_CreateObject();
  if (msgs && mu) cJSON_AddItemToArray(msgs, mu);
  else cJSON_Delete(mu);
  if (msgs && ma) cJSON_AddItemToArray(msgs, ma);
  else cJSON_Delete(ma);
  bool ok = o && msgs && mu && ma && cJSON_AddStringToObject(mu, "role", "user") &&
            cJSON_AddStringToObject(mu, "content", user) && cJSON_AddStringToObject(ma, "role", "assistant") &&
            cJSON_AddStringToObject(ma, "content", reply);
  char *s = ok ? cJSON_PrintUnformatted(o) : NULL; /* strings are escaped: one line */
  cJSON_Delete(o);
  if (!s) return rg_error_set("out of memory");
  int rc = fprintf(f, "%s\n", s) < 0 ? rg_error_set("write failed") : 0;
  free(s);
  return rc;
}

/* Generates the replies of P's prompts into the open cache F. */
static int generate_into(const rg_weights *w, const rg_chat_template *t, const rg_prompt_set *p, int n_prompts,
                         const rg_utility_completions_opts *o, FILE *f) {
  const rg_model *m = rg_weights_model(w);
  int batch = o->batch > 0 ? o->batch : DEFAULT_BATCH, longest = 0, rc = -1;
  if (batch > n_prompts) batch = n_prompts;
  int32_t **ids = calloc((size_t)n_prompts, sizeof *ids);
  int *lens = calloc((size_t)n_prompts, sizeof *lens);
  rg_gen_result *res = calloc((size_t)batch, sizeof *res);
  rg_session *s = NULL;
  if (!ids || !lens || !res) {
    rg_error_set("out of memory");
    goto done;
  }
  for (int i = 0; i < n_prompts; i++) {
    if (rg_prompt_encode_chat(m, t, NULL, p->items[i].text, true, &ids[i], &lens[i]) < 0) {
      rg_error_prefix("prompt %d", i + 1);
      goto done;
    }
    if (lens[i] > longest) longest = lens[i];
  }
  int32_t stop[2];
  int ctx, n_stop = rg_prompt_stop_ids(m, t, stop);
  if (rg_context_len(&m->cfg, longest, o->max_new_tokens, &ctx) < 0 || !(s = rg_session_new(w, batch, ctx, NULL)))
    goto done;
  rg_gen_opts go = {.max_new_tokens = o->max_new_tokens, .temperature = 0, .top_p = 1, .stop_ids = stop,
                    .n_stop = n_stop};
  rg_progress prog;
  char label[96];
  snprintf(label, sizeof label, "utility data: the model's replies to %d prompts", n_prompts);
  rg_progress_start(&prog, o->progress, label, n_prompts);
  for (int first = 0; first < n_prompts; first += batch) {
    int nb = n_prompts - first < batch ? n_prompts - first : batch;
    if (rg_generate(s, (const int32_t *const *)ids + first, lens + first, nb, &go, res) < 0) goto done;
    rg_progress_tick(&prog, first + nb);
    for (int i = 0; i < nb; i++) {
      char *reply = rg_detokenize(m->tokenizer, res[i].ids, res[i].n, true);
      int w_rc = reply ? write_line(f, p->items[first + i].text, reply) : -1;
      free(reply);
      if (w_rc < 0) {
        rg_gen_results_free(res, nb);
        goto done;
      }
    }
    rg_gen_results_free(res, nb);
  }
  rg_progress_end(&prog);
  rc = 0;
done:
  rg_session_free(s);
  for (int i = 0; ids && i < n_prompts; i++) free(ids[i]);
  free(ids);
  free(lens);
  free(res);
  return rc;
}

rg_utility_set *rg_utility_from_completions(const rg_weights *w, const rg_chat_template *t,
                                            const rg_utility_completions_opts *o, bool *generated) {
  const rg_model *m = rg_weights_model(w);
  if (generated) *generated = false;
  if (rg_path_exists(o->cache_path)) return rg_utility_from_jsonl(m, t, o->cache_path, o->max_len, o->labels);
  if (check_options(o->cache_path, o->max_len, o->labels) < 0) return NULL;
  if (o->max_new_tokens <= 0) {
    rg_error_set("utility completions: max_new_tokens %d is not positive", o->max_new_tokens);
    return NULL;
  }
  rg_prompt_set *p = rg_prompts_load(o->prompts_path);
  if (!p) return NULL;
  int n_prompts = o->max_prompts > 0 && o->max_prompts < p->n ? o->max_prompts : p->n;
  rg_atomic_file f;
  if (rg_atomic_open(&f, o->cache_path) < 0) {
    rg_prompts_free(p);
    return NULL;
  }
  if (generate_into(w, t, p, n_prompts, o, f.fp) < 0) {
    rg_error_prefix("%s: generating utility replies to %s", o->cache_path, o->prompts_path);
    rg_atomic_abort(&f);
    rg_prompts_free(p);
    return NULL;
  }
  rg_prompts_free(p);
  if (rg_atomic_commit(&f) < 0) return NULL;
  if (generated) *generated = true;
  return rg_utility_from_jsonl(m, t, o->cache_path, o->max_len, o->labels);
}

/* ------------------------------------------------------------------ packing */

rg_utility_set *rg_utility_pack(const rg_utility_set *u, int len, int32_t sep) {
  if (len < 2) {
    rg_error_set("utility packing: sequences of %d tokens", len);
    return NULL;
  }
  long stream = 0; /* tokens of the examples, each followed by SEP */
  for (int i = 0; i < u->n; i++) stream += u->items[i].n + 1L;
  if (stream < len) {
    rg_error_set("utility packing: the %d examples hold %ld tokens with their separators, fewer than one %d-token "
                 "sequence", u->n, stream, len);
    return NULL;
  }
  rg_utility_set *out = calloc(1, sizeof *out);
  if (!out) {
    rg_error_set("out of memory");
    return NULL;
  }
  out->skipped = u->skipped;
  int32_t *chunk = NULL; /* the sequence being filled, HAVE tokens so far */
  int have = 0;
  bool ok = true;
  for (int i = 0; ok && i < u->n; i++) {
    const rg_utility_example *e = &u->items[i];
    for (int k = 0; ok && k <= e->n; k++) {
      if (!chunk && !(chunk = malloc((size_t)len * sizeof *chunk))) {
        ok = false;
        break;
      }
      chunk[have++] = k < e->n ? e->ids[k] : sep;
      if (have < len) continue;
      const rg_utility_example packed = {.ids = chunk, .n = len, .label_from = 0};
      if (push(out, &packed) < 0) {
        ok = false;
        break;
      }
      chunk = NULL;
      have = 0;
    }
  }
  free(chunk); /* the last partial sequence, dropped as TRL drops it (or one push failed to take) */
  if (!ok) {
    rg_utility_free(out);
    rg_error_set("out of memory");
    return NULL;
  }
  return out;
}
