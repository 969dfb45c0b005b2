/* tokenizer.h: byte-level BPE and SentencePiece-style BPE tokenizers.
 *
 * Built from GGUF metadata (tokenizer.ggml.*) or from a Hugging Face
 * tokenizer.json (+ tokenizer_config.json). Two algorithms:
 *  - RG_TOK_BPE_BYTE: GPT-2 byte-level BPE; text is split by the model's
 *    pre-tokenizer regexes (run with PCRE2 in UTF mode), bytes are mapped to
 *    printable code points, then ranked merges are applied (GPT-2, SmolLM2,
 *    Llama-3, Qwen2).
 *  - RG_TOK_BPE_SPM: SentencePiece BPE; spaces become U+2581, a prefix space
 *    is added, pieces are merged by score, unknown characters fall back to
 *    <0xXX> byte tokens (Llama-2, Mistral, Zephyr).
 * Added/special tokens are matched in the raw text first (when parse_special
 * is set), as Hugging Face tokenizers do.
 *
 * Ownership: rg_tokenize returns a malloc'd id array; rg_detokenize returns a
 * malloc'd string; the caller frees both.
 */
#ifndef RG_TOKENIZER_H
#define RG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rg_tokenizer rg_tokenizer;
typedef struct rg_gguf rg_gguf;

typedef enum { RG_TOK_BPE_BYTE = 1, RG_TOK_BPE_SPM = 2 } rg_tokenizer_kind;

rg_tokenizer *rg_tokenizer_from_gguf(const rg_gguf *g);
/* TOKENIZER_CONFIG may be NULL. Every id in the file must lie below the
 * number of entries the file's size allows, checked before any table is
 * sized; the _for_model form also requires ids below MODEL_VOCAB (the
 * model's embedding rows; <= 0: no model to check against). */
rg_tokenizer *rg_tokenizer_from_json(const char *tokenizer_json, const char *tokenizer_config);
rg_tokenizer *rg_tokenizer_from_json_for_model(const char *tokenizer_json, const char *tokenizer_config,
                                               int model_vocab);
/* A byte-level BPE tokenizer without merges, the stand-in of a synthetic
 * model (`refgeo synth-model`): ids 0-255 are the bytes as GPT-2's
 * bytes_to_unicode writes them, then the N_SPECIALS SPECIALS (special added
 * tokens), then "<|unused_K|>" up to VOCAB_SIZE; EOS is the end-of-sequence
 * id (-1: none). Every text encodes to its bytes. NULL with the error set
 * (a vocabulary too small for the bytes and specials, out of memory). */
rg_tokenizer *rg_tokenizer_bytes_new(int vocab_size, const char *const *specials, int n_specials, int eos);
void rg_tokenizer_free(rg_tokenizer *t);

rg_tokenizer_kind rg_tokenizer_kind_of(const rg_tokenizer *t);
int rg_tokenizer_vocab_size(const rg_tokenizer *t);

/* Encodes LEN bytes of TEXT (any bytes; invalid UTF-8 is handled as the
 * reference tokenizers do). parse_special: recognise added/special token
 * text. add_bos: prepend BOS when the tokenizer is configured to add one.
 * Returns 0 and a malloc'd array in *ids, or -1 with the error set.
 *
 * Details (tested against Hugging Face tokenizers and sentencepiece):
 *  - Invalid UTF-8: every maximal ill-formed subpart is first replaced by
 *    U+FFFD, exactly as Python's bytes.decode('utf-8', errors='replace'), and
 *    the result is tokenized (a Python reference can only see that string).
 *  - Added tokens are matched leftmost-longest in the raw text. Special ones
 *    (tokenizer.json "special": true; GGUF control/unknown types) only when
 *    parse_special is set; the others (GGUF user-defined) always. lstrip /
 *    rstrip / single_word flags of tokenizer.json are not implemented.
 *  - SentencePiece prefix space: added to each run of text between added
 *    tokens (llama.cpp, HF Prepend normalizer), or only to the run at offset 0
 *    (HF Metaspace prepend_scheme "first"). */
int rg_tokenize(const rg_tokenizer *t, const char *text, size_t len, bool parse_special, bool add_bos,
                int32_t **ids, int *n_ids);

/* Decodes ids to a malloc'd UTF-8 string; special tokens are dropped when
 * skip_special is set. NULL with the error set on an out-of-range id.
 * Byte sequences that do not form valid UTF-8 (e.g. half of a character's
 * byte tokens) are replaced by U+FFFD as on encoding. A NUL byte ends the
 * returned C string. SentencePiece decoding drops one leading space when the
 * tokenizer adds the prefix space. */
char *rg_detokenize(const rg_tokenizer *t, const int32_t *ids, int n_ids, bool skip_special);

/* The text of one token as stored in the vocabulary (not decoded); NULL if
 * out of range. */
const char *rg_token_text(const rg_tokenizer *t, int32_t id);
/* Id of a token given its vocabulary text, or -1. */
int32_t rg_token_lookup(const rg_tokenizer *t, const char *text);
bool rg_token_is_special(const rg_tokenizer *t, int32_t id);

int32_t rg_tokenizer_bos(const rg_tokenizer *t); /* -1 if none */
int32_t rg_tokenizer_eos(const rg_tokenizer *t); /* -1 if none */
int32_t rg_tokenizer_pad(const rg_tokenizer *t); /* -1 if none */
int32_t rg_tokenizer_unk(const rg_tokenizer *t); /* -1 if none */
/* Whether encoding with add_bos=true prepends BOS (tokenizer.ggml.add_bos_token
 * / the post-processor of tokenizer.json). */
bool rg_tokenizer_adds_bos(const rg_tokenizer *t);

#endif
