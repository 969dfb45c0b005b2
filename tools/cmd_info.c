/* cmd_info: `refgeo info (MODEL | --model PATH) [--json]` prints what refgeo understood of a
 * model: its config, how many tensors of each dtype it holds, the parameter
 * count, the tokenizer and the chat template it will render with.
 * `refgeo info --devices [--json]` lists the devices --device can name. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "backend/backend.h"
#include "backend/cpu/blas_core.h"
#include "tokenizer/chat_template.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

static const char *rope_scaling_name(rg_rope_scaling s) {
  switch (s) {
  case RG_ROPE_SCALING_LINEAR: return "linear";
  case RG_ROPE_SCALING_LLAMA3: return "llama3";
  case RG_ROPE_SCALING_NONE: break;
  }
  return "none";
}

static const char *tokenizer_kind_name(rg_tokenizer_kind k) { return k == RG_TOK_BPE_SPM ? "bpe-spm" : "bpe-byte"; }

/* The renderer name for the model's template; "none" without a template and
 * "unrecognised" when no built-in renderer matches (not an error for info). */
static const char *chat_template_name(const rg_model *m) {
  if (!m->chat_template) return "none";
  rg_chat_template t;
  if (rg_chat_template_detect(m->chat_template, &t) != 0) return "unrecognised";
  const char *name = rg_chat_template_name(t.kind);
  rg_chat_template_free(&t);
  return name;
}

/* The whole report as one cJSON object (also the source of the text form). */
static cJSON *build_report(const rg_model *m) {
  const rg_config *c = &m->cfg;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "path", m->path);
  cJSON_AddStringToObject(r, "id", m->id);
  cJSON_AddStringToObject(r, "format", m->format);

  cJSON *cfg = cJSON_AddObjectToObject(r, "config");
  cJSON_AddStringToObject(cfg, "arch", c->arch);
  cJSON_AddNumberToObject(cfg, "n_layers", c->n_layers);
  cJSON_AddNumberToObject(cfg, "d_model", c->d_model);
  cJSON_AddNumberToObject(cfg, "n_heads", c->n_heads);
  cJSON_AddNumberToObject(cfg, "n_kv_heads", c->n_kv_heads);
  cJSON_AddNumberToObject(cfg, "head_dim", c->head_dim);
  cJSON_AddNumberToObject(cfg, "d_ff", c->d_ff);
  cJSON_AddNumberToObject(cfg, "vocab_size", c->vocab_size);
  cJSON_AddNumberToObject(cfg, "max_ctx", c->max_ctx);
  cJSON_AddNumberToObject(cfg, "rms_eps", c->rms_eps);
  cJSON_AddNumberToObject(cfg, "rope_theta", c->rope_theta);
  cJSON_AddStringToObject(cfg, "rope_scaling", m->rope_freqs ? "rope_freqs tensor" : rope_scaling_name(c->rope_scaling));
  if (c->rope_scaling != RG_ROPE_SCALING_NONE) cJSON_AddNumberToObject(cfg, "rope_factor", c->rope_factor);
  cJSON_AddBoolToObject(cfg, "rope_adjacent_pairs", c->rope_adjacent_pairs);
  cJSON_AddNumberToObject(cfg, "sliding_window", c->sliding_window);
  cJSON_AddBoolToObject(cfg, "tied_embeddings", c->tied_embeddings);
  cJSON_AddBoolToObject(cfg, "attn_qkv_bias", c->attn_qkv_bias);

  cJSON_AddNumberToObject(r, "n_tensors", m->n_tensors);
  int per_type[RG_DTYPE_COUNT] = {0};
  for (int i = 0; i < m->n_tensors; i++) per_type[m->tensors[i].type]++;
  cJSON *types = cJSON_AddObjectToObject(r, "tensor_types");
  for (int t = 0; t < RG_DTYPE_COUNT; t++)
    if (per_type[t]) cJSON_AddNumberToObject(types, rg_dtype_get(t)->name, per_type[t]);
  cJSON_AddNumberToObject(r, "n_params", (double)rg_model_n_params(m));

  cJSON *tok = cJSON_AddObjectToObject(r, "tokenizer");
  cJSON_AddStringToObject(tok, "kind", tokenizer_kind_name(rg_tokenizer_kind_of(m->tokenizer)));
  cJSON_AddNumberToObject(tok, "vocab_size", rg_tokenizer_vocab_size(m->tokenizer));
  cJSON_AddNumberToObject(tok, "bos", rg_tokenizer_bos(m->tokenizer));
  cJSON_AddNumberToObject(tok, "eos", rg_tokenizer_eos(m->tokenizer));
  cJSON_AddBoolToObject(tok, "adds_bos", rg_tokenizer_adds_bos(m->tokenizer));
  cJSON_AddStringToObject(r, "chat_template", chat_template_name(m));
  return r;
}

/* "key  value" lines, nested objects flattened as "parent.key". */
static void print_table(const cJSON *obj, const char *prefix) {
  const cJSON *item;
  cJSON_ArrayForEach(item, obj) {
    char key[96];
    snprintf(key, sizeof key, "%s%s", prefix, item->string);
    if (cJSON_IsObject(item)) {
      char sub[sizeof key + 1];
      snprintf(sub, sizeof sub, "%s.", key);
      print_table(item, sub);
    } else if (cJSON_IsString(item)) {
      printf("%-28s %s\n", key, item->valuestring);
    } else if (cJSON_IsBool(item)) {
      printf("%-28s %s\n", key, cJSON_IsTrue(item) ? "yes" : "no");
    } else {
      printf("%-28s %.10g\n", key, item->valuedouble);
    }
  }
}

/* --devices: the devices --device can name, as a cJSON array; NULL with the
 * error set. */
static cJSON *device_report(void) {
  const char *isa;
  if (rg_cpu_fast_decode_isa(&isa) < 0) return NULL;
  cJSON *list = cJSON_CreateArray(), *cpu = cJSON_CreateObject();
  cJSON_AddStringToObject(cpu, "device", "cpu");
  cJSON_AddNumberToObject(cpu, "threads", (double)sysconf(_SC_NPROCESSORS_ONLN));
  /* which 8-bit kernels --fast-decode runs here (null: the float32 path) */
  if (isa) cJSON_AddStringToObject(cpu, "fast_decode", isa);
  else cJSON_AddNullToObject(cpu, "fast_decode");
  /* OpenBLAS's kernel set, which decides float32 speed (backend/cpu/blas_core.h) */
  cJSON_AddStringToObject(cpu, "blas_kernels", rg_blas_core_name());
  cJSON_AddItemToArray(list, cpu);
  const char *gpu = rg_gpu_backend_name();
  for (int i = 0, n = rg_gpu_device_count(); gpu && i < n; i++) {
    char name[256], dev[64];
    size_t bytes = 0;
    if (rg_gpu_device_info(i, name, sizeof name, &bytes) < 0) {
      cJSON_Delete(list);
      return NULL;
    }
    snprintf(dev, sizeof dev, "%s:%d", gpu, i);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "device", dev);
    cJSON_AddStringToObject(d, "name", name);
    cJSON_AddNumberToObject(d, "memory_gib", (double)bytes / (1024.0 * 1024 * 1024));
    cJSON_AddItemToArray(list, d);
  }
  return list;
}

static int print_devices(bool json) {
  cJSON *list = device_report();
  if (!list) return cli_fail();
  if (json) {
    cJSON *r = cJSON_CreateObject();
    if (!r || !cJSON_AddItemToObject(r, "devices", list)) {
      cJSON_Delete(r);
      cJSON_Delete(list);
      r = NULL;
    }
    return cli_print_json(r) < 0 ? cli_fail() : 0;
  }
  const cJSON *d;
  cJSON_ArrayForEach(d, list) {
    const cJSON *name = cJSON_GetObjectItem(d, "name");
    if (name)
      printf("%-8s %s, %.1f GiB\n", cJSON_GetObjectItem(d, "device")->valuestring, name->valuestring,
             cJSON_GetObjectItem(d, "memory_gib")->valuedouble);
    else {
      const cJSON *isa = cJSON_GetObjectItem(d, "fast_decode");
      printf("%-8s %d threads, OpenBLAS %s kernels, --fast-decode on %s\n", "cpu",
             (int)cJSON_GetObjectItem(d, "threads")->valuedouble, cJSON_GetObjectItem(d, "blas_kernels")->valuestring,
             cJSON_IsString(isa) ? isa->valuestring : "the float32 path (no 8-bit kernels for this CPU)");
    }
  }
  if (!rg_gpu_backend_name()) printf("(no GPU backend in this build)\n");
  else if (rg_gpu_device_count() == 0) printf("(no %s device found)\n", rg_gpu_backend_name());
  cJSON_Delete(list);
  return 0;
}

int cmd_info(int argc, char **argv) {
  bool json = false, devices = false;
  const char *model = NULL;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      {"devices", CLI_BOOL, &devices, "list the devices --device can name instead (no model)"},
      {"json", CLI_BOOL, &json, "print the report as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "(MODEL | --model PATH | --devices) [--json]\n\nexample: refgeo info " CLI_EXAMPLE_MODEL "", pos, 1,
                     &n_pos);
  if (rc == 1) return 0;
  if (rc == 0 && devices) {
    if (model || n_pos > 0) {
      rg_error_set("--devices takes no model");
      return cli_fail();
    }
    return print_devices(json);
  }
  if (rc != 0 || cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model) {
    rg_error_set("MODEL missing (a .gguf file or a Hugging Face directory)");
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  cJSON *report = build_report(m);
  rg_model_free(m);
  if (json) return cli_print_json(report) < 0 ? cli_fail() : 0;
  print_table(report, "");
  cJSON_Delete(report);
  return 0;
}
