/* tokenizer_export.h: a tokenizer written back out as Hugging Face files.
 *
 * Used when a model is saved as a Hugging Face directory (hf_write.h), in
 * particular a GGUF model, whose tokenizer lives only in GGUF metadata.
 * Only byte-level BPE tokenizers (GPT-2 style: SmolLM2, Llama-3, Qwen2) can
 * be exported; SentencePiece ones are an error. The tokenizer.json holds:
 *   model          BPE: every id's text in vocab (an id whose text repeats a
 *                  lower id's is left out, as JSON keys must be unique), the
 *                  merges in rank order as "left right", ignore_merges;
 *   normalizer     NFC when the tokenizer normalizes (Qwen2), else null;
 *   pre_tokenizer  Sequence of one Split(Regex|String, behavior, invert)
 *                  per refgeo pre-tokenizer step, in order, then
 *                  ByteLevel(add_prefix_space=false, use_regex=false), which
 *                  only maps bytes: the splits already did the work
 *                  (tokenizers' ByteLevel splits with Isolated behavior, so
 *                  a ByteLevel(use_regex) step and its Split are the same);
 *   added_tokens   every added token (special or not) with normalized false,
 *                  as refgeo matches them in the raw text;
 *   post_processor TemplateProcessing [BOS, $A] when BOS is added, else
 *                  ByteLevel (adds nothing);
 *   decoder        ByteLevel.
 * tokenizer_config.json holds added_tokens_decoder, bos/eos/pad/unk token
 * texts, add_bos_token, the chat template (when given) and
 * tokenizer_class PreTrainedTokenizerFast, so that transformers builds the
 * tokenizer from tokenizer.json alone.
 *
 * Ownership: both trees are new and belong to the caller (cJSON_Delete).
 */
#ifndef RG_TOKENIZER_EXPORT_H
#define RG_TOKENIZER_EXPORT_H

#include <cjson/cJSON.h>

#include "tokenizer/tokenizer.h"

/* Builds the tokenizer.json (*TOKENIZER) and tokenizer_config.json (*CONFIG)
 * trees of T, with CHAT_TEMPLATE (may be NULL) in the config. Returns 0, or
 * -1 with the error set (a SentencePiece tokenizer, a ByteLevel prefix space
 * refgeo cannot express as a Split, out of memory). */
int rg_tokenizer_export(const rg_tokenizer *t, const char *chat_template, cJSON **tokenizer, cJSON **config);

#endif
