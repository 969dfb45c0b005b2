/* tokenizer_internal.h: the tokenizer's data, shared by its source files.
 *
 *   tokenizer.c         vocabulary tables, lookups, decoding
 *   tokenizer_encode.c  encoding: added-token matching, then each run's words
 *   tokenizer_bpe.c     the merge loop (by merge rank or by piece score)
 *   tokenizer_pretok.c  UTF-8 repair, regex pre-tokenizer, GPT-2 byte map
 *   tokenizer_gguf.c    building from GGUF metadata (tokenizer.ggml.*)
 *   tokenizer_json.c    building from tokenizer.json (+ tokenizer_config.json)
 *   tokenizer_bytes.c   a byte-level BPE without merges, made in memory
 *   tokenizer_export.c  writing a byte-level BPE back out as tokenizer.json
 *
 * A built rg_tokenizer is immutable; encode/decode keep their scratch memory
 * per call, so one tokenizer can be used from several threads at once.
 */
#ifndef RG_TOKENIZER_INTERNAL_H
#define RG_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* ---- open-addressing hash maps (capacity a power of two, -1 = empty) ---- */

typedef struct {
  int32_t *slots; /* token ids */
  uint32_t mask;
} rg_strmap;

typedef struct {
  uint64_t *keys; /* (left id << 32) | right id */
  int32_t *vals;  /* index into the merge table */
  uint32_t mask;
} rg_pairmap;

/* ---- pre-tokenizer steps, applied in order to every piece ---- */

/* Hugging Face's SplitDelimiterBehavior (tokenizers normalizer.rs). */
typedef enum {
  RG_SPLIT_ISOLATED,        /* matches and the text between become pieces */
  RG_SPLIT_REMOVED,         /* matches are dropped */
  RG_SPLIT_MERGED_PREVIOUS, /* a match ends the piece before it */
  RG_SPLIT_MERGED_NEXT,     /* a match starts the piece after it */
  RG_SPLIT_CONTIGUOUS       /* adjacent matches form one piece */
} rg_split_behavior;

typedef struct {
  pcre2_code *re;
  rg_split_behavior behavior;
  bool prefix_space; /* ByteLevel(add_prefix_space): " " before a piece not starting with one */
  bool invert;       /* Split(invert): the text between matches counts as the match */
  /* The source of re (NULL when re is), kept so that the tokenizer can be
   * written back out as tokenizer.json (tokenizer_export.c). */
  char *pattern;
  bool literal; /* pattern is a plain string, not a regex */
} rg_pretok_step;

/* How SentencePiece-style tokenizers add the U+2581 prefix. */
typedef enum {
  RG_PREFIX_NONE,
  RG_PREFIX_EVERY_SEGMENT, /* llama.cpp / HF Prepend normalizer: each text run between added tokens */
  RG_PREFIX_FIRST          /* HF Metaspace prepend_scheme "first": only the run at offset 0 */
} rg_prefix_mode;

typedef struct {
  int32_t left, right, merged;
} rg_merge;

struct rg_tokenizer {
  rg_tokenizer_kind kind;
  char *source; /* file name used in error messages */

  int n_vocab;
  /* Every token's text, NUL-terminated, in one block (a vocabulary is tens
   * of thousands of short strings: one allocation instead of one each).
   * Token id's text is texts + text_off[id], len[id] bytes long; offset 0
   * holds "", the text of an unused id. */
  char *texts;
  size_t texts_len, texts_cap;
  size_t *text_off;
  int *len;
  float *score;  /* SentencePiece piece scores, NULL when merging by rank */
  bool *special; /* control/unknown tokens and special added tokens */
  rg_strmap vocab;

  rg_merge *merges; /* rank = index */
  int n_merges;
  rg_pairmap pairs;

  int32_t *added; /* ids of the added tokens, matched longest-first in raw text;
                   * special ones (special[id]) only with parse_special */
  int n_added;

  rg_pretok_step *steps;
  int n_steps;

  /* BPE options (HF model fields). */
  bool ignore_merges; /* a piece that is itself a token is not merged (Llama-3) */
  bool byte_fallback; /* unknown characters become <0xXX> tokens */
  bool fuse_unk;
  int32_t unk;
  int32_t byte_token[256]; /* id of <0xXX>, -1 if absent */

  /* Normalizer NFC (Qwen2's tokenizer.json; llama.cpp skips it): each run of
   * text between added tokens is put in Unicode NFC before pre-tokenizing. */
  bool nfc;

  /* SentencePiece options. */
  rg_prefix_mode prefix;
  bool prefix_unless_space; /* Metaspace: no prefix if the run already starts with one */
  bool strip_decoded_space; /* decoder drops one leading space (HF Strip / llama.cpp) */

  int32_t bos, eos, pad;
  bool add_bos;
};

/* ---- tokenizer.c: construction helpers for the loaders ---- */

/* Allocates an empty tokenizer of N_VOCAB ids (texts "", no specials). */
rg_tokenizer *rg_tok_alloc(rg_tokenizer_kind kind, const char *source, int n_vocab);
/* Sets token ID's text (copied). -1 with the error set on a bad id or no memory. */
int rg_tok_set_text(rg_tokenizer *t, int32_t id, const char *text, size_t len);
/* Token ID's text (ID in range). */
static inline const char *rg_tok_text(const rg_tokenizer *t, int32_t id) { return t->texts + t->text_off[id]; }
/* Builds the text->id map; duplicates keep the lowest id. After all texts. */
int rg_tok_index_vocab(rg_tokenizer *t);
/* Id of the token whose text is the LEN bytes at S, or -1. */
int32_t rg_tok_find(const rg_tokenizer *t, const char *s, size_t len);
/* Adds merge (rank = call order) of two token texts; the error names merge
 * number RANK when either side or their concatenation is not a token. */
int rg_tok_add_merge(rg_tokenizer *t, const char *left, size_t left_len, const char *right, size_t right_len);
/* Builds the pair map after all merges are added. */
int rg_tok_index_merges(rg_tokenizer *t);
/* Registers an added token matched in raw text; a SPECIAL one needs
 * parse_special to be matched and is dropped by skip_special. */
int rg_tok_add_added(rg_tokenizer *t, int32_t id, bool special);
/* Fills byte_token[] from "<0xXX>" texts. */
void rg_tok_find_byte_tokens(rg_tokenizer *t);
/* Appends a pre-tokenizer regex step (PCRE2 UTF+UCP, JIT when available). */
int rg_tok_add_regex(rg_tokenizer *t, const char *pattern, size_t len, bool literal, rg_split_behavior behavior,
                     bool prefix_space);

/* ---- tokenizer_pretok.c ---- */

/* Replaces invalid UTF-8 by U+FFFD exactly as Python's
 * bytes.decode('utf-8', errors='replace') does (one U+FFFD per maximal
 * subpart of an ill-formed sequence, Unicode 3.9 / W3C practice). Returns a
 * malloc'd NUL-terminated copy and its length in *out_len, or NULL. */
char *rg_utf8_repair(const char *s, size_t len, size_t *out_len);

/* A list of pieces: spans of one growing text buffer. */
typedef struct {
  char *buf;
  size_t buf_len, buf_cap;
  size_t *off, *len;
  int n, cap;
} rg_pieces;

void rg_pieces_free(rg_pieces *p);
/* Appends LEN bytes of S as a new piece (optionally after a prefix). */
int rg_pieces_push(rg_pieces *p, const char *prefix, size_t prefix_len, const char *s, size_t len);
/* Runs the tokenizer's pre-tokenizer steps over S; the result replaces *OUT. */
int rg_pretokenize(const rg_tokenizer *t, const char *s, size_t len, rg_pieces *out);

/* GPT-2 byte-level map: byte -> code point, and code point -> byte (-1). */
uint32_t rg_byte_to_cp(uint8_t b);
int rg_cp_to_byte(uint32_t cp);
/* Encodes CP as UTF-8 into OUT (4 bytes room); returns the length. */
int rg_utf8_put(uint32_t cp, char *out);
/* Decodes one code point of valid UTF-8 at S (n bytes left); returns its
 * length and stores the code point. */
int rg_utf8_get(const char *s, size_t n, uint32_t *cp);

/* ---- tokenizer_bpe.c ---- */

/* Growable id output. */
typedef struct {
  int32_t *ids;
  int n, cap;
} rg_idbuf;

int rg_idbuf_push(rg_idbuf *b, int32_t id);

/* Tokenizes one pre-tokenized WORD (already byte-mapped / with U+2581) and
 * appends its ids. Merges by rank when t->merges is set, else by piece score. */
int rg_bpe_word(const rg_tokenizer *t, const char *word, size_t len, rg_idbuf *out);

#endif
