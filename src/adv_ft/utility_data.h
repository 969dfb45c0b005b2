/* utility_data.h: the utility (SFT) examples of R2D2 training, the clean
 * loss's data (HarmBench 8e1604d trains on UltraChat; the project's R2D2
 * notes 1.3 and 1.10).
 *
 * An example is one conversation rendered with the model's chat template
 * and tokenized: ids[0..n) and label_from, meaning rows r in
 * [label_from, n-1) are supervised, row r predicting ids[r+1]. Sources:
 *  - rg_utility_from_jsonl: a JSONL file, one conversation per line,
 *    {"messages": [{"role": "system"|"user"|"assistant", "content": str},
 *    ...]} (UltraChat's and TRL's chat format; other keys are ignored).
 *  - rg_utility_from_completions: prompts (data/prompts/harmless_train.json
 *    by default) paired with the model's own greedy replies, generated once
 *    and cached as such a JSONL file.
 *
 * Rendering and tokens: the conversation is rendered as given by the
 * template (rg_chat_render, no generation prompt; a template's default
 * system turn, like SmolLM2's, is inserted as the template does) and
 * tokenized with special-token text parsed and BOS by prompt_encode.h's
 * rule (the tokenizer's BOS unless the template writes its own), so the
 * ids are transformers' apply_chat_template(messages, tokenize=True) (plus
 * the BOS that TRL's add_special_tokens=True adds for a Llama/Mistral
 * tokenizer). Decisions, against HarmBench's recipe:
 *  - No empty system message is inserted (HarmBench's alignment-handbook
 *    does, data.py:35-42): a file that wants one has it in its messages.
 *  - No packing by default: each example is its own sequence of the ragged
 *    batch, where TRL packs the stream into 2048-token chunks with no
 *    attention boundary between conversations (notes 1.10). Packing only
 *    saves pad compute, which a padding-free batch (forward.h) does not
 *    spend, and it lets a conversation attend to the one before it.
 *    rg_utility_pack packs as TRL does, for fidelity or for long-context
 *    training (the trainer's utility_packing).
 *  - No extra EOS after the conversation (TRL's packing appends one as a
 *    document separator); the template's own end of turn closes it.
 *  - Conversations must end with an assistant message (the reply to learn)
 *    and hold at least one message before it.
 *
 * Labels (rg_utility_labels, passed by the trainer):
 *  - RG_UTILITY_LABELS_ASSISTANT (the default, 0): supervised from the first
 *    token of the LAST assistant reply to the end (the reply and the
 *    template's end of turn): label_from + 1 is that token's index. With
 *    one label start per example, earlier turns of a multi-turn
 *    conversation are context only, so that only assistant text is ever
 *    supervised. For a small model trained on a few hundred examples,
 *    supervising the prompts teaches it to write prompts; this is refgeo's
 *    default for its own small configurations.
 *  - RG_UTILITY_LABELS_ALL: every token after the first (label_from = 0):
 *    HarmBench's SFT labels (TRL 0.7.4 packing: labels = input_ids, notes
 *    1.10), for fidelity to the recipe.
 * The reply starts at the first token where the conversation's ids leave
 * those of its prompt (the messages before the last, rendered with the
 * generation prompt); a token straddling the boundary counts as reply.
 *
 * Length: an example longer than max_len tokens is cut to max_len; one
 * whose prompt leaves no room for a reply token (first reply token index
 * >= max_len) is skipped and counted (rg_utility_skipped), in both label
 * modes, so that both give the same examples.
 *
 * Ownership (cJSON-style): a set owns its examples and their ids; the
 * pointers rg_utility_get returns live until rg_utility_free.
 */
#ifndef RG_UTILITY_DATA_H
#define RG_UTILITY_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tokenizer/chat_template.h"
#include "model/model.h"
#include "engine/weights.h"

typedef enum {
  RG_UTILITY_LABELS_ASSISTANT = 0, /* the last assistant reply and its end of turn */
  RG_UTILITY_LABELS_ALL            /* every token (HarmBench / TRL packing) */
} rg_utility_labels;

typedef struct {
  int32_t *ids;
  int n;          /* >= 2 */
  int label_from; /* rows [label_from, n-1) are supervised, row r predicting ids[r+1] */
} rg_utility_example;

typedef struct rg_utility_set rg_utility_set;

/* The conversations of the JSONL file PATH rendered with T on M's
 * tokenizer (max_len >= 2). Blank lines are skipped. NULL with the error
 * set: an unreadable file, "PATH line N: not valid JSON at byte K", a line
 * that is not a conversation as above (named by its line), a conversation
 * the template cannot render, or a file without a usable example. */
rg_utility_set *rg_utility_from_jsonl(const rg_model *m, const rg_chat_template *t, const char *path, int max_len,
                                      rg_utility_labels labels);

typedef struct {
  const char *prompts_path;   /* a prompt set (capture/prompts.h), e.g. data/prompts/harmless_train.json */
  int max_prompts;            /* the first N prompts of the set; <= 0: all */
  int max_new_tokens;         /* greedy tokens per reply, > 0 (e.g. 64) */
  int batch;                  /* prompts generated together; <= 0: 8 */
  const char *cache_path;     /* the JSONL cache, e.g. RUN_DIR/utility.jsonl */
  int max_len;                /* as rg_utility_from_jsonl */
  rg_utility_labels labels;
  FILE *progress;             /* a progress line while generating (util/progress.h); NULL: none */
} rg_utility_completions_opts;

/* Utility examples from the model's own greedy replies. If O->cache_path
 * exists it is read (rg_utility_from_jsonl) as it is, whatever prompts or
 * options made it (delete it to regenerate). Otherwise the first
 * max_prompts prompts are rendered as one user turn with the generation
 * prompt (prompt_encode.h's rule, as `refgeo generate --chat` does), W's
 * model replies greedily on its own session of O->batch sequences, stopping
 * at the template's stop ids (rg_prompt_stop_ids), and each (prompt, reply
 * text with special tokens skipped) is written as a {"messages": [user,
 * assistant]} line to the cache atomically (rg_atomic_open), then read back
 * like any JSONL file: the examples are exactly the cache's. A reply cut at
 * max_new_tokens is closed by the template like any other, so its end of
 * turn is supervised where the model had not ended it.
 *
 * The replies come from W's current values: call this before training
 * changes them (the trainer does so at the start of a run, and a resumed
 * run reads the cache). *GENERATED (may be NULL) tells whether the replies
 * were generated now. NULL with the error set. */
rg_utility_set *rg_utility_from_completions(const rg_weights *w, const rg_chat_template *t,
                                            const rg_utility_completions_opts *o, bool *generated);

/* U's examples packed into sequences of exactly LEN tokens, as TRL 0.7.4's
 * ConstantLengthDataset packs HarmBench's SFT data (notes 1.10): every
 * example in order followed by SEP (the tokenizer's EOS, TRL's
 * concat_token_id), the stream cut every LEN tokens, the last partial
 * sequence dropped. Every token is supervised (label_from = 0, the labels
 * of RG_UTILITY_LABELS_ALL), and a conversation attends to the one before
 * it in its sequence, as in TRL. TRL cuts each buffer of texts it
 * tokenizes (about LEN * 3.6 * 1024 characters) and drops each buffer's
 * remainder; this packs the whole set as one stream. U is left as it is.
 * NULL with the error set: LEN < 2, fewer tokens than one sequence, out of
 * memory. */
rg_utility_set *rg_utility_pack(const rg_utility_set *u, int len, int32_t sep);

int rg_utility_count(const rg_utility_set *u);
/* Example I (0 <= i < count), owned by the set. */
const rg_utility_example *rg_utility_get(const rg_utility_set *u, int i);
/* Conversations left out because their prompt alone reaches max_len. */
int rg_utility_skipped(const rg_utility_set *u);
void rg_utility_free(rg_utility_set *u);

#endif
