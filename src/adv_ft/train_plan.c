/* train_plan.c: the memory plan of an R2D2 run (train_plan.h). */
#include "adv_ft/train_plan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adv_ft/adamw.h"
#include "backend/plan.h"
#include "dist/comm.h"
#include "model/model_shapes.h"
#include "util/error.h"
#include "util/fileio.h"

static const double GIB = 1024.0 * 1024.0 * 1024.0;

/* A value in kB from /proc (KEY of FILE, e.g. "MemTotal:" of /proc/meminfo),
 * as bytes; 0 when it cannot be read. */
static size_t proc_kb(const char *file, const char *key) {
  FILE *f = fopen(file, "r");
  char line[256];
  size_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) {
      kb = strtoull(line + strlen(key), NULL, 10);
      break;
    }
  if (f) fclose(f);
  return kb * 1024;
}

int rg_train_plan_device(rg_train_plan *p, const char *device) {
  if (strlen(device) >= sizeof p->device) return rg_error_set("--device \"%s\": expected cpu or gpu:NG", device);
  snprintf(p->device, sizeof p->device, "%s", device);
  if (strcmp(device, "cpu") == 0) {
    p->gpu = false;
    p->capacity = (double)proc_kb("/proc/meminfo", "MemTotal:");
    if (p->capacity <= 0) return rg_error_set("--device cpu: cannot read MemTotal from /proc/meminfo");
    return 0;
  }
  char *end = NULL;
  errno = 0;
  const double gib = strncmp(device, "gpu:", 4) == 0 ? strtod(device + 4, &end) : 0;
  if (!end || errno || !(gib > 0 && gib < 1e6) || (*end != 'G' && *end != 'g') || end[1] != '\0')
    return rg_error_set("--device \"%s\": expected cpu or gpu:NG (N GiB of device memory, e.g. gpu:80G)", device);
  p->gpu = true;
  p->capacity = gib * GIB;
  return 0;
}

/* A directory with config.json and no safetensors: a model to plan from
 * its shapes. */
static char *shapes_config(const char *path) {
  if (!rg_is_dir(path)) return NULL;
  char *cfg = rg_path_join(path, "config.json"), *one = rg_path_join(path, "model.safetensors");
  char *index = rg_path_join(path, "model.safetensors.index.json");
  const bool shapes = cfg && one && index && rg_path_exists(cfg) && !rg_path_exists(one) && !rg_path_exists(index);
  free(one), free(index);
  if (!shapes) free(cfg);
  return shapes ? cfg : NULL;
}

rg_model *rg_train_plan_model(rg_train_plan *p, const char *path) {
  if (!p->gpu) p->baseline = proc_kb("/proc/self/status", "VmRSS:");
  snprintf(p->model, sizeof p->model, "%s", path);
  char *cfg = shapes_config(path);
  p->shapes_only = cfg != NULL;
  rg_model *m = cfg ? rg_model_load_shapes(cfg) : rg_model_load(path);
  free(cfg);
  return m;
}

/* gcg.c's host buffers during one GCG step on a test case of at most
 * max_case_tokens tokens (a target is at most half of it) and a suffix of
 * at most SUFFIX tokens (pool.h: 15 to 20), all counted as if live at once:
 * rg_gcg_run's token gradient [suffix, vocab], candidates and their losses;
 * rg_gcg_token_grad's embedding gradient [n, d]; rg_gcg_sample's top-k
 * table and ranking array; rg_gcg_candidate_losses' batch arrays (the
 * candidate session's tokens and logit rows) and each candidate's cut. */
enum { SUFFIX = 20 };
static size_t gcg_host_bytes(const rg_train_config *c, const rg_config *m) {
  if (c->gcg_steps < 1) return 0;
  const size_t L = SUFFIX, V = (size_t)m->vocab_size, n = (size_t)c->max_case_tokens, nt = n / 2;
  const size_t sw = (size_t)c->search_width, chunk = (size_t)c->gcg_batch;
  return L * V * sizeof(float) + sw * L * sizeof(int32_t) + sw * sizeof(float) + n * (size_t)m->d_model * sizeof(float) +
         L * (size_t)c->top_k * sizeof(int32_t) + V * (sizeof(float) + sizeof(int32_t)) +
         chunk * n * (sizeof(int32_t) + sizeof(int)) + chunk * nt * (sizeof(int32_t) + sizeof(int) + sizeof(float)) +
         sw * sizeof(int);
}

int rg_train_plan_fill(rg_train_plan *p, const rg_train_config *c, rg_weights *w, const rg_session *train,
                       const rg_session *cand, const rg_session *gcg_grad, const rg_grads *g) {
  rg_backend *be = rg_weights_backend(w);
  if (!rg_backend_is_plan(be)) return rg_error_set("plan: the weights are not on a plan backend");
  const rg_model *m = rg_weights_model(w);
  p->n_layers = m->cfg.n_layers;
  snprintf(p->mode, sizeof p->mode, "%s", c->mode);
  for (int tag = 0; tag < 3; tag++) p->counted[tag] = rg_plan_bytes(be, tag);
  p->params = 0;
  for (int i = 0; i < rg_weights_count(w); i++) p->params += rg_bweight_bytes(be, rg_weights_param(w, i));
  const size_t weights = rg_weights_bytes(w);
  p->frozen = weights - p->params;
  p->weights_other = p->counted[RG_PLAN_TAG_WEIGHTS] - weights;
  p->grads = rg_grads_bytes(g); /* ZeRO-2: one block's buffers, shared by every block */
  p->moments = p->counted[RG_PLAN_TAG_OPTIMIZER];
  rg_session_memory(train, &p->train);
  if (cand) rg_session_memory(cand, &p->cand);
  if (gcg_grad) rg_session_memory(gcg_grad, &p->gcg_grad);
  p->sp = c->sp;
  p->recompute = c->recompute;
  p->backend_total = p->frozen + p->params + p->weights_other + p->grads + p->moments + p->train.backend +
                     p->cand.backend + p->gcg_grad.backend;
  p->host_sessions = p->train.host + p->cand.host + p->gcg_grad.host;
  const size_t tokens = (size_t)rg_session_max_batch_tokens(train);
  /* r2d2_step.h's five per-token arrays, r2d2_loss.c's scale and losses
   * per logit row, the disallowed-token mask */
  p->host_trainer = tokens * (5 * sizeof(int32_t) + 2 * sizeof(float)) + (size_t)m->cfg.vocab_size;
  p->host_gcg = gcg_host_bytes(c, &m->cfg);
  p->host_comm = c->sp > 1 || c->zero > 0 ? (size_t)RG_COMM_PIECE_FLOATS * sizeof(float) : 0;
  p->file_map = 0;
  for (int i = 0; !p->gpu && i < rg_weights_export_count(w); i++) p->file_map += rg_weights_export_tensor(w, i)->nbytes;
  p->total = p->backend_total;
  if (!p->gpu) p->total += p->host_sessions + p->host_trainer + p->host_gcg + p->host_comm + p->file_map + p->baseline;
  return 0;
}

/* ---------------------------------------------------------------- printing */

static void row(FILE *out, const char *what, size_t bytes) {
  fprintf(out, "  %-52s %16zu %10.3f\n", what, bytes, (double)bytes / GIB);
}

static void session_rows(FILE *out, const char *name, const rg_session_bytes *s, int n_layers) {
  char what[96];
  if (s->saved_layers > 0) {
    snprintf(what, sizeof what, "%s: activations saved per layer (1 of %d)", name, n_layers);
    row(out, what, s->saved_layer);
    snprintf(what, sizeof what, "%s: activations saved, %d layers", name, s->saved_layers);
    row(out, what, s->saved_layer * (size_t)s->saved_layers);
    snprintf(what, sizeof what, "%s: last output, silu(gate)*up, recompute block", name);
    row(out, what, s->saved_other);
    snprintf(what, sizeof what, "%s: backward scratch", name);
    row(out, what, s->backward);
  }
  snprintf(what, sizeof what, "%s: working activations", name);
  row(out, what, s->work);
  snprintf(what, sizeof what, "%s: logits (rows, logits, losses%s)", name, s->saved_layers ? ", gradients" : "");
  row(out, what, s->logits);
  snprintf(what, sizeof what, "%s: KV cache", name);
  row(out, what, s->kv_cache);
}

static void print_json(const rg_train_plan *p, FILE *out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "device", p->device);
  cJSON_AddNumberToObject(o, "capacity", p->capacity);
  cJSON_AddStringToObject(o, "model", p->model);
  cJSON_AddBoolToObject(o, "shapes_only", p->shapes_only);
  cJSON_AddStringToObject(o, "mode", p->mode);
  const struct {
    const char *key;
    size_t v;
  } f[] = {{"parameters", p->params},
           {"frozen_weights", p->frozen},
           {"weights_other", p->weights_other},
           {"gradients", p->grads},
           {"optimizer_state", p->moments},
           {"activations_per_layer", p->train.saved_layer},
           {"activations_saved", p->train.saved_layer * (size_t)p->train.saved_layers},
           {"activations_other", p->train.saved_other + p->train.work},
           {"backward_scratch", p->train.backward},
           {"logits", p->train.logits},
           {"kv_cache", p->train.kv_cache},
           {"gcg_session", p->cand.backend},
           {"gcg_session_logits", p->cand.logits},
           {"gcg_session_kv_cache", p->cand.kv_cache},
           {"gcg_gradient_session", p->gcg_grad.backend},
           {"device_total", p->backend_total},
           {"host_sessions", p->host_sessions},
           {"host_trainer", p->host_trainer},
           {"host_gcg", p->host_gcg},
           {"host_comm", p->host_comm},
           {"file_map", p->file_map},
           {"baseline", p->baseline},
           {"total", p->total}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddNumberToObject(o, f[i].key, (double)f[i].v);
  cJSON_AddNumberToObject(o, "layers", p->n_layers);
  cJSON_AddNumberToObject(o, "sp", p->sp);
  cJSON_AddNumberToObject(o, "ranks", p->ranks > p->sp ? p->ranks : p->sp);
  cJSON_AddNumberToObject(o, "zero", p->zero);
  cJSON_AddNumberToObject(o, "zero_buffers", (double)p->zero_buffers);
  cJSON_AddNumberToObject(o, "recompute", p->recompute);
  cJSON_AddBoolToObject(o, "fits", (double)p->total <= p->capacity);
  char *text = cJSON_PrintUnformatted(o);
  if (text) fprintf(out, "%s\n", text);
  free(text);
  cJSON_Delete(o);
}

void rg_train_plan_print(const rg_train_plan *p, FILE *out, bool json) {
  if (json) {
    print_json(p, out);
    return;
  }
  fprintf(out, "memory plan: %s, mode %s%s, on %s (%.1f GiB)", p->model, p->mode,
          p->shapes_only ? " (shapes from config.json)" : "", p->device, p->capacity / GIB);
  fprintf(out, ", recompute %d", p->recompute);
  if (p->sp > 1) fprintf(out, ", one of %d sequence-parallel ranks", p->sp);
  if (p->ranks > p->sp) fprintf(out, ", %d ranks (%d data-parallel groups)", p->ranks, p->ranks / p->sp);
  if (p->zero) fprintf(out, ", ZeRO-%d", p->zero);
  fputc('\n', out);
  fprintf(out, "  %-52s %16s %10s\n", p->gpu ? "device memory" : "backend memory (host RAM)", "bytes", "GiB");
  row(out, strcmp(p->mode, "lora") == 0 ? "parameters (LoRA adapters, float32)" : "parameters (float32)", p->params);
  row(out, p->gpu ? "frozen base weights (file dtype)" : "frozen base weights (own copies)", p->frozen);
  char what[96];
  const int groups = p->ranks > p->sp ? p->ranks / p->sp : 1;
  row(out, p->zero == 2 ? "gradients (float32; ZeRO-2: one block's, shared)" : "gradients (float32)", p->grads);
  if (p->zero) {
    snprintf(what, sizeof what, "optimizer state (AdamW m and v, 1/%d shard)", groups);
    row(out, what, p->moments);
    row(out, p->zero == 2 ? "ZeRO-2 gradient shard and bucket staging" : "ZeRO-1 bucket staging (parameter gather)",
        p->zero_buffers);
  } else {
    row(out, "optimizer state (AdamW m and v, float32)", p->moments);
  }
  session_rows(out, "training", &p->train, p->n_layers);
  if (p->cand.backend) session_rows(out, "GCG candidates", &p->cand, p->n_layers);
  if (p->gcg_grad.backend) row(out, "GCG token gradient (this rank's own session)", p->gcg_grad.backend);
  row(out, p->gpu ? "RoPE frequencies" : "RoPE frequencies, dequantization tiles", p->weights_other);
  row(out, p->gpu ? "device total" : "backend total", p->backend_total);
  fprintf(out, "  host memory%s\n", p->gpu ? " (not counted against the device)" : "");
  row(out, "sessions' host arrays", p->host_sessions);
  row(out, "trainer's batch arrays and token mask", p->host_trainer);
  row(out, "GCG buffers (token gradient [suffix, vocab], ...)", p->host_gcg);
  if (p->host_comm) row(out, "MPI scratch of one all-reduce piece", p->host_comm);
  if (!p->gpu) {
    row(out, "model file pages (mmap)", p->file_map);
    row(out, "process before the model loads (measured RSS)", p->baseline);
  }
  row(out, "total", p->total);
  const bool fits = (double)p->total <= p->capacity;
  fprintf(out, "%s: %.2f GiB of %.1f GiB (%.0f%%)\n", fits ? "fits" : "does not fit", (double)p->total / GIB,
          p->capacity / GIB, 100.0 * (double)p->total / p->capacity);
}
