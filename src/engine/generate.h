/* generate.h: batched, KV-cached text generation on a session.
 *
 * Greedy decoding (temperature <= 0) picks the first largest logit, as
 * torch.argmax does. Sampling divides the logits by the temperature, keeps
 * the smallest set of most likely tokens whose probability reaches top_p
 * (Hugging Face's top-p rule), and draws with a per-sequence xoshiro256**
 * generator seeded from that sequence's seed, so a prompt's continuation
 * does not depend on which other prompts share its batch.
 *
 * Interventions and captures set on the session apply to every step.
 */
#ifndef RG_GENERATE_H
#define RG_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/forward.h"

typedef struct {
  int max_new_tokens;
  float temperature;      /* <= 0: greedy */
  float top_p;            /* in (0, 1]; 1 = no truncation */
  uint64_t seed;          /* sequence i uses seeds[i], or seed + i when seeds is NULL */
  const uint64_t *seeds;  /* optional, one per prompt */
  const int32_t *stop_ids; /* e.g. the tokenizer's EOS and the template's <|im_end|> */
  int n_stop;
} rg_gen_opts;

typedef struct {
  int32_t *ids;  /* malloc'd new tokens; a stop token that ended the sequence is not included */
  int n;
  bool stopped;  /* ended on a stop id (false: max_new_tokens or max_ctx reached) */
} rg_gen_result;

/* Generates continuations of prompts[0..n-1] (n <= max_seqs of the session;
 * sequences 0..n-1 are reset). out[i] receives prompt i's result. Returns
 * 0, or -1 with the error set (results are then freed and zeroed). */
int rg_generate(rg_session *s, const int32_t *const *prompts, const int *lens, int n, const rg_gen_opts *opts,
                rg_gen_result *out);
void rg_gen_results_free(rg_gen_result *r, int n);

/* Index of the first largest of n logits. */
int rg_argmax(const float *logits, int n);

#endif
