/* train_plan.h: the memory plan of an R2D2 run (`refgeo train --plan`).
 *
 * rg_trainer_plan (trainer.h) runs the trainer's own allocation steps (the
 * weights, made trainable or given LoRA adapters; the training session, the
 * GCG candidate session and the gradients; the AdamW moments) on a plan
 * backend (backend/plan.h), which allocates nothing and counts what
 * each step asks for, and reads each session's buffers by kind
 * (engine/session.h). The figures are therefore what a run of the
 * same config allocates, for a model of any size: a Hugging Face directory
 * with a config.json and no weights is planned from its shapes
 * (model/model_shapes.h).
 *
 * Devices:
 *  - cpu: the CPU backend's weight forms (RG_WEIGHTS_AUTO on this machine's
 *    RAM), and what the process's resident memory holds besides: the model
 *    file's pages (every tensor is read once), the trainer's and the
 *    sessions' host arrays, GCG's per-call host buffers, and the process's
 *    own RSS before the model loads (libraries, OpenMP, measured).
 *    Capacity: MemTotal of /proc/meminfo.
 *  - gpu:NG: what a device backend would hold in N GiB of device memory
 *    (backend/plan.h, "plan-gpu": frozen matrices in their file dtype,
 *    trainable weights float32); host arrays are listed but not counted
 *    against the device.
 * Buffers are counted at their full size: a batch shorter than its caps
 * touches less of them on the CPU (calloc'ed pages stay unmapped until
 * written), so a CPU run's resident memory can stay below the plan.
 */
#ifndef RG_ADV_FT_TRAIN_PLAN_H
#define RG_ADV_FT_TRAIN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "adv_ft/train_config.h"
#include "engine/backward.h"
#include "engine/session.h"
#include "engine/weights.h"

/* The plan backend's tags for the trainer's steps. */
enum { RG_PLAN_TAG_WEIGHTS, RG_PLAN_TAG_SESSIONS, RG_PLAN_TAG_OPTIMIZER };

typedef struct {
  /* the device (rg_train_plan_device) */
  char device[32];
  bool gpu;
  double capacity; /* bytes */
  /* the model */
  char model[256];
  bool shapes_only; /* planned from config.json alone */
  char mode[8];     /* "full" or "lora" */
  int n_layers;
  /* device (backend) memory */
  size_t frozen;    /* weights that are not parameters: LoRA's base; 0 in full mode */
  size_t params;    /* the trainable parameters (float32) */
  size_t weights_other; /* RoPE frequencies, the CPU's dequantization tiles */
  size_t grads;
  size_t moments;   /* AdamW m and v */
  rg_session_bytes train, cand; /* cand all 0 without GCG */
  rg_session_bytes gcg_grad;    /* with sequence parallelism: GCG's own token-gradient session (else all 0) */
  int sp;                       /* ranks a micro-batch is split over: the figures are one rank's */
  int ranks;                    /* all ranks (mpirun -np; set before planning; <= sp: one group of sp) */
  int zero;                     /* the ZeRO stage planned; its shards are of ranks / sp data-parallel groups */
  size_t zero_buffers;          /* ZeRO's gradient shard and bucket staging (zero.h) */
  int recompute;                /* the recompute policy planned (rg_recompute) */
  size_t backend_total;
  /* host memory */
  size_t host_sessions; /* both sessions' host arrays */
  size_t host_trainer;  /* the trainer's batch arrays, loss scratch, disallowed-token mask */
  size_t host_gcg;      /* GCG's per-call buffers (gcg.c) */
  size_t host_comm;     /* sequence parallelism: MPI's scratch for one all-reduce piece (comm.h) */
  size_t file_map;      /* the model's tensors in the file map (cpu) */
  size_t baseline;      /* this process's RSS before the model loaded (cpu) */
  size_t total;         /* what is counted against capacity */
  /* consistency: what the plan backend counted per step */
  size_t counted[3];
} rg_train_plan;

/* Parses DEVICE ("cpu", "gpu:80G", "gpu:141G": N GiB) into P's device
 * fields. Returns 0 or -1 with the error set. */
int rg_train_plan_device(rg_train_plan *p, const char *device);

/* The model at PATH for planning: a Hugging Face directory with config.json
 * but no safetensors is loaded as shapes (p->shapes_only), anything else
 * with rg_model_load. Sets p->model, and p->baseline on the cpu (measured
 * first). NULL with the error set. */
rg_model *rg_train_plan_model(rg_train_plan *p, const char *path);

/* Fills P's figures from the trainer's opened objects (on a plan backend;
 * CAND and GCG_GRAD may be NULL). Returns 0 or -1 with the error set. */
int rg_train_plan_fill(rg_train_plan *p, const rg_train_config *c, rg_weights *w, const rg_session *train,
                       const rg_session *cand, const rg_session *gcg_grad, const rg_grads *g);

/* The plan as a table (or one JSON object) on OUT. */
void rg_train_plan_print(const rg_train_plan *p, FILE *out, bool json);

#endif
