/* test_case.h: a GCG test case as token ids, the layout GCG optimizes and
 * R2D2 trains on:
 *
 *     before | behavior | suffix | after | target
 *
 * before and after are the chat template's text around a one-turn user
 * instruction (rg_prompt_frame), the suffix the adversarial tokens, the
 * target the completion the loss is about. Each piece is tokenized on its
 * own, as HarmBench does (baselines/gcg/gcg.py; adversarial_training/
 * alignment-handbook/scripts/adv_training_utils.py:1158-1195, "ATU"), so a
 * suffix edit never re-tokenizes its neighbours; BOS goes before `before`
 * when the template wants one (rg_prompt_wants_bos).
 *
 * Ownership: rg_test_case_seq.ids is malloc'd, freed by
 * rg_test_case_seq_free; everything else is borrowed.
 */
#ifndef RG_ADV_FT_TEST_CASE_H
#define RG_ADV_FT_TEST_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
  const char *before, *after; /* rg_prompt_frame's pieces */
  bool add_bos;
} rg_test_case_frame;

typedef struct {
  int32_t *ids;
  int n;
  int suffix_start, n_suffix;
  int target_start; /* the target is ids[target_start .. n) */
} rg_test_case_seq;

/* Lays out BEHAVIOR, the n_suffix tokens SUFFIX, and TARGET (followed by the
 * tokenizer's EOS when append_eos) in F's frame. Returns 0, or -1 with the
 * error set (out of memory, a tokenizer without EOS). */
int rg_test_case_build(const rg_model *m, const rg_test_case_frame *f, const char *behavior, const int32_t *suffix,
                       int n_suffix, const char *target, bool append_eos, rg_test_case_seq *out);
void rg_test_case_seq_free(rg_test_case_seq *s);

/* The tokens of TEXT without special tokens (a suffix's initial "! ! !"),
 * malloc'd into *ids[*n]. Returns 0 or -1. */
int rg_test_case_tokens(const rg_model *m, const char *text, int32_t **ids, int *n);

#endif
