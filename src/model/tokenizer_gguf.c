/* tokenizer_gguf.c: a tokenizer from GGUF metadata (tokenizer.ggml.*).
 *
 *   tokenizer.ggml.model   "gpt2" (byte-level BPE) or "llama" (SentencePiece)
 *   tokenizer.ggml.tokens  string[n]; .token_type i32[n] (1 normal, 2 unknown,
 *                          3 control, 4 user-defined, 5 unused, 6 byte);
 *                          .scores f32[n] (llama); .merges string[] "a b" (gpt2)
 *   tokenizer.ggml.pre     pre-tokenizer name (gpt2 only), llama.cpp's table
 *   tokenizer.ggml.{bos,eos,padding,unknown}_token_id, .add_bos_token,
 *   tokenizer.ggml.add_space_prefix (llama; default true)
 * Control and unknown tokens are special (matched in text only with
 * parse_special, dropped by skip_special); user-defined tokens are always
 * matched, as in llama.cpp.
 */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer_internal.h"
#include "util/error.h"

/* The GPT-2 / ByteLevel split regex (without Hugging Face's trailing "|\s+":
 * text it would match is kept as a between-matches piece anyway). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

/* llama.cpp's regexes per tokenizer.ggml.pre (src/llama-vocab.cpp), each list
 * applied in order. Names not listed are refused rather than guessed. */
static const struct {
  const char *names[8];
  const char *regex[4];
} PRE_TABLE[] = {
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {{"gpt-2", "gpt2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"}, {RE_GPT2}},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}, {"\\p{N}", RE_GPT2}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"},
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"},
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)"}},
};

static int add_pre_regexes(rg_tokenizer *t, const char *pre) {
  for (size_t k = 0; k < sizeof PRE_TABLE / sizeof PRE_TABLE[0]; k++)
    for (int j = 0; j < 8 && PRE_TABLE[k].names[j]; j++) {
      if (strcmp(PRE_TABLE[k].names[j], pre) != 0) continue;
      for (int r = 0; r < 4 && PRE_TABLE[k].regex[r]; r++)
        if (rg_tok_add_regex(t, PRE_TABLE[k].regex[r], strlen(PRE_TABLE[k].regex[r]), false, RG_SPLIT_ISOLATED,
                             false))
          return -1;
      return 0;
    }
  return rg_error_set("%s: unsupported tokenizer.ggml.pre '%s'", t->source, pre);
}

/* A numeric array KEY of N elements of type TYPE, or NULL (absent). Sets the
 * error and *bad on a wrong type or count. */
static const void *typed_array(const rg_gguf *g, const char *key, rg_gguf_type type, int64_t n, bool *bad) {
  rg_gguf_type et;
  int64_t count;
  if (rg_gguf_get_arr(g, key, &et, &count)) return NULL;
  if (et != type || count != n) {
    rg_error_set("%s: %s has type %d and %lld elements, expected type %d and %lld", rg_gguf_path(g), key, (int)et,
                 (long long)count, (int)type, (long long)n);
    *bad = true;
    return NULL;
  }
  return rg_gguf_arr_data(g, key);
}

static int token_id(const rg_gguf *g, rg_tokenizer *t, const char *key, int32_t *out) {
  int64_t v;
  if (rg_gguf_get_i64(g, key, &v)) return 0; /* optional */
  if (v < 0 || v >= t->n_vocab) return rg_error_set("%s: %s = %lld is out of range", t->source, key, (long long)v);
  *out = (int32_t)v;
  return 0;
}

static int load_merges(const rg_gguf *g, rg_tokenizer *t) {
  rg_gguf_type et;
  int64_t n;
  if (rg_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n) || et != RG_GGUF_STRING)
    return rg_error_set("%s: tokenizer.ggml.merges missing or not a string array", t->source);
  if (n > INT32_MAX) return rg_error_set("%s: %lld merges", t->source, (long long)n);
  for (int64_t i = 0; i < n; i++) {
    size_t len;
    const char *m = rg_gguf_arr_str(g, "tokenizer.ggml.merges", i, &len);
    const char *sp = m ? memchr(m, ' ', len) : NULL;
    if (!sp) return rg_error_set("%s: merge %lld is not 'left right'", t->source, (long long)i);
    size_t ll = (size_t)(sp - m);
    if (rg_tok_add_merge(t, m, ll, sp + 1, len - ll - 1)) return -1;
  }
  return rg_tok_index_merges(t);
}

rg_tokenizer *rg_tokenizer_from_gguf(const rg_gguf *g) {
  const char *path = rg_gguf_path(g);
  size_t mlen;
  const char *model = rg_gguf_get_str(g, "tokenizer.ggml.model", &mlen);
  rg_tokenizer_kind kind;
  if (model && mlen == 4 && memcmp(model, "gpt2", 4) == 0) kind = RG_TOK_BPE_BYTE;
  else if (model && mlen == 5 && memcmp(model, "llama", 5) == 0) kind = RG_TOK_BPE_SPM;
  else {
    rg_error_set("%s: tokenizer.ggml.model is %s'%.*s' (supported: gpt2, llama)", path, model ? "" : "missing ",
                 model ? (int)mlen : 0, model ? model : "");
    return NULL;
  }
  rg_gguf_type et;
  int64_t n;
  if (rg_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) || et != RG_GGUF_STRING || n <= 0 || n > (1 << 24)) {
    rg_error_set("%s: tokenizer.ggml.tokens missing, not a string array, or of bad size", path);
    return NULL;
  }
  rg_tokenizer *t = rg_tok_alloc(kind, path, (int)n);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++) {
    size_t len;
    const char *s = rg_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &len);
    if (!s) {
      rg_error_set("%s: token %lld unreadable", path, (long long)i);
      goto fail;
    }
    if (rg_tok_set_text(t, (int32_t)i, s, len)) goto fail;
  }
  if (rg_tok_index_vocab(t)) goto fail;

  bool bad = false;
  const uint8_t *types = typed_array(g, "tokenizer.ggml.token_type", RG_GGUF_I32, n, &bad);
  if (bad) goto fail;
  for (int64_t i = 0; types && i < n; i++) {
    int32_t ty;
    memcpy(&ty, types + 4 * i, 4); /* GGUF arrays need not be aligned */
    if ((ty == 2 || ty == 3 || ty == 4) && rg_tok_add_added(t, (int32_t)i, ty != 4)) goto fail;
  }
  if (token_id(g, t, "tokenizer.ggml.bos_token_id", &t->bos) || token_id(g, t, "tokenizer.ggml.eos_token_id", &t->eos) ||
      token_id(g, t, "tokenizer.ggml.padding_token_id", &t->pad) ||
      token_id(g, t, "tokenizer.ggml.unknown_token_id", &t->unk))
    goto fail;
  int64_t flag;
  t->add_bos = rg_gguf_get_i64(g, "tokenizer.ggml.add_bos_token", &flag) == 0 ? flag != 0 : kind == RG_TOK_BPE_SPM;

  if (kind == RG_TOK_BPE_BYTE) {
    if (load_merges(g, t)) goto fail;
    char *pre = rg_gguf_dup_str(g, "tokenizer.ggml.pre");
    int rc = add_pre_regexes(t, pre ? pre : "default");
    free(pre);
    if (rc) goto fail;
  } else {
    const uint8_t *scores = typed_array(g, "tokenizer.ggml.scores", RG_GGUF_F32, n, &bad);
    if (!scores) {
      if (!bad) rg_error_set("%s: tokenizer.ggml.scores missing (needed by the llama tokenizer)", path);
      goto fail;
    }
    t->score = malloc(sizeof *t->score * (size_t)n);
    if (!t->score) {
      rg_error_set("%s: out of memory", path);
      goto fail;
    }
    memcpy(t->score, scores, sizeof *t->score * (size_t)n);
    bool prefix = rg_gguf_get_i64(g, "tokenizer.ggml.add_space_prefix", &flag) == 0 ? flag != 0 : true;
    t->prefix = prefix ? RG_PREFIX_EVERY_SEGMENT : RG_PREFIX_NONE;
    t->strip_decoded_space = prefix;
    t->byte_fallback = true;
    rg_tok_find_byte_tokens(t);
  }
  return t;
fail:
  rg_tokenizer_free(t);
  return NULL;
}
