/* sp_plan.h: memory of a long-context training step per rank, and the
 * planner that picks the sequence-parallel degree and the recompute policy
 * for a sequence length (AutoSP's automation for a C trainer;
 * AutoSP, arXiv 2604.27089; the activation memory model of Korthikanti et al.
 * 2022, arXiv 2205.05198, for refgeo's buffers).
 *
 * The step: a full fine-tune (every weight trainable, AdamW) of a model on
 * one sequence of S tokens whose next tokens are all targets, split over SP
 * ranks (forward.h rg_session_opts.sp). A rank's memory is counted as
 * train_plan.h counts a run's: the trainer's own allocation steps (the
 * trainable float32 weights, the training session with its
 * sequence-parallel buffers, the gradients, the AdamW moments) run on a
 * plan backend (backend/plan.h) with a plan communicator of SP ranks
 * (comm.h), so every buffer is counted at the size a real step allocates;
 * to that come the session's host arrays, the loss arrays, the model
 * file's pages and the process's RSS before the model loaded.
 *
 * Recompute cost is the multiply-adds the backward repeats per step on one
 * rank (rg_recompute): FULL the block's projections and its attention
 * (about S/2 keys per query), MATMULS o_proj and the MLP projections. The
 * planner takes the plan of least recompute cost that fits the budget, the
 * fewest ranks among equals; it models no communication cost.
 */
#ifndef RG_ADV_FT_SP_PLAN_H
#define RG_ADV_FT_SP_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "engine/forward.h"
#include "model/model.h"

typedef struct {
  int length;             /* S, the sequence's tokens */
  int sp;                 /* ranks it is split over */
  rg_sp_mode mode;        /* RG_SP_ULYSSES or RG_SP_ALLGATHER (resolved) */
  rg_recompute recompute;
  size_t backend;         /* bytes on the backend: weights, session, gradients, moments */
  size_t host;            /* the session's host arrays, the step's loss arrays, the collectives' scratch */
  size_t file_map;        /* the model's tensors in the file map (every one is read once) */
  size_t baseline;        /* the process's RSS before the model loaded (given) */
  size_t total;           /* the sum: the predicted peak RSS of a rank */
  double recompute_macs;  /* multiply-adds recomputed per step per rank */
} rg_sp_plan;

/* The plan of one rank of a step of LENGTH tokens of M split over SP
 * ranks with attention MODE (RG_SP_AUTO resolved as a session resolves it)
 * and RECOMPUTE; BASELINE is the process's RSS before the model loaded.
 * Returns 0, or -1 with the error set (a mode the heads refuse, bad sizes). */
int rg_sp_plan_one(const rg_model *m, int length, int sp, rg_sp_mode mode, rg_recompute recompute, size_t baseline,
                   rg_sp_plan *out);

/* The plan for LENGTH tokens within BUDGET bytes per rank: SP degrees that
 * divide WORLD (attention RG_SP_AUTO) and the three recompute policies,
 * least recompute cost first. With OUT_ALL not NULL, every candidate is
 * written there too (at most 3 * WORLD, *n_all of them). Returns 0, or -1
 * with the error set when none fits (naming the smallest plan's size). */
int rg_sp_plan_choose(const rg_model *m, int length, double budget, int world, size_t baseline, rg_sp_plan *best,
                      rg_sp_plan *out_all, int *n_all);

/* One line per plan: length, ranks, attention, recompute, GiB, cost. */
void rg_sp_plan_print(const rg_sp_plan *p, FILE *out);

/* "none", "full", "matmuls" and back; -1 for an unknown name. */
const char *rg_recompute_name(rg_recompute r);
int rg_recompute_parse(const char *name);

#endif
