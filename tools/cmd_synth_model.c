/* cmd_synth_model: `refgeo synth-model --config CONFIG.json --out DIR
 * [--seed N] [--dtype T] [--std X] [--norm-std X] [--max-shard-size S]
 * [--json]`
 * writes a random-weight model of any size as a Hugging Face directory that
 * rg_model_load (and transformers) accept:
 *   - sharded safetensors (bf16 by default, or f16/f32) in transformers'
 *     state_dict order, split like save_pretrained's max_shard_size (5GB by
 *     default); weights and biases = std * z (std 0.02 by default,
 *     transformers' initializer_range), norm weights = 1 + norm_std * z
 *     (norm_std 0 by default), z ~ normal(0, 1) as defined by normal_at;
 *   - config.json: CONFIG.json with torch_dtype set to the dtype;
 *   - tokenizer.json: a byte-level BPE with the 256 byte tokens (id = byte
 *     value, GPT-2's printable byte mapping), no merges, the ChatML specials
 *     <|endoftext|>, <|im_start|>, <|im_end|>, and unused tokens up to
 *     vocab_size; tokenizer_config.json with a ChatML chat_template.
 * Weights are generated chunk by chunk while each shard is written, so memory
 * stays at a few MiB even for a 7B model. Element j of tensor i depends only
 * on (seed, i, j) (a counter-based generator), so the output is identical
 * for any thread count. A progress line per shard goes to stderr; --json
 * prints {"out", "dtype", "n_tensors", "n_params"} on stdout.
 */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/config.h"
#include "tensor/dtype.h"
#include "formats/hf_config.h"
#include "engine/hf_write.h"
#include "model/model_shapes.h"
#include "formats/safetensors_write.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/rng.h"

static const char *const SPECIALS[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
enum { N_SPECIALS = 3, N_BYTES = 256, IM_END = 2 /* SPECIALS[IM_END] */ };

static const char *CHATML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* ---------------------------------------------------------------- tensors */

typedef struct {
  rg_tensor *t;
  int n;
  uint64_t seed;
  rg_dtype type; /* RG_BF16, RG_F16 or RG_F32 */
  float std, norm_std;
} synth;

/* normal(0, 1) for element J of tensor I: Box-Muller on two uniforms in
 * (0, 1] drawn from the hash of (seed, i, j). */
static float normal_at(uint64_t seed, int i, int64_t j) {
  uint64_t h = rg_mix64(seed ^ rg_mix64(((uint64_t)(uint32_t)i << 40) ^ (uint64_t)j));
  double u1 = ((double)(h >> 11) + 1.0) / 9007199254740992.0;
  double u2 = (double)(rg_mix64(h) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static bool is_norm(const char *name) {
  size_t n = strlen(name), k = strlen("norm.weight");
  return n >= k && strcmp(name + n - k, "norm.weight") == 0;
}

/* Element J of tensor I as float32: the value the dtype then rounds. The
 * norm sum is taken in double, where the product is exact, so a fused
 * multiply-add (-march=native) and separate operations give the same bits;
 * tools/reference/make_hf_tiny.py recomputes these values independently. */
static float weight_at(const synth *s, int i, int64_t j) {
  if (is_norm(s->t[i].name)) return (float)(1.0 + (double)s->norm_std * (double)normal_at(s->seed, i, j));
  return s->std * normal_at(s->seed, i, j);
}

static int fill_weights(void *ctx, int i, size_t offset, void *buf, size_t len) {
  const synth *s = ctx;
  const size_t elem = s->type == RG_F32 ? 4 : 2;
  const int64_t first = (int64_t)(offset / elem), n = (int64_t)(len / elem);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; k++) {
    float w = weight_at(s, i, first + k);
    if (s->type == RG_F32)
      memcpy((char *)buf + (size_t)k * 4, &w, 4);
    else
      ((uint16_t *)buf)[k] = s->type == RG_F16 ? rg_fp32_to_fp16(w) : rg_fp32_to_bf16(w);
  }
  return 0;
}

/* ---------------------------------------------------------------- side files */

/* tokenizer.json and tokenizer_config.json of the stand-in tokenizer: the
 * bytes, SPECIALS (<|im_end|> ends a sequence) and unused fillers up to
 * VOCAB_SIZE, no merges (rg_tokenizer_bytes_new), with the ChatML template,
 * written as refgeo writes any tokenizer (tokenizer/tokenizer_export.h). */
static int write_tokenizer(const char *dir, int vocab_size) {
  rg_tokenizer *t = rg_tokenizer_bytes_new(vocab_size, SPECIALS, N_SPECIALS, N_BYTES + IM_END);
  if (!t) return -1;
  cJSON *tok = NULL, *cfg = NULL;
  int rc = rg_tokenizer_export(t, CHATML, &tok, &cfg);
  if (rc == 0) rc = rg_hf_write_json(dir, "tokenizer.json", tok);
  if (rc == 0) rc = rg_hf_write_json(dir, "tokenizer_config.json", cfg);
  cJSON_Delete(tok);
  cJSON_Delete(cfg);
  rg_tokenizer_free(t);
  return rc;
}

/* CONFIG_PATH's JSON with torch_dtype TORCH_DTYPE (that of the shards). */
static int write_config(const char *dir, const char *config_path, const char *torch_dtype) {
  cJSON *j = rg_json_read_file(config_path);
  if (!j) return -1;
  cJSON_DeleteItemFromObject(j, "dtype"); /* transformers 5's name for it */
  cJSON_DeleteItemFromObject(j, "torch_dtype");
  cJSON_AddStringToObject(j, "torch_dtype", torch_dtype);
  int rc = rg_hf_write_json(dir, "config.json", j);
  cJSON_Delete(j);
  return rc;
}

/* ---------------------------------------------------------------- entry */

/* A save_pretrained max_shard_size: an integer with an optional unit KB,
 * MB, GB (powers of 10^3) or KiB, MiB, GiB (powers of 2^10); no unit =
 * bytes. Returns the byte count, or 0 if TEXT is not such a size. */
static size_t parse_shard_size(const char *text) {
  static const struct {
    const char *unit;
    double scale;
  } UNITS[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0},
               {"GiB", 1073741824.0}};
  char *end;
  double v = strtod(text, &end);
  if (end == text || !(v >= 1)) return 0;
  for (size_t k = 0; k < sizeof UNITS / sizeof UNITS[0]; k++)
    if (strcmp(end, UNITS[k].unit) == 0 && v * UNITS[k].scale < 1e18) return (size_t)(v * UNITS[k].scale);
  return 0;
}

int cmd_synth_model(int argc, char **argv) {
  const char *config_path = NULL, *out = NULL, *dtype = "bf16", *shard_size = "5GB"; /* save_pretrained's classic default */
  int seed = 0;
  double std = 0.02, norm_std = 0;
  bool json = false;
  const cli_opt opts[] = {
      {"config", CLI_STRING, &config_path, "Hugging Face config.json to instantiate (llama, mistral, qwen2)"},
      {"out", CLI_STRING, &out, "output directory (created)"},
      {"seed", CLI_INT, &seed, "random seed (default 0)"},
      {"dtype", CLI_STRING, &dtype, "bf16 (default), f16 or f32"},
      {"std", CLI_FLOAT, &std, "weights and biases are std * normal(0, 1) (default 0.02)"},
      {"norm-std", CLI_FLOAT, &norm_std, "norm weights are 1 + norm_std * normal(0, 1) (default 0)"},
      {"max-shard-size", CLI_STRING, &shard_size, "largest shard, as save_pretrained: 5GB (default), 60KB, 2GiB, ..."},
      {"json", CLI_BOOL, &json, "print a summary of the model written as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "--config CONFIG.json --out DIR [--seed N] [--dtype T] [--std X] [--norm-std X] "
                     "[--max-shard-size S] [--json]\n\nexample: refgeo synth-model --config data/shapes/mistral-7b-v0.1/config.json --out mistral-7b-shape --dtype bf16",
                     pos, 0, &n_pos);
  if (rc == 1) return 0;
  if (rc != 0) return cli_fail();
  if (!config_path || !out) {
    rg_error_set("--config and --out are required");
    return cli_fail();
  }
  static const struct {
    const char *name, *torch_dtype;
    rg_dtype type;
  } DTYPES[] = {{"bf16", "bfloat16", RG_BF16}, {"f16", "float16", RG_F16}, {"f32", "float32", RG_F32}};
  int di = -1;
  for (int k = 0; k < 3; k++)
    if (strcmp(dtype, DTYPES[k].name) == 0) di = k;
  if (di < 0) {
    rg_error_set("--dtype must be bf16, f16 or f32, got '%s'", dtype);
    return cli_fail();
  }
  const size_t max_shard_bytes = parse_shard_size(shard_size);
  if (max_shard_bytes == 0) {
    rg_error_set("--max-shard-size '%s' is not a size such as 5GB, 60KB or 2GiB", shard_size);
    return cli_fail();
  }
  if (!(std >= 0) || !(norm_std >= 0)) {
    rg_error_set("--std and --norm-std must be non-negative");
    return cli_fail();
  }
  rg_config cfg;
  if (rg_hf_config_load(config_path, &cfg) != 0 || rg_mkdir_p(out) != 0) return cli_fail();

  synth s = {.seed = rg_mix64((uint64_t)(uint32_t)seed), .type = DTYPES[di].type, .std = (float)std,
             .norm_std = (float)norm_std};
  const char *keys[] = {"format"}, *vals[] = {"pt"};
  const rg_st_metadata meta = {keys, vals, 1};
  rg_st_shard_opts so = {.max_shard_bytes = max_shard_bytes, .meta = &meta, .fill = fill_weights,
                         .fill_ctx = &s, .progress = cli_log()};
  rc = rg_model_shape_tensors(&cfg, s.type, &s.t, &s.n);
  /* Side files first, the shard set (ending with its index) last. */
  if (rc == 0) rc = write_config(out, config_path, DTYPES[di].torch_dtype);
  if (rc == 0) rc = write_tokenizer(out, cfg.vocab_size);
  if (rc == 0) rc = rg_safetensors_write_sharded(out, s.t, s.n, &so);
  if (rc == 0 && json) {
    double n_params = 0;
    for (int i = 0; i < s.n; i++) n_params += (double)s.t[i].ne[0] * (double)s.t[i].ne[1];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "out", out);
    cJSON_AddStringToObject(o, "dtype", DTYPES[di].name);
    cJSON_AddNumberToObject(o, "n_tensors", s.n);
    cJSON_AddNumberToObject(o, "n_params", n_params);
    rc = cli_print_json(o);
  }
  for (int i = 0; i < s.n; i++) free(s.t[i].name);
  free(s.t);
  return rc == 0 ? 0 : cli_fail();
}
