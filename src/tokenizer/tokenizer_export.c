/* tokenizer_export.c: a byte-level BPE tokenizer as tokenizer.json and
 * tokenizer_config.json trees (format: Hugging Face tokenizers'
 * tokenizer.json, serialized by tokenizers/src/tokenizer/serialization.rs;
 * the pieces used are the ones tokenizer_json.c reads back). */
#include "tokenizer/tokenizer_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

/* cJSON's Add* return NULL when out of memory; every builder below ANDs
 * their results into one flag instead of checking each call. */
static bool add_bool(cJSON *o, const char *k, bool v) { return cJSON_AddBoolToObject(o, k, v) != NULL; }
static bool add_str(cJSON *o, const char *k, const char *v) { return cJSON_AddStringToObject(o, k, v) != NULL; }
static bool add_null(cJSON *o, const char *k) { return cJSON_AddNullToObject(o, k) != NULL; }
static bool add_num(cJSON *o, const char *k, double v) { return cJSON_AddNumberToObject(o, k, v) != NULL; }
/* Adds ITEM under K (O may be NULL), or frees it: true when added. Chains
 * put it first, so that ITEM is owned or freed whatever comes after. */
static bool add_item(cJSON *o, const char *k, cJSON *item) {
  if (o && item && cJSON_AddItemToObject(o, k, item)) return true;
  cJSON_Delete(item);
  return false;
}
static bool append(cJSON *arr, cJSON *item) {
  if (arr && item && cJSON_AddItemToArray(arr, item)) return true;
  cJSON_Delete(item);
  return false;
}
/* O when OK, else NULL with O freed. */
static cJSON *keep(cJSON *o, bool ok) {
  if (ok) return o;
  cJSON_Delete(o);
  return NULL;
}

static const char *behavior_name(rg_split_behavior b) {
  switch (b) {
  case RG_SPLIT_ISOLATED: return "Isolated";
  case RG_SPLIT_REMOVED: return "Removed";
  case RG_SPLIT_MERGED_PREVIOUS: return "MergedWithPrevious";
  case RG_SPLIT_MERGED_NEXT: return "MergedWithNext";
  case RG_SPLIT_CONTIGUOUS: return "Contiguous";
  }
  return "Isolated";
}

static cJSON *byte_level(bool add_prefix_space, bool use_regex) {
  cJSON *o = cJSON_CreateObject();
  return keep(o, o && add_str(o, "type", "ByteLevel") && add_bool(o, "add_prefix_space", add_prefix_space) &&
                     add_bool(o, "trim_offsets", true) && add_bool(o, "use_regex", use_regex));
}

static cJSON *split(const rg_pretok_step *s) {
  cJSON *pattern = cJSON_CreateObject();
  pattern = keep(pattern, pattern && add_str(pattern, s->literal ? "String" : "Regex", s->pattern));
  cJSON *o = cJSON_CreateObject();
  return keep(o, add_item(o, "pattern", pattern) && add_str(o, "type", "Split") &&
                     add_str(o, "behavior", behavior_name(s->behavior)) && add_bool(o, "invert", s->invert));
}

/* Split steps, then the byte mapping. A step that only adds the prefix
 * space (ByteLevel(add_prefix_space, use_regex=false)) becomes that
 * ByteLevel; a prefix space combined with a regex has no Split form. */
static cJSON *pre_tokenizer(const rg_tokenizer *t) {
  cJSON *list = cJSON_CreateArray();
  bool ok = list != NULL, prefix = false;
  for (int i = 0; i < t->n_steps && ok; i++) {
    const rg_pretok_step *s = &t->steps[i];
    if (s->prefix_space && s->pattern) {
      cJSON_Delete(list);
      rg_error_set("%s: a ByteLevel prefix space with a regex cannot be exported", t->source);
      return NULL;
    }
    if (s->pattern) ok = append(list, split(s));
    else prefix = prefix || s->prefix_space;
  }
  ok = ok && append(list, byte_level(prefix, false));
  cJSON *seq = cJSON_CreateObject();
  seq = keep(seq, add_item(seq, "pretokenizers", ok ? list : NULL) && add_str(seq, "type", "Sequence"));
  if (!ok) cJSON_Delete(list);
  if (!seq) rg_error_set("%s: out of memory exporting the tokenizer", t->source);
  return seq;
}

static cJSON *bpe_model(const rg_tokenizer *t) {
  cJSON *m = cJSON_CreateObject();
  cJSON *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray();
  bool ok = add_item(m, "vocab", vocab);
  ok = add_item(m, "merges", merges) && ok;
  ok = ok && add_str(m, "type", "BPE") && add_null(m, "dropout") && add_null(m, "unk_token") &&
       add_null(m, "continuing_subword_prefix") && add_null(m, "end_of_word_suffix") &&
       add_bool(m, "fuse_unk", t->fuse_unk) && add_bool(m, "byte_fallback", false) &&
       add_bool(m, "ignore_merges", t->ignore_merges);
  for (int32_t id = 0; id < t->n_vocab && ok; id++) {
    const char *text = rg_tok_text(t, id);
    if (rg_tok_find(t, text, (size_t)t->len[id]) != id) continue; /* repeats a lower id's text */
    ok = add_num(vocab, text, id);
  }
  char *buf = NULL;
  size_t cap = 0;
  for (int r = 0; r < t->n_merges && ok; r++) {
    const rg_merge *mg = &t->merges[r];
    size_t need = (size_t)t->len[mg->left] + (size_t)t->len[mg->right] + 2;
    if (need > cap) {
      char *nb = realloc(buf, need * 2);
      ok = nb != NULL;
      if (!ok) break;
      buf = nb, cap = need * 2;
    }
    snprintf(buf, cap, "%s %s", rg_tok_text(t, mg->left), rg_tok_text(t, mg->right));
    ok = append(merges, cJSON_CreateString(buf));
  }
  free(buf);
  return keep(m, ok);
}

static cJSON *added_token(const rg_tokenizer *t, int32_t id, bool with_id) {
  cJSON *a = cJSON_CreateObject();
  return keep(a, a && (!with_id || add_num(a, "id", id)) && add_str(a, "content", rg_tok_text(t, id)) &&
                     add_bool(a, "single_word", false) && add_bool(a, "lstrip", false) &&
                     add_bool(a, "rstrip", false) && add_bool(a, "normalized", false) &&
                     add_bool(a, "special", t->special[id]));
}

static cJSON *added_tokens(const rg_tokenizer *t) {
  cJSON *arr = cJSON_CreateArray();
  bool ok = arr != NULL;
  for (int k = 0; k < t->n_added && ok; k++) ok = append(arr, added_token(t, t->added[k], true));
  return keep(arr, ok);
}

/* One element of a TemplateProcessing sequence: {"SpecialToken"|"Sequence": {"id", "type_id"}}. */
static cJSON *template_piece(const char *kind, const char *id, int type_id) {
  cJSON *inner = cJSON_CreateObject();
  inner = keep(inner, inner && add_str(inner, "id", id) && add_num(inner, "type_id", type_id));
  cJSON *piece = cJSON_CreateObject();
  return keep(piece, add_item(piece, kind, inner));
}

/* TemplateProcessing that puts BOS before every sequence (tokenizers
 * processors/template.rs), or ByteLevel, which adds nothing. */
static cJSON *post_processor(const rg_tokenizer *t) {
  if (!t->add_bos || t->bos < 0) return byte_level(false, true);
  const char *bos = rg_tok_text(t, t->bos);
  cJSON *single = cJSON_CreateArray(), *pair = cJSON_CreateArray();
  bool ok = append(single, template_piece("SpecialToken", bos, 0)) && append(single, template_piece("Sequence", "A", 0));
  ok = append(pair, template_piece("SpecialToken", bos, 0)) && append(pair, template_piece("Sequence", "A", 0)) &&
       append(pair, template_piece("SpecialToken", bos, 1)) && append(pair, template_piece("Sequence", "B", 1)) && ok;
  cJSON *ids = cJSON_CreateArray(), *tokens = cJSON_CreateArray();
  ok = append(ids, cJSON_CreateNumber(t->bos)) && append(tokens, cJSON_CreateString(bos)) && ok;
  cJSON *entry = cJSON_CreateObject();
  ok = add_item(entry, "ids", ids) && add_item(entry, "tokens", tokens) && add_str(entry, "id", bos) && ok;
  cJSON *specials = cJSON_CreateObject();
  ok = add_item(specials, bos, entry) && ok;
  cJSON *p = cJSON_CreateObject();
  ok = add_item(p, "single", single) && ok;
  ok = add_item(p, "pair", pair) && ok;
  ok = add_item(p, "special_tokens", specials) && ok;
  return keep(p, ok && add_str(p, "type", "TemplateProcessing"));
}

static bool add_token_or_null(cJSON *o, const char *key, const rg_tokenizer *t, int32_t id) {
  return id >= 0 ? add_str(o, key, rg_tok_text(t, id)) : add_null(o, key);
}

static cJSON *tokenizer_config(const rg_tokenizer *t, const char *chat_template) {
  cJSON *c = cJSON_CreateObject(), *dec = cJSON_CreateObject();
  bool ok = add_item(c, "added_tokens_decoder", dec);
  for (int k = 0; k < t->n_added && ok; k++) {
    char key[16];
    snprintf(key, sizeof key, "%d", t->added[k]);
    ok = add_item(dec, key, added_token(t, t->added[k], false));
  }
  ok = ok && add_bool(c, "add_bos_token", t->add_bos && t->bos >= 0) && add_bool(c, "add_eos_token", false) &&
       add_token_or_null(c, "bos_token", t, t->bos) && add_token_or_null(c, "eos_token", t, t->eos) &&
       add_token_or_null(c, "pad_token", t, t->pad) && add_token_or_null(c, "unk_token", t, t->unk) &&
       add_bool(c, "clean_up_tokenization_spaces", false) &&
       (!chat_template || add_str(c, "chat_template", chat_template)) &&
       add_str(c, "tokenizer_class", "PreTrainedTokenizerFast");
  return keep(c, ok);
}

int rg_tokenizer_export(const rg_tokenizer *t, const char *chat_template, cJSON **tokenizer, cJSON **config) {
  *tokenizer = *config = NULL;
  if (t->kind != RG_TOK_BPE_BYTE)
    return rg_error_set("%s: only byte-level BPE tokenizers can be exported to tokenizer.json (this one is "
                        "SentencePiece)", t->source);
  cJSON *pre = pre_tokenizer(t);
  if (!pre) return -1;
  cJSON *normalizer = t->nfc ? cJSON_CreateObject() : cJSON_CreateNull();
  if (t->nfc) normalizer = keep(normalizer, normalizer && add_str(normalizer, "type", "NFC"));
  cJSON *root = cJSON_CreateObject();
  bool ok = add_item(root, "pre_tokenizer", pre);
  ok = add_item(root, "normalizer", normalizer) && ok;
  ok = add_item(root, "added_tokens", added_tokens(t)) && ok;
  ok = add_item(root, "post_processor", post_processor(t)) && ok;
  ok = add_item(root, "decoder", byte_level(true, true)) && ok;
  ok = add_item(root, "model", bpe_model(t)) && ok;
  ok = ok && add_str(root, "version", "1.0") && add_null(root, "truncation") && add_null(root, "padding");
  cJSON *cfg = ok ? tokenizer_config(t, chat_template) : NULL;
  if (!cfg) {
    cJSON_Delete(root);
    return rg_error_set("%s: out of memory exporting the tokenizer", t->source);
  }
  *tokenizer = root;
  *config = cfg;
  return 0;
}
