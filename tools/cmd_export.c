/* cmd_export: `refgeo export (MODEL | --model PATH) --out DIR [--dtype T]
 * [--threads N]` writes MODEL (a GGUF file or an HF directory) as the
 * Hugging Face directory DIR, exactly as the trainer writes its checkpoints
 * (engine/hf_write.h): config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json, generation_config.json, written into DIR.tmp and
 * renamed. A GGUF's tokenizer is exported and its q/k rows un-permuted, so
 * transformers loads DIR as the same model. DIR must not exist. */
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "engine/hf_write.h"
#include "model/model.h"
#include "engine/weights.h"
#include "util/error.h"

int cmd_export(int argc, char **argv) {
  const char *model = NULL, *out = NULL, *dtype = "bf16";
  int threads = 0;
  const cli_opt opts[] = {
      {"model", CLI_STRING, &model, "GGUF file or HF directory (or MODEL positionally)"},
      {"out", CLI_STRING, &out, "output directory (must not exist)"},
      {"dtype", CLI_STRING, &dtype, "bf16 (default) or f32"},
      {"threads", CLI_INT, &threads, "CPU threads (all)"},
  };
  const char *pos[1];
  int n_pos = 0;
  int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                     "(MODEL | --model PATH) --out DIR [--dtype T] [--threads N]\n\nexample: refgeo export " CLI_EXAMPLE_MODEL " --out smollm2-hf --dtype bf16", pos, 1, &n_pos);
  if (rc != 0) return rc > 0 ? 0 : cli_fail();
  if (cli_take_model(&model, pos, &n_pos) < 0) return cli_fail();
  if (!model || !out) {
    rg_error_set("%s missing", model ? "--out" : "MODEL (a .gguf file or a Hugging Face directory)");
    return cli_fail();
  }
  rg_hf_write_opts wo = {.dtype = RG_HF_BF16};
  if (strcmp(dtype, "f32") == 0) wo.dtype = RG_HF_F32;
  else if (strcmp(dtype, "bf16") != 0) {
    rg_error_set("--dtype must be bf16 or f32, got '%s'", dtype);
    return cli_fail();
  }
  rg_model *m = rg_model_load(model);
  if (!m) return cli_fail();
  rg_backend_opts bo = {.threads = threads};
  rg_weights *w = rg_weights_open(m, &bo, RG_WEIGHTS_AUTO);
  rc = w ? rg_hf_write_model(w, out, &wo) : -1;
  rg_weights_free(w);
  rg_model_free(m);
  return rc == 0 ? 0 : cli_fail();
}
