/* tokenizer_gguf.c: a tokenizer from GGUF metadata (tokenizer.ggml.*).
 *
 *   tokenizer.ggml.model   "gpt2" (byte-level BPE) or "llama" (SentencePiece)
 *   tokenizer.ggml.tokens  string[n]; .token_type i32[n] (1 normal, 2 unknown,
 *                          3 control, 4 user-defined, 5 unused, 6 byte);
 *                          .scores f32[n] (llama); .merges string[] "a b" (gpt2)
 *   tokenizer.ggml.pre     pre-tokenizer name (gpt2 only): regexes and flags,
 *                          as llama.cpp derives them (PRE_TYPES below)
 *   tokenizer.ggml.{bos,eos,padding,unknown}_token_id, .add_bos_token,
 *   tokenizer.ggml.add_space_prefix (llama; default true)
 * Control and unknown tokens are special (matched in text only with
 * parse_special, dropped by skip_special); user-defined tokens are always
 * matched, as in llama.cpp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

/* ---- pre-tokenizer types (tokenizer.ggml.pre) ----
 *
 * llama.cpp names the pre-tokenizer of a "gpt2" (byte-level BPE) vocabulary
 * and derives from the name both the split regexes and a few flags
 * (src/llama-vocab.cpp of llama.cpp b-11434: llm_tokenizer_bpe's constructor
 * for the regexes, llama_vocab::impl::load's tokenizer_pre chain for the
 * flags). refgeo holds both here, per name. Flags that change token ids:
 *   ignore_merges  a pre-tokenized word that is itself a token is emitted
 *                  whole (HF BPE "ignore_merges": Llama-3, tekken);
 *   add_bos        BOS is added by default when the GGUF has no
 *                  tokenizer.ggml.add_bos_token (llama3, tekken).
 * (llama.cpp also clears the BOS id of chatglm-bpe and glm4, but only as a
 * default that tokenizer.ggml.bos_token_id overrides, and refgeo's default is
 * already "no BOS".)
 * llama.cpp's clean_spaces flag is a decode-time post-process (transformers'
 * clean_up_tokenization_spaces). refgeo decodes as Hugging Face tokenizers'
 * decode does, without it, so that decode(encode(text)) gives the text back;
 * the flag is therefore not held.
 * Where llama.cpp rewrote a Hugging Face regex for its own regex engine
 * (tekken, gpt-4o: lookaheads instead of \p{Lu}..., see the comments there),
 * the original tokenizer.json regex is used: PCRE2 runs it as written, and
 * Hugging Face is the reference. */

/* The GPT-2 / ByteLevel split regex (without Hugging Face's trailing "|\s+":
 * text it would match is kept as a between-matches piece anyway). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* English contractions, case-insensitive, as llama.cpp spells (?i:'s|...). */
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                                      \
  RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                                       \
  RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Upper-then-lower and lower-only letter runs (tekken, gpt-4o). */
#define RE_CASED_WORDS                                                                                                 \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
#define RE_UPPER_WORDS                                                                                                 \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
/* CJK ranges of the DeepSeek pre-tokenizers (U+4E00-U+9FA5, U+0800-U+4E00,
 * U+AC00-U+D7FF), written as escapes. */
#define RE_DEEPSEEK_CJK "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"

typedef struct {
  const char *names[10];
  const char *regex[6]; /* applied in order, each splitting every piece */
  bool ignore_merges, add_bos, nfc;
} pre_type;

static const pre_type PRE_TYPES[] = {
    {.names = {"default"}, .regex = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {.names = {"gpt-2", "gpt2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"},
     .regex = {RE_GPT2}},
    {.names = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
     .regex = {"\\p{N}", RE_GPT2}},
    {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
     .regex = {RE_LLAMA3},
     .ignore_merges = true,
     .add_bos = true},
    /* The Llama-3 regex without llama3's flags. */
    {.names = {"dbrx", "smaug-bpe", "chatglm-bpe"}, .regex = {RE_LLAMA3}},
    {.names = {"glm4", "glm5"}, .regex = {RE_LLAMA3}, .ignore_merges = true},
    /* Qwen2's tokenizer.json normalizes to NFC before splitting (transformers
     * models/qwen2/tokenization_qwen2.py); llama.cpp does not. */
    {.names = {"qwen2"}, .regex = {RE_QWEN2}, .nfc = true},
    {.names = {"deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "solar-open", "kormo", "f2llmv2"}, .regex = {RE_QWEN2}},
    {.names = {"qwen35"},
     .regex = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                      "\\s+(?!\\S)|\\s+"}},
    {.names = {"deepseek-llm"},
     .regex = {"[\\r\\n]",
      "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}\\x{1c4}-\\x{293}\\x{295}-\\x{2af}"
      "\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}"
      "\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}"
      "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}"
      "\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}"
      "\\x{1f5d}\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}"
      "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}"
      "\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}"
      "\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}"
      "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}"
      "\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}"
      "\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}"
      "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+",
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+", "\\s+$",
      RE_DEEPSEEK_CJK, "\\p{N}+"}},
    {.names = {"deepseek-coder"}, .regex = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_DEEPSEEK_CJK, "\\p{N}"}},
    {.names = {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
     .regex = {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = {"falcon"},
     .regex = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {.names = {"tekken"},
     .regex = {RE_CASED_WORDS "|" RE_UPPER_WORDS "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .ignore_merges = true,
     .add_bos = true},
    {.names = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
     .regex = {RE_CASED_WORDS RE_CONTRACTIONS "?|" RE_UPPER_WORDS RE_CONTRACTIONS
                     "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = {"seed-coder"},
     .regex = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = {"poro-chat", "bloom", "gpt3-finnish"}, .regex = {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+"}},
    {.names = {"viking"},
     .regex = {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+", "\\p{N}"}},
};

/* The pre type named PRE, or NULL with the error set and the known names listed. */
static const pre_type *find_pre_type(const rg_tokenizer *t, const char *pre) {
  for (size_t k = 0; k < sizeof PRE_TYPES / sizeof PRE_TYPES[0]; k++)
    for (int j = 0; j < 10 && PRE_TYPES[k].names[j]; j++)
      if (strcmp(PRE_TYPES[k].names[j], pre) == 0) return &PRE_TYPES[k];
  char known[2048];
  size_t used = 0;
  known[0] = '\0';
  for (size_t k = 0; k < sizeof PRE_TYPES / sizeof PRE_TYPES[0]; k++)
    for (int j = 0; j < 10 && PRE_TYPES[k].names[j] && used < sizeof known; j++)
      used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", PRE_TYPES[k].names[j]);
  rg_error_set("%s: unsupported tokenizer.ggml.pre '%s' (known: %s)", t->source, pre, known);
  return NULL;
}

static int apply_pre_type(rg_tokenizer *t, const pre_type *p) {
  for (int r = 0; r < 6 && p->regex[r]; r++)
    if (rg_tok_add_regex(t, p->regex[r], strlen(p->regex[r]), false, RG_SPLIT_ISOLATED, false)) return -1;
  t->ignore_merges = p->ignore_merges;
  t->nfc = p->nfc;
  return 0;
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
  bool add_bos_default = kind == RG_TOK_BPE_SPM; /* llama.cpp: SPM vocabularies add BOS */
  if (kind == RG_TOK_BPE_BYTE) {
    if (load_merges(g, t)) goto fail;
    char *pre;
    if (rg_gguf_dup_optional_str(g, "tokenizer.ggml.pre", &pre)) goto fail;
    const pre_type *p = find_pre_type(t, pre ? pre : "default");
    free(pre);
    if (!p || apply_pre_type(t, p)) goto fail;
    add_bos_default = p->add_bos;
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
  /* The GGUF key overrides the pre type's default, as in llama.cpp. */
  t->add_bos = rg_gguf_get_i64(g, "tokenizer.ggml.add_bos_token", &flag) == 0 ? flag != 0 : add_bos_default;
  return t;
fail:
  rg_tokenizer_free(t);
  return NULL;
}
