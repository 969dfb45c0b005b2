"""Writes the tiny Hugging Face models of tests/fixtures/hf_tiny/.

Dev-only (never run by CI). Regenerate with:

    python tools/reference/make_hf_tiny.py \
        tests/fixtures/hf_tiny ~/.cache/refgeo/hf_tiny-ref build/refgeo

Each model is a random-weight LlamaForCausalLM / MistralForCausalLM /
Qwen2ForCausalLM (d_model 64, 2 layers, vocab 300), with a real byte-level
BPE tokenizer.json (trained with the `tokenizers` library on a tiny corpus)
and a tokenizer_config.json carrying a ChatML chat_template.

No weights are committed. They are defined by a formula, the one of
`refgeo synth-model` (tools/cmd_synth_model.c: normal_at): element j of the
i-th tensor in state_dict order is std * z, norm weights 1 + norm_std * z,
with z = Box-Muller on splitmix64 hashes of (seed, i, j), rounded to
float32 and then to the model dtype. This script computes them
independently (Python integers and libm through `math`), loads them into
the transformers model and saves it with save_pretrained to the reference
directory (argument 2, for make_forward_fixtures.py). The committed fixture
directory (argument 1) gets only config.json, tokenizer.json and
tokenizer_config.json; the C tests write the weights at test time with
`refgeo synth-model` and the parameters stored under "synth" in
<name>.expected.json (tests/testlib.c: t_hf_tiny). Before writing anything
the script runs that command (argument 3, the refgeo binary) and requires
every tensor to be bit-identical to transformers' file, and the shard split
to be save_pretrained's. The set covers:

    llama_f32      Llama, tied embeddings (like SmolLM2), float32
    mistral_f16    Mistral, sliding_window 16, float16, sharded (index.json)
    qwen2_bf16     Qwen2 (q/k/v bias), bfloat16, chat_template as a list
    llama3_bf16    Llama, llama3 rope_scaling, untied lm_head, bfloat16,
                   config.json in the legacy Hub form (rope_theta and
                   rope_scaling at top level, torch_dtype) as Llama-3.1 ships

Next to each model directory, <name>.expected.json holds what the C tests compare against, all
taken from transformers/torch (independent of refgeo):
    "config":  the hyperparameters as transformers' config object reads them
    "tensors": for a few tensors, HF name, dtype, HF shape and the first and
               last 16 elements converted to float32 by torch
    "state_dict_order", "max_shard_bytes": the order and shard limit
               save_pretrained used, to check refgeo's sharded writer
               against transformers' split (mistral_f16)
    "index":   save_pretrained's model.safetensors.index.json (sharded only)
    "synth":   the synth-model arguments that write the weights
Also roundtrip.safetensors.hex/.json (see write_roundtrip).
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

VOCAB = 300
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "How do I bake bread? Mix flour, water, salt and yeast, then wait.",
    "I cannot help with that request, but here is something else.",
    "Sure, here is a short story about a robot who learns to paint.",
    "Refusal directions live in the residual stream of the model.",
] * 4

COMMON = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
              bos_token_id=None, eos_token_id=2, pad_token_id=None)


def train_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def tokenizer_config(chat_template):
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, s in enumerate(SPECIALS)}
    return {"add_prefix_space": False, "added_tokens_decoder": added, "bos_token": None,
            "chat_template": chat_template, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
            "model_max_length": 256, "pad_token": None, "tokenizer_class": "GPT2Tokenizer",
            "unk_token": None}


STD, NORM_STD = 0.08, 0.1  # no tensor all zeros or all ones; every value checkable
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(x):
    """splitmix64's finaliser of x + the golden-ratio increment (Steele et al. 2014)."""
    z = (x + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def normal_at(seed, i, j):
    """z for element j of tensor i, as a float32."""
    h = mix64(seed ^ mix64(((i & 0xFFFFFFFF) << 40) ^ j))
    u1 = ((h >> 11) + 1.0) / 9007199254740992.0
    u2 = (mix64(h) >> 11) / 9007199254740992.0
    return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))


def formula_weights(model, seed):
    """Sets every parameter to the synth-model formula, as float32."""
    s = mix64(seed & 0xFFFFFFFF)
    params = dict(model.named_parameters())
    names = [n for n in model.state_dict().keys() if n in params]  # tied lm_head is not a separate tensor
    std, nstd = np.float32(STD), np.float32(NORM_STD)
    with torch.no_grad():
        for i, name in enumerate(names):
            p = params[name]
            z = np.array([normal_at(s, i, j) for j in range(p.numel())], dtype=np.float32)
            if name.endswith("norm.weight"):  # in float64, where nstd * z is exact (as the C code)
                w = (1.0 + np.float64(nstd) * z.astype(np.float64)).astype(np.float32)
            else:
                w = std * z
            p.copy_(torch.from_numpy(w.astype(np.float32)).reshape(p.shape))


def check_synth_model(refgeo, fixture_dir, ref_dir, synth):
    """refgeo synth-model must write transformers' tensors bit for bit, in
    save_pretrained's shards."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m")
        cmd = [refgeo, "synth-model", "--config", os.path.join(fixture_dir, "config.json"), "--out", out] + synth_args(synth)
        subprocess.run(cmd, check=True, capture_output=True)
        def tensors(d):
            t = {}
            for f in sorted(os.listdir(d)):
                if f.endswith(".safetensors"):
                    t.update({k: (f, v) for k, v in load_file(os.path.join(d, f)).items()})
            return t
        want, got = tensors(ref_dir), tensors(out)
        assert sorted(want) == sorted(got), (sorted(want), sorted(got))
        for k, (f, v) in want.items():
            gf, g = got[k]
            assert gf == f, (k, f, gf)
            assert v.dtype == g.dtype and v.shape == g.shape, k
            assert torch.equal(v.reshape(-1).view(torch.uint8), g.reshape(-1).view(torch.uint8)), k


def synth_args(synth):
    a = ["--seed", str(synth["seed"]), "--dtype", synth["dtype"], "--std", repr(synth["std"]),
         "--norm-std", repr(synth["norm_std"])]
    return a + (["--max-shard-size", synth["max_shard_size"]] if synth.get("max_shard_size") else [])


def expected_config(cfg, tied):
    rope = dict(cfg.rope_parameters or {})
    rtype = rope.get("rope_type", "default")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    out = {"n_layers": cfg.num_hidden_layers, "d_model": cfg.hidden_size, "n_heads": cfg.num_attention_heads,
           "n_kv_heads": cfg.num_key_value_heads, "head_dim": head_dim, "d_ff": cfg.intermediate_size,
           "vocab_size": cfg.vocab_size, "max_ctx": cfg.max_position_embeddings, "rms_eps": cfg.rms_norm_eps,
           "rope_theta": rope["rope_theta"], "rope_scaling": {"default": "none"}.get(rtype, rtype),
           "rope_factor": rope.get("factor", 1.0), "rope_low_freq_factor": rope.get("low_freq_factor", 0.0),
           "rope_high_freq_factor": rope.get("high_freq_factor", 0.0),
           "rope_orig_max_ctx": rope.get("original_max_position_embeddings", 0),
           "tied_embeddings": tied, "attn_qkv_bias": cfg.model_type == "qwen2" or bool(getattr(cfg, "attention_bias", False))}
    use_sw = getattr(cfg, "use_sliding_window", True)
    out["sliding_window"] = (getattr(cfg, "sliding_window", None) or 0) if use_sw else 0
    return out


def expected_tensors(model, names):
    sd = model.state_dict()
    out = []
    for n in names:
        t = sd[n]
        flat = t.reshape(-1).to(torch.float32)
        out.append({"name": n, "dtype": {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}[t.dtype],
                    "shape": list(t.shape), "first": flat[:16].tolist(), "last": flat[-16:].tolist()})
    return out


def legacy_config(path):
    """Rewrites config.json the way Hub models made before transformers 5
    store it: rope_theta and rope_scaling at top level, torch_dtype."""
    with open(path) as f:
        c = json.load(f)
    rope = c.pop("rope_parameters")
    c["rope_theta"] = rope.pop("rope_theta")
    c["rope_scaling"] = rope
    c["torch_dtype"] = c.pop("dtype")
    with open(path, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)


DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
SIDE_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"]


def main(out_root, ref_root, refgeo):
    tok = train_tokenizer()
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    specs = [
        ("llama_f32", LlamaForCausalLM, LlamaConfig(**COMMON, tie_word_embeddings=True, rope_theta=100000.0),
         torch.float32, None, CHATML, False),
        ("mistral_f16", MistralForCausalLM, MistralConfig(**COMMON, sliding_window=16, tie_word_embeddings=False),
         torch.float16, "60KB", CHATML, False),
        ("qwen2_bf16", Qwen2ForCausalLM, Qwen2Config(**COMMON, tie_word_embeddings=True, use_sliding_window=False,
                                                     rope_theta=1000000.0),
         torch.bfloat16, None, [{"name": "default", "template": CHATML}, {"name": "tool_use", "template": "x"}],
         False),
        ("llama3_bf16", LlamaForCausalLM, LlamaConfig(**COMMON, tie_word_embeddings=False, rope_theta=500000.0,
                                                      rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                    "original_max_position_embeddings": 64}),
         torch.bfloat16, None, CHATML, True),
    ]
    for seed, (name, cls, cfg, dtype, shard, template, legacy) in enumerate(specs):
        model = cls(cfg)
        synth = {"seed": 1000 + seed, "dtype": DTYPE_NAMES[dtype], "std": STD, "norm_std": NORM_STD}
        if shard:
            synth["max_shard_size"] = shard
        formula_weights(model, synth["seed"])
        model = model.to(dtype)
        d = os.path.join(ref_root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        kw = {"max_shard_size": shard} if shard else {}
        model.save_pretrained(d, **kw)
        os.remove(os.path.join(d, "generation_config.json"))
        if legacy:
            legacy_config(os.path.join(d, "config.json"))
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(tokenizer_config(template), f, indent=2)
        names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                 "model.layers.1.self_attn.k_proj.weight", "model.layers.1.mlp.down_proj.weight",
                 "model.layers.0.input_layernorm.weight", "model.norm.weight"]
        if not cfg.tie_word_embeddings:
            names.append("lm_head.weight")
        if name.startswith("qwen2"):
            names.append("model.layers.1.self_attn.v_proj.bias")
        tied = bool(cfg.tie_word_embeddings)
        # Read back the way a user would, so the expectations describe the files.
        reloaded = cls.from_pretrained(d, dtype=dtype)
        exp = {"config": expected_config(reloaded.config, tied),
               "tensors": expected_tensors(reloaded, names),
               "n_params": sum(p.numel() for p in reloaded.parameters()),
               "state_dict_order": list(reloaded.state_dict().keys()),
               "max_shard_bytes": int(shard[:-2]) * 1000 if shard else None,
               "synth": synth}
        index = os.path.join(d, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                exp["index"] = json.load(f)
        fixture = os.path.join(out_root, name)
        shutil.rmtree(fixture, ignore_errors=True)
        os.makedirs(fixture)
        for f in SIDE_FILES:
            shutil.copy(os.path.join(d, f), fixture)
        check_synth_model(refgeo, fixture, d, synth)
        with open(os.path.join(out_root, name + ".expected.json"), "w") as f:
            json.dump(exp, f, indent=1)
        print(name, sorted(os.listdir(d)), "synth-model: bit-identical")
    write_roundtrip(out_root)


def write_roundtrip(out_root):
    """roundtrip.safetensors.hex: the bytes (as hex text, so that no
    .safetensors file is committed) of three small tensors written by the
    reference safetensors library, and roundtrip.json with their values, so
    the C test can check its reader's values and that its writer reproduces
    the file byte for byte (same header layout and space padding)."""
    ref = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1.0,
           "b.weight": torch.linspace(-2, 2, 5).to(torch.bfloat16),
           "c": (torch.arange(8, dtype=torch.float32).reshape(2, 2, 2) / 3).to(torch.float16)}
    data = save(ref, metadata={"format": "pt"})
    hexed = data.hex()
    with open(os.path.join(out_root, "roundtrip.safetensors.hex"), "w") as f:
        f.write("\n".join(hexed[i : i + 64] for i in range(0, len(hexed), 64)) + "\n")
    desc = {k: {"shape": list(v.shape), "values": v.reshape(-1).to(torch.float32).tolist()} for k, v in ref.items()}
    with open(os.path.join(out_root, "roundtrip.json"), "w") as f:
        json.dump(desc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], os.path.expanduser(sys.argv[2]), sys.argv[3])
