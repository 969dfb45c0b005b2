"""Writes the tiny Hugging Face model directories under tests/fixtures/hf_tiny/.

Dev-only (never run by CI). Regenerate with:

    /root/.cache/refgeo-pyenv/bin/python tools/reference/make_hf_tiny.py tests/fixtures/hf_tiny

Each model is a random-weight LlamaForCausalLM / MistralForCausalLM /
Qwen2ForCausalLM (d_model 64, 2 layers, vocab 300) saved by transformers'
save_pretrained as safetensors, together with a real byte-level BPE
tokenizer.json (trained with the `tokenizers` library on a tiny corpus) and a
tokenizer_config.json carrying a ChatML chat_template. The set covers:

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
Also roundtrip.safetensors/.json (see write_roundtrip).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
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


def randomize(model, seed):
    """Replaces every parameter with normal noise (norm weights around 1) so
    that no tensor is all zeros or all ones and every value is checkable."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.08 * noise)


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


def main(out_root):
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
        torch.manual_seed(seed)
        model = cls(cfg)
        randomize(model, 1000 + seed)
        model = model.to(dtype)
        d = os.path.join(out_root, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
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
               "max_shard_bytes": int(shard[:-2]) * 1000 if shard else None}
        with open(os.path.join(out_root, name + ".expected.json"), "w") as f:
            json.dump(exp, f, indent=1)
        print(name, sorted(os.listdir(d)))
    write_roundtrip(out_root)


def write_roundtrip(out_root):
    """roundtrip.safetensors: three small tensors written by the reference
    safetensors library, and roundtrip.json with their values, so the C test
    can check its reader's values and that its writer reproduces the file
    byte for byte (same header layout and space padding)."""
    ref = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1.0,
           "b.weight": torch.linspace(-2, 2, 5).to(torch.bfloat16),
           "c": (torch.arange(8, dtype=torch.float32).reshape(2, 2, 2) / 3).to(torch.float16)}
    save_file(ref, os.path.join(out_root, "roundtrip.safetensors"), metadata={"format": "pt"})
    desc = {k: {"shape": list(v.shape), "values": v.reshape(-1).to(torch.float32).tolist()} for k, v in ref.items()}
    with open(os.path.join(out_root, "roundtrip.json"), "w") as f:
        json.dump(desc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf_tiny")
