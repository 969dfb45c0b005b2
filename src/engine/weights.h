/* weights.h: a model's weights prepared for one backend, shared by sessions.
 *
 * rg_weights_new prepares every tensor of a loaded model once for a backend
 * (rg_backend_weight), and the RoPE frequencies as a backend buffer. Any
 * number of sessions (forward.h) compute with one rg_weights, so a model is
 * held once whether one inference session uses it or a training session,
 * an attack's gradient session and its candidate session run side by side.
 *
 * Weights change only through this object, and sessions hold pointers to
 * its prepared weights, not copies, so every session sees a change as soon
 * as it is made: rg_weights_make_trainable turns every parameter into a
 * writable float32 copy in backend memory in place, and the optimizer
 * (adv_ft/optimizer.h) updates those with backend operations. The model
 * itself is never modified.
 *
 * LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
 * Models", as Hugging Face peft's LoraLayer computes it): rg_weights_add_lora
 * gives chosen linear modules of every block a rank-r adapter, so that the
 * module computes y = x W^T (+ bias) + (alpha / r) (x A^T) B^T with A
 * [r, in] and B [out, r] in float32 on the backend. The parameters then are
 * the adapters only; the base weights stay frozen in the form they were
 * prepared in (a tiled bf16 or quantized matrix stays so: what makes 7B
 * adapters fit), get no gradients, and every session on the weights
 * (training, attack, inference) computes the adapted model. Checkpoints
 * export the merged W + (alpha / r) B A (rg_weights_export_download).
 *
 * Layout: a GGUF llama model keeps q_proj and k_proj rows permuted for
 * adjacent-pair RoPE (model_gguf.c); lora_B of those modules has its rows
 * in that same order (peft's, for the Hugging Face layout, is the
 * un-permuted one; the merged export is un-permuted with the base).
 *
 * Ownership: the weights borrow the model (it must outlive them) and the
 * backend given to rg_weights_new (rg_weights_open's is theirs); free every
 * session made from them first.
 */
#ifndef RG_WEIGHTS_H
#define RG_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/model.h"

typedef struct rg_weights rg_weights;

/* How non-f32 matrices are kept (backend.h, rg_weight_form). */
typedef enum {
  RG_WEIGHTS_AUTO = 0, /* float32 when the model's f32 matrices take < 25% of RAM */
  RG_WEIGHTS_TILED,    /* the file dtype, dequantized in tiles by each matmul; matmuls of
                        * <= 16 rows read the file's blocks directly (backend/cpu/skinny.c).
                        * What decode-bound callers (generate, asr) take: a decode step
                        * then reads the file's bytes, and the process stays near the
                        * file's size instead of an f32 copy 4-6x larger. */
  RG_WEIGHTS_TILED_Q8, /* RG_WEIGHTS_TILED, with the products on 8-bit activations and
                        * integer dot products where the CPU has them
                        * (backend/cpu/q8/q8.c; llama.cpp's arithmetic; float32, f16
                        * and bf16 matrices through a q8_0 copy): what generate
                        * and asr take with --fast-decode. */
  RG_WEIGHTS_F32       /* always float32 */
} rg_weight_mode;

/* Checks M's configuration and tensor shapes and prepares them on BE. NULL
 * with the error set. */
rg_weights *rg_weights_new(const rg_model *m, rg_backend *be, rg_weight_mode mode);
/* The common case: a backend made from BO (rg_backend_new) and M's weights
 * prepared on it, owned together (rg_weights_free frees the backend too). */
rg_weights *rg_weights_open(const rg_model *m, const rg_backend_opts *bo, rg_weight_mode mode);
void rg_weights_free(rg_weights *w);

const rg_model *rg_weights_model(const rg_weights *w);
rg_backend *rg_weights_backend(const rg_weights *w);
/* Bytes of backend memory the weights hold beyond the file maps. */
size_t rg_weights_bytes(const rg_weights *w);

/* Makes every parameter a writable float32 copy in backend memory (what an
 * optimizer updates), in place: sessions made earlier compute with the
 * copies from their next call. Idempotent (and a no-op after
 * rg_weights_add_lora: the adapters are float32 already). Returns 0, or -1
 * with the error set (out of memory; the parameters converted so far stay
 * converted). */
int rg_weights_make_trainable(rg_weights *w);
bool rg_weights_trainable(const rg_weights *w);

/* The parameters. Without adapters: the model's tensors, one per distinct
 * tensor (a tied head is the embedding), in a fixed order: per block
 * attn_norm, q, k, v, o, [q, k, v biases], ffn_norm, gate, up, down; then
 * the embedding, the final norm and an untied lm_head. After
 * rg_weights_add_lora: the adapters only, per block in module order (q k v
 * o gate up down) A then B of each adapted module, named as peft's state
 * dict names them without its "base_model.model." prefix
 * ("model.layers.0.self_attn.q_proj.lora_A.weight"; their tensors' data is
 * NULL, the values are on the backend). rg_tensor_nelems(tensor) floats
 * each. */
int rg_weights_count(const rg_weights *w);
const rg_tensor *rg_weights_tensor(const rg_weights *w, int i);
rg_bweight *rg_weights_param(rg_weights *w, int i);
/* The transformer block parameter i belongs to (0 .. n_layers - 1), or -1
 * for the embedding, the final norm and an untied head. */
int rg_weights_param_block(const rg_weights *w, int i);
/* Parameter i's current values as float32 into out[nelems]. Returns 0 or -1. */
int rg_weights_download(const rg_weights *w, int i, float *out);
/* Sets parameter i of trainable weights to in[nelems] (a run resumed from
 * its saved state). Returns 0, or -1 with the error set. */
int rg_weights_upload(rg_weights *w, int i, const float *in);

/* The model's tensors, in the order of the parameters without adapters,
 * with their current values: what a checkpoint writes (hf_write.h). Equal
 * to the parameter list without adapters; with them, an adapted module's
 * weight is downloaded merged, W + (alpha / r) B A (computed in float32). */
int rg_weights_export_count(const rg_weights *w);
const rg_tensor *rg_weights_export_tensor(const rg_weights *w, int i);
int rg_weights_export_download(const rg_weights *w, int i, float *out);

/* ---------------------------------------------------------------- LoRA */

/* The modules an adapter can be put on (rg_lora_opts.targets). */
enum {
  RG_LORA_Q = 1u << 0,    /* self_attn.q_proj */
  RG_LORA_K = 1u << 1,    /* self_attn.k_proj */
  RG_LORA_V = 1u << 2,    /* self_attn.v_proj */
  RG_LORA_O = 1u << 3,    /* self_attn.o_proj */
  RG_LORA_GATE = 1u << 4, /* mlp.gate_proj */
  RG_LORA_UP = 1u << 5,   /* mlp.up_proj */
  RG_LORA_DOWN = 1u << 6  /* mlp.down_proj */
};

typedef struct {
  int rank;         /* r >= 1 */
  float alpha;      /* the output is scaled by alpha / r (peft's lora_alpha) */
  unsigned targets; /* RG_LORA_* bits */
} rg_lora_opts;

/* Parses a comma-separated module list ("q,k,v,o", or peft's names
 * "q_proj,v_proj"; gate, up, down likewise) into RG_LORA_* bits. Returns
 * 0, or -1 with the error set naming an unknown or empty entry. */
int rg_lora_targets_parse(const char *list, unsigned *out);

/* Puts a rank-o->rank adapter on the o->targets modules of every block,
 * initialised as peft does: A uniform in [-1/sqrt(in), 1/sqrt(in)] (torch's
 * kaiming_uniform_ with a = sqrt(5)), drawn from a splitmix64 stream
 * seeded with SEED (refgeo's own draws, not torch's), and B zero, so the
 * adapted model starts equal to the base. Afterwards the weights are
 * trainable (rg_weights_trainable) with the adapters as parameters (see
 * above). Make sessions after this call: a session made before it fails
 * its next pass (its scratch has no room for the adapters). Returns 0, or
 * -1 with the error set (weights already trainable or adapted, rank < 1,
 * no targets, out of memory; the weights are then unchanged). */
int rg_weights_add_lora(rg_weights *w, const rg_lora_opts *o, uint64_t seed);
/* The adapters' rank, 0 without adapters. */
int rg_weights_lora_rank(const rg_weights *w);

#endif
