/* classifier_prompt.c: the HarmBench judge's prompts and the reading of its answer (classifier_prompt.h). */
#include "harmbench/classifier_prompt.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"
#include "util/json.h"

int rg_classifier_prompts_load(const char *path, rg_classifier_prompts *out) {
  memset(out, 0, sizeof *out);
  cJSON *root = rg_json_read_file(path);
  if (!root) return -1;
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
  const cJSON *pc = cJSON_GetObjectItemCaseSensitive(root, "prompt_contextual");
  int rc = 0;
  if (!cJSON_IsString(p) || !cJSON_IsString(pc))
    rc = rg_error_set("%s: needs string fields prompt and prompt_contextual", path);
  else if (!(out->prompt = strdup(p->valuestring)) || !(out->prompt_contextual = strdup(pc->valuestring)))
    rc = rg_error_set("%s: out of memory", path);
  cJSON_Delete(root);
  if (rc != 0) rg_classifier_prompts_free(out);
  return rc;
}

void rg_classifier_prompts_free(rg_classifier_prompts *p) {
  free(p->prompt);
  free(p->prompt_contextual);
  memset(p, 0, sizeof *p);
}

/* A growing output buffer. */
typedef struct {
  char *s;
  size_t len, cap;
} strbuf;

static int put(strbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *grown = realloc(b->s, cap);
    if (!grown) return rg_error_set("template: out of memory");
    b->s = grown;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
  return 0;
}

char *rg_format_template(const char *tmpl, const char *const *names, const char *const *values, int n) {
  strbuf b = {0};
  if (put(&b, "", 0) != 0) return NULL;
  for (const char *s = tmpl; *s;) {
    if (s[0] == '{' && s[1] == '{') {
      if (put(&b, "{", 1) != 0) goto fail;
      s += 2;
    } else if (s[0] == '}' && s[1] == '}') {
      if (put(&b, "}", 1) != 0) goto fail;
      s += 2;
    } else if (s[0] == '}') {
      rg_error_set("template: single '}' encountered at offset %zu", (size_t)(s - tmpl));
      goto fail;
    } else if (s[0] == '{') {
      const char *close = strchr(s, '}');
      if (!close) {
        rg_error_set("template: unclosed '{' at offset %zu", (size_t)(s - tmpl));
        goto fail;
      }
      size_t len = (size_t)(close - s - 1);
      if (len == 0 || strcspn(s + 1, "!:.[{") < len) {
        rg_error_set("template: unsupported field '%.*s' at offset %zu", (int)len, s + 1, (size_t)(s - tmpl));
        goto fail;
      }
      int k = 0;
      while (k < n && !(strlen(names[k]) == len && memcmp(names[k], s + 1, len) == 0)) k++;
      if (k == n) {
        rg_error_set("template: no value for field '%.*s'", (int)len, s + 1);
        goto fail;
      }
      if (put(&b, values[k], strlen(values[k])) != 0) goto fail;
      s = close + 1;
    } else {
      size_t run = strcspn(s, "{}");
      if (put(&b, s, run) != 0) goto fail;
      s += run;
    }
  }
  return b.s;
fail:
  free(b.s);
  return NULL;
}

char *rg_classifier_prompt_render(const rg_classifier_prompts *p, const rg_behavior *b, const char *generation) {
  if (rg_behavior_has_tag(b, "context")) {
    const char *names[] = {"behavior", "generation", "context"};
    const char *values[] = {b->behavior, generation, b->context};
    return rg_format_template(p->prompt_contextual, names, values, 3);
  }
  const char *names[] = {"behavior", "generation"};
  const char *values[] = {b->behavior, generation};
  return rg_format_template(p->prompt, names, values, 2);
}

int rg_judge_label(const char *first_token_text) {
  const char *s = first_token_text;
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  /* ASCII case folding: no non-ASCII text lowers to "yes" or "no" (U+212A
   * KELVIN SIGN and U+0130, the only characters whose Python lowercase is
   * ASCII-bearing, lower to 'k' and "i\u0307"). */
  if (n == 3 && strncasecmp(s, "yes", 3) == 0) return 1;
  if (n == 2 && strncasecmp(s, "no", 2) == 0) return 0;
  return -1;
}
