/* cmd_perturb: `refgeo perturb (IN.gguf | --model IN.gguf) --out OUT.gguf
 * [--scale X] [--seed N] [--json]` writes a copy of a GGUF model with
 * randomly perturbed weights into the file --out, so that base + perturbed
 * form a two-checkpoint test series. --json prints {"out", "tensors",
 * "factors", "scale"} instead of the one summary line.
 *
 * Every weight w is multiplied by a factor 1 + scale * z, z ~ N(0, 1):
 *  - F32 tensors (the RMSNorm weights; rope_freqs, which is not a weight, is
 *    kept) get one factor per element;
 *  - Q4_1 and Q8_0 tensors of the blocks (attention and MLP weights) get one
 *    factor per 32-element block, applied to the block's f16 scale d, and
 *    for Q4_1 also to its offset m, so that every dequantized value
 *    d * q + m of the block is multiplied by the factor, as with F32.
 * Other tensors are copied unchanged. The layout stays identical, so the
 * output is the input's bytes with those values patched in place.
 *
 * The z stream is SplitMix64 seeded by --seed, turned into normals by
 * Box-Muller (one normal per pair of uniforms), consumed in tensor file
 * order, so a seed gives the same file on every machine. The output is
 * written to a temp file and renamed (util/fileio.h). */
#include <cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "tensor/dtype.h"
#include "formats/gguf.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/rng.h"

typedef struct {
  uint64_t state;
  double scale;
} factor_stream;

/* A uniform in (0, 1]: 53 random bits, shifted off zero so log() is finite. */
static double uniform(uint64_t *s) { return ((double)(rg_splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; }

static float next_factor(factor_stream *fs) {
  double u1 = uniform(&fs->state), u2 = uniform(&fs->state);
  double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
  return (float)(1.0 + fs->scale * z);
}

static void scale_f16(uint8_t *p, float f) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  h = rg_fp32_to_fp16(rg_fp16_to_fp32(h) * f);
  memcpy(p, &h, sizeof h);
}

/* Perturbs one tensor's bytes in place; returns the number of factors drawn
 * (0 for a tensor that is kept). */
static long long perturb_tensor(const rg_tensor *t, uint8_t *data, factor_stream *fs) {
  const bool in_block = strncmp(t->name, "blk.", 4) == 0;
  if (t->type == RG_F32 && strcmp(t->name, "rope_freqs.weight") != 0) {
    long long n = (long long)(t->nbytes / sizeof(float));
    for (long long i = 0; i < n; i++) {
      float v;
      memcpy(&v, data + i * sizeof v, sizeof v);
      v *= next_factor(fs);
      memcpy(data + i * sizeof v, &v, sizeof v);
    }
    return n;
  }
  if (!in_block || (t->type != RG_Q4_1 && t->type != RG_Q8_0)) return 0;
  const rg_dtype_info *info = rg_dtype_get(t->type);
  long long n_blocks = (long long)(t->nbytes / (size_t)info->block_bytes);
  for (long long b = 0; b < n_blocks; b++) {
    uint8_t *blk = data + b * info->block_bytes;
    float f = next_factor(fs);
    scale_f16(blk, f);                             /* d */
    if (t->type == RG_Q4_1) scale_f16(blk + 2, f); /* m */
  }
  return n_blocks;
}

/* Copies IN's bytes to FP. */
static int copy_file(const char *in, FILE *fp) {
  FILE *src = fopen(in, "rb");
  if (!src) return rg_error_set("%s: cannot open for reading", in);
  char buf[1 << 16];
  size_t n;
  int rc = 0;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, src)) > 0)
    if (fwrite(buf, 1, n, fp) != n) rc = rg_error_set("%s: write failed while copying", in);
  if (rc == 0 && ferror(src)) rc = rg_error_set("%s: read failed", in);
  fclose(src);
  return rc;
}

static int write_perturbed(const rg_gguf *g, const char *in, const char *out, factor_stream *fs, bool json) {
  rg_atomic_file af;
  if (rg_atomic_open(&af, out) < 0) return -1;
  int rc = copy_file(in, af.fp);
  long long n_tensors = 0, n_factors = 0;
  for (int64_t i = 0; rc == 0 && i < rg_gguf_n_tensors(g); i++) {
    const rg_tensor *t = rg_gguf_tensor(g, i);
    uint8_t *data = malloc(t->nbytes ? t->nbytes : 1);
    if (!data) {
      rc = rg_error_set("%s: out of memory for tensor %s", in, t->name);
      break;
    }
    memcpy(data, t->data, t->nbytes);
    long long k = perturb_tensor(t, data, fs);
    if (k > 0) {
      n_tensors++;
      n_factors += k;
      if (fseeko(af.fp, (off_t)rg_gguf_tensor_file_offset(g, t), SEEK_SET) != 0 ||
          fwrite(data, 1, t->nbytes, af.fp) != t->nbytes)
        rc = rg_error_set("%s: cannot write tensor %s", af.tmp_path, t->name);
    }
    free(data);
  }
  if (rc < 0) {
    rg_atomic_abort(&af);
    return -1;
  }
  if (rg_atomic_commit(&af) < 0) return -1;
  if (!json) {
    printf("%s: perturbed %lld tensors (%lld factors, scale %g)\n", out, n_tensors, n_factors, fs->scale);
    return 0;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "out", out);
  cJSON_AddNumberToObject(o, "tensors", (double)n_tensors);
  cJSON_AddNumberToObject(o, "factors", (double)n_factors);
  cJSON_AddNumberToObject(o, "scale", fs->scale);
  return cli_print_json(o);
}

int cmd_perturb(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  double scale = 0.05;
  int seed = 0;
  bool json = false;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &in, "input GGUF file (or IN.gguf positionally)"},
      {"out", CLI_STRING, &out, "output GGUF file"},
      {"scale", CLI_FLOAT, &scale, "standard deviation of the relative perturbation (0.05)"},
      {"seed", CLI_INT, &seed, "random seed (0)"},
      {"json", CLI_BOOL, &json, "print the summary as JSON"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(IN.gguf | --model IN.gguf) --out OUT.gguf [flags]\n\nexample: refgeo perturb " CLI_EXAMPLE_MODEL " --out perturbed.gguf --scale 0.05 --seed 1", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&in, pos, &n_pos) < 0) return cli_fail();
  if (!in || !out) {
    rg_error_set("IN.gguf (or --model) and --out are required");
    return cli_fail();
  }
  if (!(scale >= 0)) {
    rg_error_set("--scale: %g is not a non-negative number", scale);
    return cli_fail();
  }
  rg_gguf *g = rg_gguf_open(in);
  if (!g) return cli_fail();
  factor_stream fs = {.state = (uint64_t)seed, .scale = scale};
  rc = write_perturbed(g, in, out, &fs, json);
  rg_gguf_close(g);
  return rc < 0 ? cli_fail() : 0;
}
