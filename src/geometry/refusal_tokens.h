/* refusal_tokens.h: the refusal score's tokens fitted to a checkpoint.
 *
 * refusal_direction scores refusal by the probability of fixed first
 * tokens ("I" for Llama-style chat models). A checkpoint whose refusals
 * open otherwise ("Sorry, I can't do that." after R2D2's toward loss,
 * Qwen's "I'm sorry" against "As an AI") needs its own. The fit: among the
 * checkpoint's greedy replies that a refusal judge calls refusals, count
 * the first generated tokens, and take the most frequent ones (ties: the
 * smaller id first) until they open at least COVERAGE of those refusals.
 * A token that opens at least as many replies judged answers as refusals
 * is passed over: the judge's substrings also match some answers ("I must
 * warn you ... Here is"), and their openings would score compliance as
 * refusal.
 */
#ifndef RG_GEOMETRY_REFUSAL_TOKENS_H
#define RG_GEOMETRY_REFUSAL_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

/* FIRST[n] are the replies' first tokens (-1: the reply was empty),
 * REFUSED[n] the judge's verdicts. Writes the chosen ids into ids[max_ids]
 * and returns their count: 0 when no refusal has an eligible first token,
 * -1 with the error set when out of memory. At most MAX_IDS are taken: the
 * coverage is then what they reach, below COVERAGE (the step's tables
 * report it, and the score's AUROC shows what it costs). *COVERED gets the
 * share of refusals the chosen tokens open (NaN for 0). */
int rg_refusal_tokens_fit(const int32_t *first, const bool *refused, int n, double coverage, int32_t *ids,
                          int max_ids, double *covered);

/* The most common opening among the refused replies: OPENING[n * K] holds
 * each reply's first K tokens (-1 past its end). Copies the opening shared
 * by the most refusals (ties: the first reply's) into ids[K] and returns its
 * length: 0 when no refusal has a first token. */
int rg_refusal_opening_fit(const int32_t *opening, int k, const bool *refused, int n, int32_t *ids);

#endif
