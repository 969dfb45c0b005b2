/* chat_template.c: the built-in chat formats (see chat_template.h).
 *
 * Each renderer is a transcription of one family's official Jinja template
 * into C, statement by statement, so that it fails where the template calls
 * raise_exception() and emits the same bytes everywhere else. The templates
 * themselves are kept, with where they came from, in
 * tests/fixtures/chat_template/cases.json, and test_chat_template compares
 * every renderer against transformers' rendering of them.
 */
#include "tokenizer/chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* ------------------------------------------------------------------ output buffer */

/* A growing string; `failed` latches an allocation failure so that the
 * renderers can append unconditionally and check once at the end. */
typedef struct {
  char *data;
  size_t len, cap;
  bool failed;
} strbuf;

static void sb_addn(strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_add(strbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

/* ------------------------------------------------------------------ Python's str.strip() */

/* Jinja's `trim` filter and Python's str.strip() remove every code point for
 * which str.isspace() is true, not only ASCII blanks; this is that set. */
static bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

/* Decodes the UTF-8 sequence at s (n bytes available); returns its length, or
 * 0 when it is not a well-formed sequence (such bytes are never whitespace). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
  if (len == 0 || len > n) return 0;
  uint32_t c = len == 1 ? s[0] : (uint32_t)(s[0] & (0x7f >> len));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3f);
  }
  *cp = c;
  return len;
}

/* Appends s[0..n) without its leading and trailing whitespace. */
static void sb_add_stripped(strbuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t start = 0, end = n;
  uint32_t c;
  size_t k;
  while (start < end && (k = utf8_decode(u + start, end - start, &c)) && is_python_space(c)) start += k;
  while (end > start) {
    size_t back = 1; /* find the start of the last code point */
    while (back < 4 && back < end - start && (u[end - back] & 0xc0) == 0x80) back++;
    if (utf8_decode(u + end - back, back, &c) != back || !is_python_space(c)) break;
    end -= back;
  }
  sb_addn(b, s + start, end - start);
}

/* ------------------------------------------------------------------ the renderers */

typedef int (*render_fn)(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out);

static bool is_role(const rg_chat_message *m, const char *role) { return strcmp(m->role, role) == 0; }

/* The check several templates open their loop with:
 *   {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(...) }} */
static int check_alternation(const rg_chat_template *t, const rg_chat_message *m, int i) {
  if (is_role(m, "user") != (i % 2 == 0))
    return rg_error_set("chat template %s: conversation roles must alternate user/assistant/user/assistant/... "
                        "(message %d is '%s')",
                        rg_chat_template_name(t->kind), i + 1, m->role);
  return 0;
}

/* SmolLM2 / Qwen2: the system turn the template inserts when the first
 * message is not a system message (none for plain ChatML). */
static int render_chatml(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  for (int i = 0; i < n; i++) {
    if (i == 0 && t->default_system && !is_role(&m[0], "system")) {
      sb_add(out, "<|im_start|>system\n");
      sb_add(out, t->default_system);
      sb_add(out, "<|im_end|>\n");
    }
    sb_add(out, "<|im_start|>");
    sb_add(out, m[i].role);
    sb_add(out, "\n");
    sb_add(out, m[i].content);
    sb_add(out, "<|im_end|>\n");
  }
  if (gen) sb_add(out, "<|im_start|>assistant\n");
  return 0;
}

/* Llama-2-chat: a leading system message is folded into the first turn as
 * <<SYS>>...<</SYS>>; each user turn opens with BOS; contents are stripped
 * (after the fold, so the strip applies to the combined text); messages in
 * other roles that pass the alternation check emit nothing. */
static int render_llama2(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  if (n < 1) return rg_error_set("chat template llama-2: the template reads messages[0] of an empty conversation");
  bool has_system = is_role(&m[0], "system");
  const rg_chat_message *loop = has_system ? m + 1 : m;
  int n_loop = has_system ? n - 1 : n;
  strbuf content = {0};
  int rc = 0;
  for (int i = 0; i < n_loop && rc == 0; i++) {
    if ((rc = check_alternation(t, &loop[i], i)) != 0) break;
    content.len = 0;
    if (i == 0 && has_system) {
      sb_add(&content, "<<SYS>>\n");
      sb_add(&content, m[0].content);
      sb_add(&content, "\n<</SYS>>\n\n");
    }
    sb_add(&content, loop[i].content);
    if (content.failed) break;
    if (is_role(&loop[i], "user")) {
      sb_add(out, t->bos_text);
      sb_add(out, "[INST] ");
      sb_add_stripped(out, content.data, content.len);
      sb_add(out, " [/INST]");
    } else if (is_role(&loop[i], "assistant")) {
      sb_add(out, " ");
      sb_add_stripped(out, content.data, content.len);
      sb_add(out, " </s>");
    }
  }
  /* No generation prompt in this template: " [/INST]" already ends a user turn. */
  if (content.failed) out->failed = true;
  free(content.data);
  return rc;
}

/* Mistral-7B-Instruct-v0.1: BOS once, user and assistant only (a system
 * message is an error, as in the official template), EOS + ' ' after an
 * assistant turn, contents verbatim. */
static int render_mistral(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  sb_add(out, t->bos_text);
  for (int i = 0; i < n; i++) {
    if (check_alternation(t, &m[i], i) != 0) return -1;
    if (is_role(&m[i], "user")) {
      sb_add(out, "[INST] ");
      sb_add(out, m[i].content);
      sb_add(out, " [/INST]");
    } else if (is_role(&m[i], "assistant")) {
      sb_add(out, m[i].content);
      sb_add(out, "</s> ");
    } else {
      return rg_error_set("chat template mistral: only user and assistant roles are supported (message %d is '%s')",
                          i + 1, m[i].role);
    }
  }
  return 0; /* no generation prompt either */
}

/* Zephyr: every turn ends with EOS and a newline (the template's newlines
 * after {{ }} survive trim_blocks); the generation prompt is emitted inside
 * the loop, after the last message. */
static int render_zephyr(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  for (int i = 0; i < n; i++) {
    const char *header = is_role(&m[i], "user")        ? "<|user|>\n"
                         : is_role(&m[i], "system")    ? "<|system|>\n"
                         : is_role(&m[i], "assistant") ? "<|assistant|>\n"
                                                       : NULL;
    if (header) {
      sb_add(out, header);
      sb_add(out, m[i].content);
      sb_add(out, "</s>\n");
    }
    if (i == n - 1 && gen) sb_add(out, "<|assistant|>\n");
  }
  return 0;
}

/* Llama-3-Instruct: any role, trimmed contents, <|begin_of_text|> before the
 * first message. */
static int render_llama3(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  for (int i = 0; i < n; i++) {
    if (i == 0) sb_add(out, t->bos_text);
    sb_add(out, "<|start_header_id|>");
    sb_add(out, m[i].role);
    sb_add(out, "<|end_header_id|>\n\n");
    sb_add_stripped(out, m[i].content, strlen(m[i].content));
    sb_add(out, "<|eot_id|>");
  }
  if (gen) sb_add(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  return 0;
}

/* Gemma-it: no system role (an error, as in the official template), the
 * assistant is called "model", trimmed contents. */
static int render_gemma(const rg_chat_template *t, const rg_chat_message *m, int n, bool gen, strbuf *out) {
  if (n < 1) return rg_error_set("chat template gemma: the template reads messages[0] of an empty conversation");
  sb_add(out, t->bos_text);
  if (is_role(&m[0], "system")) return rg_error_set("chat template gemma: system role not supported");
  for (int i = 0; i < n; i++) {
    if (check_alternation(t, &m[i], i) != 0) return -1;
    sb_add(out, "<start_of_turn>");
    sb_add(out, is_role(&m[i], "assistant") ? "model" : m[i].role);
    sb_add(out, "\n");
    sb_add_stripped(out, m[i].content, strlen(m[i].content));
    sb_add(out, "<end_of_turn>\n");
  }
  if (gen) sb_add(out, "<start_of_turn>model\n");
  return 0;
}

/* ------------------------------------------------------------------ the family table */

typedef struct {
  rg_chat_kind kind;
  const char *name;
  const char *bos_text; /* what the template's {{ bos_token }} prints; "" if it prints none */
  render_fn render;
} family;

static const family FAMILIES[] = {
    {RG_CHAT_CHATML, "chatml", "", render_chatml},
    {RG_CHAT_LLAMA2, "llama-2", "<s>", render_llama2},
    {RG_CHAT_MISTRAL, "mistral", "<s>", render_mistral},
    {RG_CHAT_ZEPHYR, "zephyr", "", render_zephyr},
    {RG_CHAT_LLAMA3, "llama-3", "<|begin_of_text|>", render_llama3},
    {RG_CHAT_GEMMA, "gemma", "<bos>", render_gemma},
};
static const int N_FAMILIES = (int)(sizeof FAMILIES / sizeof FAMILIES[0]);

static const family *find_family(rg_chat_kind kind) {
  for (int i = 0; i < N_FAMILIES; i++)
    if (FAMILIES[i].kind == kind) return &FAMILIES[i];
  return NULL;
}

const char *rg_chat_template_name(rg_chat_kind kind) {
  const family *f = find_family(kind);
  return f ? f->name : "unknown";
}

static int init_template(rg_chat_template *out, const family *f) {
  out->kind = f->kind;
  out->default_system = NULL;
  out->bos_text = strdup(f->bos_text);
  if (!out->bos_text) return rg_error_set("chat template %s: out of memory", f->name);
  return 0;
}

int rg_chat_template_by_name(const char *name, rg_chat_template *out) {
  for (int i = 0; i < N_FAMILIES; i++)
    if (strcmp(name, FAMILIES[i].name) == 0) return init_template(out, &FAMILIES[i]);
  return rg_error_set("unknown chat template '%s' (known: chatml, llama-2, mistral, zephyr, llama-3, gemma)", name);
}

void rg_chat_template_free(rg_chat_template *t) {
  if (!t) return;
  free(t->default_system);
  free(t->bos_text);
  t->default_system = NULL;
  t->bos_text = NULL;
}

/* The text of the Jinja string literal that starts at s (after its opening
 * quote) up to `stop`, with the escapes a template author writes (\n, \t,
 * \\, \', \") decoded; NULL if the literal closes before `stop` appears.
 * In tokenizer_config.json a "\n" arrives either as a real newline inside
 * the literal or as the two characters \n, and both mean a newline. */
static char *literal_until(const char *s, char quote, const char *stop) {
  strbuf b = {0};
  size_t stop_len = strlen(stop);
  for (; *s && *s != quote; s++) {
    if (strncmp(s, stop, stop_len) == 0) {
      if (b.failed) break;
      return b.data ? b.data : strdup("");
    }
    char c = *s;
    if (c == '\\' && s[1]) {
      c = *++s;
      c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    sb_addn(&b, &c, 1);
  }
  free(b.data);
  return NULL;
}

/* ChatML templates that insert a default system turn carry it as a literal
 * '<|im_start|>system\n...<|im_end|>\n' (SmolLM2, Qwen2). */
static int extract_default_system(const char *jinja, char **out) {
  *out = NULL;
  static const char *const HEADS[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
  for (const char *p = jinja; (p = strstr(p, "<|im_start|>system")) != NULL; p++) {
    if (p == jinja || (p[-1] != '\'' && p[-1] != '"')) continue; /* must open a string literal */
    for (int h = 0; h < 2; h++) {
      size_t n = strlen(HEADS[h]);
      if (strncmp(p, HEADS[h], n) != 0) continue;
      *out = literal_until(p + n, p[-1], "<|im_end|>");
      if (*out) return 0;
    }
  }
  return 0;
}

int rg_chat_template_detect(const char *jinja, rg_chat_template *out) {
  if (!jinja || !*jinja) return rg_error_set("chat template: the model has no chat template (name a built-in one)");
  /* Order matters: Llama-2's template also contains "[INST]". */
  rg_chat_kind kind = strstr(jinja, "<|im_start|>")                              ? RG_CHAT_CHATML
                      : strstr(jinja, "[INST]") && strstr(jinja, "<<SYS>>")      ? RG_CHAT_LLAMA2
                      : strstr(jinja, "[INST]")                                  ? RG_CHAT_MISTRAL
                      : strstr(jinja, "<|user|>")                                ? RG_CHAT_ZEPHYR
                      : strstr(jinja, "<|start_header_id|>")                     ? RG_CHAT_LLAMA3
                      : strstr(jinja, "<start_of_turn>")                         ? RG_CHAT_GEMMA
                                                                                 : (rg_chat_kind)0;
  if (!kind)
    return rg_error_set("chat template: no built-in renderer matches the model's template (%.40s...); "
                        "name a built-in one",
                        jinja);
  if (init_template(out, find_family(kind)) != 0) return -1;
  if (kind == RG_CHAT_CHATML) extract_default_system(jinja, &out->default_system);
  return 0;
}

char *rg_chat_render(const rg_chat_template *t, const rg_chat_message *msgs, int n_msgs, bool add_generation_prompt) {
  const family *f = find_family(t->kind);
  if (!f) {
    rg_error_set("chat template: invalid template kind %d", (int)t->kind);
    return NULL;
  }
  /* transformers' apply_chat_template refuses an empty conversation before
   * the template runs. */
  if (n_msgs < 1) {
    rg_error_set("chat template %s: empty conversation", f->name);
    return NULL;
  }
  for (int i = 0; i < n_msgs; i++)
    if (!msgs[i].role || !msgs[i].content) {
      rg_error_set("chat template %s: message %d has no role or content", f->name, i + 1);
      return NULL;
    }
  strbuf out = {0};
  if (f->render(t, msgs, n_msgs, add_generation_prompt, &out) != 0) {
    free(out.data);
    return NULL;
  }
  if (out.failed) {
    free(out.data);
    rg_error_set("chat template %s: out of memory", f->name);
    return NULL;
  }
  return out.data ? out.data : strdup("");
}

char *rg_chat_post_instruction(const rg_chat_template *t) {
  /* Render a one-turn prompt around a marker that no template strips or
   * emits and return what follows it. */
  static const char MARK[] = "\x01";
  rg_chat_message m = {"user", MARK};
  char *prompt = rg_chat_render(t, &m, 1, true);
  if (!prompt) return NULL;
  char *after = strstr(prompt, MARK);
  char *post = after ? strdup(after + strlen(MARK)) : NULL;
  free(prompt);
  if (!post) rg_error_set("chat template %s: cannot locate the instruction in a rendered prompt",
                          rg_chat_template_name(t->kind));
  return post;
}
