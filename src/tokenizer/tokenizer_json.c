/* tokenizer_json.c: a tokenizer from a Hugging Face tokenizer.json.
 *
 * Supported (anything else is refused with an error naming the file):
 *   model          BPE: vocab, merges ("a b" strings or [a, b] pairs),
 *                  byte_fallback, fuse_unk, unk_token, ignore_merges
 *   normalizer     null, Sequence, Prepend("▁"), Replace(" " -> "▁"), NFC
 *   pre_tokenizer  null, Sequence, Split(Regex|String; Isolated, Removed,
 *                  MergedWithPrevious, MergedWithNext, Contiguous; invert),
 *                  ByteLevel(add_prefix_space, use_regex), Digits(individual_digits),
 *                  Metaspace(prepend_scheme, split)
 *   decoder        ByteLevel, Metaspace, Sequence (Strip(" ", start) is honoured)
 *   post_processor TemplateProcessing whose "single" starts with a special
 *                  token (that token is BOS and is added)
 *   added_tokens   matched in raw text, longest first; lstrip/rstrip/
 *                  single_word are not implemented (no supported model uses them)
 * A ByteLevel pre-tokenizer makes a byte-level tokenizer; Metaspace or the
 * Replace(" " -> "▁") normalizer makes a SentencePiece-style one.
 * tokenizer_config.json (optional) supplies bos/eos/pad_token and
 * add_bos_token, overriding the post-processor.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

#define SPM_SPACE "\xE2\x96\x81" /* U+2581 */
#define RE_BYTE_LEVEL \
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Vocabulary ids at or above this are taken as a corrupt file, whatever its size. */
#define MAX_VOCAB (1 << 24)

typedef struct {
  const char *path;
  bool byte_level, spm;
} build_state;

static const char *type_of(const cJSON *node) {
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(node, "type");
  return cJSON_IsString(ty) ? ty->valuestring : "";
}

static bool flag(const cJSON *node, const char *key, bool dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(node, key);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static int parse_normalizer(rg_tokenizer *t, build_state *st, const cJSON *n) {
  if (!n || cJSON_IsNull(n)) return 0;
  const char *ty = type_of(n);
  if (strcmp(ty, "Sequence") == 0) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(n, "normalizers")) if (parse_normalizer(t, st, item))
        return -1;
    return 0;
  }
  if (strcmp(ty, "Prepend") == 0) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "prepend");
    if (!cJSON_IsString(p) || strcmp(p->valuestring, SPM_SPACE) != 0)
      return rg_error_set("%s: unsupported Prepend normalizer (only \"▁\")", st->path);
    t->prefix = RG_PREFIX_EVERY_SEGMENT;
    return 0;
  }
  if (strcmp(ty, "Replace") == 0) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
    if (!cJSON_IsString(pat) || !cJSON_IsString(content) || strcmp(pat->valuestring, " ") != 0 ||
        strcmp(content->valuestring, SPM_SPACE) != 0)
      return rg_error_set("%s: unsupported Replace normalizer (only \" \" -> \"▁\")", st->path);
    st->spm = true;
    return 0;
  }
  if (strcmp(ty, "NFC") == 0) { /* Qwen2 */
    t->nfc = true;
    return 0;
  }
  return rg_error_set("%s: unsupported normalizer '%s'", st->path, ty);
}

static int parse_split(rg_tokenizer *t, build_state *st, const cJSON *n) {
  const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(n, "pattern");
  const cJSON *re = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
  const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pattern, "String");
  const cJSON *beh = cJSON_GetObjectItemCaseSensitive(n, "behavior");
  const cJSON *pat = cJSON_IsString(re) ? re : lit;
  if (!cJSON_IsString(pat) || !cJSON_IsString(beh)) return rg_error_set("%s: Split without pattern/behavior", st->path);
  static const struct {
    const char *name;
    rg_split_behavior b;
  } BEHAVIORS[] = {{"Isolated", RG_SPLIT_ISOLATED},
                   {"Removed", RG_SPLIT_REMOVED},
                   {"MergedWithPrevious", RG_SPLIT_MERGED_PREVIOUS},
                   {"MergedWithNext", RG_SPLIT_MERGED_NEXT},
                   {"Contiguous", RG_SPLIT_CONTIGUOUS}};
  for (size_t i = 0; i < sizeof BEHAVIORS / sizeof BEHAVIORS[0]; i++)
    if (strcmp(beh->valuestring, BEHAVIORS[i].name) == 0) {
      if (rg_tok_add_regex(t, pat->valuestring, strlen(pat->valuestring), pat == lit, BEHAVIORS[i].b, false)) return -1;
      t->steps[t->n_steps - 1].invert = flag(n, "invert", false);
      return 0;
    }
  return rg_error_set("%s: unsupported Split behavior '%s'", st->path, beh->valuestring);
}

static int parse_pre_tokenizer(rg_tokenizer *t, build_state *st, const cJSON *n) {
  if (!n || cJSON_IsNull(n)) return 0;
  const char *ty = type_of(n);
  if (strcmp(ty, "Sequence") == 0) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(n, "pretokenizers")) if (parse_pre_tokenizer(t, st, item))
        return -1;
    return 0;
  }
  if (strcmp(ty, "Split") == 0) return parse_split(t, st, n);
  if (strcmp(ty, "ByteLevel") == 0) {
    st->byte_level = true;
    bool prefix = flag(n, "add_prefix_space", false);
    if (!flag(n, "use_regex", true)) return prefix ? rg_tok_add_regex(t, NULL, 0, false, RG_SPLIT_ISOLATED, true) : 0;
    return rg_tok_add_regex(t, RE_BYTE_LEVEL, strlen(RE_BYTE_LEVEL), false, RG_SPLIT_ISOLATED, prefix);
  }
  if (strcmp(ty, "Digits") == 0) {
    const char *re = flag(n, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
    return rg_tok_add_regex(t, re, strlen(re), false, RG_SPLIT_ISOLATED, false);
  }
  if (strcmp(ty, "Metaspace") == 0) {
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(n, "replacement");
    if (cJSON_IsString(rep) && strcmp(rep->valuestring, SPM_SPACE) != 0)
      return rg_error_set("%s: Metaspace replacement must be \"▁\"", st->path);
    st->spm = true;
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(n, "prepend_scheme");
    const char *s = cJSON_IsString(scheme) ? scheme->valuestring : flag(n, "add_prefix_space", true) ? "always" : "never";
    if (strcmp(s, "always") == 0) t->prefix = RG_PREFIX_EVERY_SEGMENT;
    else if (strcmp(s, "first") == 0) t->prefix = RG_PREFIX_FIRST;
    else if (strcmp(s, "never") == 0) t->prefix = RG_PREFIX_NONE;
    else return rg_error_set("%s: unknown Metaspace prepend_scheme '%s'", st->path, s);
    t->prefix_unless_space = true;
    /* split=true: every "▁" starts a new word. */
    if (flag(n, "split", true)) return rg_tok_add_regex(t, SPM_SPACE, 3, true, RG_SPLIT_MERGED_NEXT, false);
    return 0;
  }
  return rg_error_set("%s: unsupported pre_tokenizer '%s'", st->path, ty);
}

static void parse_decoder(rg_tokenizer *t, const cJSON *n) {
  const char *ty = type_of(n);
  if (strcmp(ty, "Sequence") == 0) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(n, "decoders")) parse_decoder(t, item);
  } else if (strcmp(ty, "Strip") == 0) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(n, "content"), *start = cJSON_GetObjectItemCaseSensitive(n, "start");
    if (cJSON_IsString(c) && strcmp(c->valuestring, " ") == 0 && cJSON_IsNumber(start) && start->valuedouble >= 1)
      t->strip_decoded_space = true;
  } else if (strcmp(ty, "Metaspace") == 0) {
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(n, "prepend_scheme");
    t->strip_decoded_space = !(cJSON_IsString(scheme) && strcmp(scheme->valuestring, "never") == 0);
  }
}

static void parse_post_processor(rg_tokenizer *t, const cJSON *n) {
  const char *ty = type_of(n);
  if (strcmp(ty, "Sequence") == 0) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(n, "processors")) parse_post_processor(t, item);
    return;
  }
  if (strcmp(ty, "TemplateProcessing") != 0) return;
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(n, "single"), 0);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(first, "SpecialToken"), "id");
  if (!cJSON_IsString(id)) return;
  int32_t bos = rg_token_lookup(t, id->valuestring);
  if (bos >= 0) {
    t->bos = bos;
    t->add_bos = true;
  }
}

/* The smallest model.vocab entry, "":0 and the comma before the next, takes
 * 5 bytes, so a file of LEN bytes holds at most (LEN + 1) / 5 entries. */
static int file_capacity(size_t len) {
  size_t cap = (len + 1) / 5;
  return cap < MAX_VOCAB ? (int)cap : MAX_VOCAB;
}

/* Refuses ID (entry INDEX of WHAT) unless it is an integer below LIMIT. */
static int check_id(const char *path, const char *what, int index, const cJSON *id, int limit, const char *why) {
  if (!cJSON_IsNumber(id)) return rg_error_set("%s: %s %d has no numeric id", path, what, index);
  double d = id->valuedouble;
  if (d < 0 || d >= limit || d != (double)(int)d)
    return rg_error_set("%s: %s %d has bad id %.17g (ids must be integers in [0, %d): %s)", path, what, index, d,
                        limit, why);
  return 0;
}

/* The number of ids the tables need (one more than the largest id in
 * model.vocab and added_tokens), or -1 with the error set. Every id is
 * bounded before anything is sized by it, so a few bytes cannot claim
 * millions of slots: below MODEL_VOCAB (the model's embedding rows; <= 0 when
 * there is no model) and below the number of entries a file of FILE_LEN bytes
 * can hold. Ids may leave gaps (Hugging Face allows them), but no more slots
 * than the file could fill. */
static int count_ids(const char *path, size_t file_len, int model_vocab, const cJSON *vocab, const cJSON *added) {
  int limit = file_capacity(file_len);
  char why[96];
  snprintf(why, sizeof why, "a %zu-byte file holds at most %d entries", file_len, limit);
  if (model_vocab > 0 && model_vocab < limit) {
    limit = model_vocab;
    snprintf(why, sizeof why, "the model's vocabulary has %d tokens", model_vocab);
  }
  int hi = -1, index = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, vocab) {
    if (check_id(path, "model.vocab entry", index++, v, limit, why)) return -1;
    if ((int)v->valuedouble > hi) hi = (int)v->valuedouble;
  }
  index = 0;
  cJSON_ArrayForEach(v, added) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(v, "id");
    if (check_id(path, "added_tokens entry", index, id, limit, why)) return -1;
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "content")))
      return rg_error_set("%s: added_tokens entry %d has no content", path, index);
    if ((int)id->valuedouble > hi) hi = (int)id->valuedouble;
    index++;
  }
  if (hi < 0) return rg_error_set("%s: model.vocab is empty", path);
  return hi + 1;
}

static int load_merges(rg_tokenizer *t, const char *path, const cJSON *merges) {
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, merges) {
    int rc;
    if (cJSON_IsString(m)) {
      const char *sp = strchr(m->valuestring, ' ');
      if (!sp) return rg_error_set("%s: merge %d ('%s') is not 'left right'", path, i, m->valuestring);
      rc = rg_tok_add_merge(t, m->valuestring, (size_t)(sp - m->valuestring), sp + 1, strlen(sp + 1));
    } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
      const char *l = cJSON_GetArrayItem(m, 0)->valuestring, *r = cJSON_GetArrayItem(m, 1)->valuestring;
      rc = rg_tok_add_merge(t, l, strlen(l), r, strlen(r));
    } else {
      return rg_error_set("%s: merge %d is neither \"a b\" nor [\"a\", \"b\"]", path, i);
    }
    if (rc) return -1;
    i++;
  }
  return rg_tok_index_merges(t);
}

static int32_t config_token(const rg_tokenizer *t, const cJSON *cfg, const char *key, int32_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  if (!cJSON_IsString(v)) return dflt;
  int32_t id = rg_token_lookup(t, v->valuestring);
  return id >= 0 ? id : dflt;
}

static int apply_config(rg_tokenizer *t, const char *config_path) {
  cJSON *cfg = rg_json_read_file(config_path);
  if (!cfg) return -1;
  if (!cJSON_IsObject(cfg)) {
    cJSON_Delete(cfg);
    return rg_error_set("%s: not a JSON object", config_path);
  }
  t->bos = config_token(t, cfg, "bos_token", t->bos);
  t->eos = config_token(t, cfg, "eos_token", t->eos);
  t->pad = config_token(t, cfg, "pad_token", t->pad);
  t->add_bos = flag(cfg, "add_bos_token", t->add_bos);
  cJSON_Delete(cfg);
  return 0;
}

static rg_tokenizer *build(const char *path, size_t file_len, int model_vocab, const cJSON *root) {
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (!cJSON_IsObject(model)) return rg_error_set("%s: no \"model\" object", path), NULL;
  const char *mtype = type_of(model);
  if (*mtype && strcmp(mtype, "BPE") != 0) return rg_error_set("%s: unsupported model type '%s'", path, mtype), NULL;
  if (!cJSON_IsObject(vocab)) return rg_error_set("%s: model.vocab missing or not an object", path), NULL;
  if (!cJSON_IsArray(merges)) return rg_error_set("%s: model.merges missing or not an array", path), NULL;
  const cJSON *affix = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
  const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
  if ((cJSON_IsString(affix) && *affix->valuestring) || (cJSON_IsString(suffix) && *suffix->valuestring))
    return rg_error_set("%s: BPE subword prefix/suffix is not supported", path), NULL;
  int n_ids = count_ids(path, file_len, model_vocab, vocab, added);
  if (n_ids < 0) return NULL;

  rg_tokenizer *t = rg_tok_alloc(RG_TOK_BPE_BYTE, path, n_ids);
  if (!t) return NULL;
  build_state st = {path, false, false};
  const cJSON *v;
  cJSON_ArrayForEach(v, vocab) if (rg_tok_set_text(t, (int32_t)v->valuedouble, v->string, strlen(v->string))) goto fail;
  cJSON_ArrayForEach(v, added) {
    const char *content = cJSON_GetObjectItemCaseSensitive(v, "content")->valuestring;
    if (rg_tok_set_text(t, (int32_t)cJSON_GetObjectItemCaseSensitive(v, "id")->valuedouble, content, strlen(content)))
      goto fail;
  }
  if (rg_tok_index_vocab(t) || load_merges(t, path, merges)) goto fail;
  cJSON_ArrayForEach(v, added) {
    if (*cJSON_GetObjectItemCaseSensitive(v, "content")->valuestring == '\0') continue;
    if (rg_tok_add_added(t, (int32_t)cJSON_GetObjectItemCaseSensitive(v, "id")->valuedouble, flag(v, "special", false)))
      goto fail;
  }
  t->byte_fallback = flag(model, "byte_fallback", false);
  t->fuse_unk = flag(model, "fuse_unk", false);
  t->ignore_merges = flag(model, "ignore_merges", false);
  const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
  if (cJSON_IsString(unk)) t->unk = rg_token_lookup(t, unk->valuestring);
  rg_tok_find_byte_tokens(t);

  if (parse_normalizer(t, &st, cJSON_GetObjectItemCaseSensitive(root, "normalizer")) ||
      parse_pre_tokenizer(t, &st, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")))
    goto fail;
  if (st.byte_level == st.spm) {
    rg_error_set("%s: pre-tokenizer is %s (need ByteLevel, or Metaspace / Replace(\" \" -> \"▁\"))", path,
                 st.spm ? "both byte-level and SentencePiece-style" : "neither byte-level nor SentencePiece-style");
    goto fail;
  }
  t->kind = st.byte_level ? RG_TOK_BPE_BYTE : RG_TOK_BPE_SPM;
  parse_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
  parse_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
  if (t->kind == RG_TOK_BPE_SPM) { /* SentencePiece's conventional names when nothing says otherwise */
    if (t->bos < 0) t->bos = rg_token_lookup(t, "<s>");
    t->eos = rg_token_lookup(t, "</s>");
  }
  return t;
fail:
  rg_tokenizer_free(t);
  return NULL;
}

rg_tokenizer *rg_tokenizer_from_json(const char *tokenizer_json, const char *tokenizer_config) {
  return rg_tokenizer_from_json_for_model(tokenizer_json, tokenizer_config, 0);
}

rg_tokenizer *rg_tokenizer_from_json_for_model(const char *tokenizer_json, const char *tokenizer_config,
                                               int model_vocab) {
  size_t len;
  char *text = rg_read_file(tokenizer_json, &len);
  if (!text) return NULL;
  cJSON *root = rg_json_parse_named(text, len, tokenizer_json);
  free(text);
  if (!root) return NULL;
  rg_tokenizer *t = build(tokenizer_json, len, model_vocab, root);
  cJSON_Delete(root);
  if (t && tokenizer_config && apply_config(t, tokenizer_config)) {
    rg_tokenizer_free(t);
    return NULL;
  }
  return t;
}
