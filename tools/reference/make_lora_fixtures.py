"""peft references for LoRA adapters (tests/test_lora.c).

For two tiny Hugging Face models of tests/fixtures/hf_tiny/ (the weights as
make_hf_tiny.py saves them in its reference directory, bit-identical to
what `refgeo synth-model` writes at test time) and for SmolLM2-135M-Instruct
(the Q4_1 GGUF, loaded with transformers' gguf_file as
make_forward_fixtures.py does), wraps the model with peft's get_peft_model
(LoraConfig: rank r, lora_alpha, target modules, dropout 0, no bias), sets
every lora_A and lora_B to random float32 values (B nonzero: with peft's
zero B the gradient of A would be zero and untested), and, in float64,
computes the mean next-token cross entropy of one fixed two-sequence batch
and its gradient with respect to every adapter matrix (torch.autograd).

Writes tests/fixtures/lora/<case>.json (model, rank, alpha, targets, the
batch, the loss, and the adapter tensors in peft's state-dict order with
names as peft's state dict gives them minus "base_model.model.", and their
shapes) and <case>.f32: little-endian float32, for each tensor in that
order its values, then for each tensor its gradient, then the gradient
with respect to the input embeddings of each sequence's tokens (what GCG
differentiates).

GGUF llama files hold q_proj/k_proj rows permuted for adjacent-pair RoPE
(llama.cpp convert_hf_to_gguf.py, LlamaModel.permute), and refgeo computes
in that layout; transformers un-permutes them on load. So for the GGUF case
the rows of q_proj's and k_proj's lora_B and of their gradients are stored
permuted the same way (the JSON says "rows_permuted" for those tensors).

Dev only, never run by CI:

    python tools/reference/make_lora_fixtures.py \\
        ~/.cache/refgeo/hf_tiny-ref $REFGEO_MODEL tests/fixtures/lora
"""
import json
import os
import sys

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

# case -> (model, rank, alpha, peft target_modules, sequence lengths, B's std)
CASES = {
    "llama_f32": ("llama_f32", 4, 6.0, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                  (9, 6), 0.1),
    "qwen2_bf16": ("qwen2_bf16", 3, 12.0, ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"], (8, 7), 0.1),
    "smollm2": ("gguf", 2, 4.0, ["q_proj", "v_proj"], (12, 9), 0.02),
}
PREFIX = "base_model.model."


def gguf_permute(w, n_head):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute, on the rows of w."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def one(case, tiny_dir, gguf, out_dir):
    src, rank, alpha, targets, lens, b_std = CASES[case]
    if src == "gguf":
        d, name = os.path.split(os.path.abspath(gguf))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_pretrained(os.path.join(tiny_dir, src), dtype=torch.float32)
    cfg = model.config
    lc = LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none")
    model = get_peft_model(model, lc).double().train(False)  # float64 math, no dropout
    gen = torch.Generator().manual_seed(11)
    names, tensors = [], []
    for pname, p in model.named_parameters():
        if "lora_" not in pname:
            assert not p.requires_grad, pname  # peft froze the base
            continue
        if "lora_A" in pname:  # peft's own init (kaiming uniform) in refgeo's bound, drawn here
            bound = 1.0 / np.sqrt(p.shape[1])
            v = (torch.rand(p.shape, generator=gen) * 2 - 1) * bound
        else:
            v = torch.randn(p.shape, generator=gen) * b_std
        with torch.no_grad():
            p.copy_(v.float().double())  # float32 values, exactly what the C test uploads
        names.append(pname.replace(PREFIX, "").replace(".default", ""))
        tensors.append(p)

    rng = np.random.default_rng(5)
    seqs = [rng.integers(0, cfg.vocab_size, n).tolist() for n in lens]
    total, rows, embeds = 0.0, 0, []
    for ids in seqs:
        # d loss / d embeddings (what GCG differentiates); the table is frozen
        emb = model.get_input_embeddings()(torch.tensor([ids])).detach().requires_grad_(True)
        embeds.append(emb)
        logits = model(inputs_embeds=emb).logits[0]
        ce = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="sum")
        total = total + ce
        rows += len(ids) - 1
    loss = total / rows
    loss.backward()

    values, grads, meta = [], [], []
    for name, p in zip(names, tensors):
        v, g = p.detach().numpy(), p.grad.numpy()
        permuted = src == "gguf" and "lora_B" in name and ("q_proj" in name or "k_proj" in name)
        if permuted:
            heads = cfg.num_attention_heads if "q_proj" in name else cfg.num_key_value_heads
            v, g = gguf_permute(v, heads), gguf_permute(g, heads)
        values.append(v.astype("<f4").reshape(-1))
        grads.append(g.astype("<f4").reshape(-1))
        entry = {"name": name, "shape": list(v.shape), "grad_norm": float(np.linalg.norm(p.grad.numpy()))}
        if permuted:
            entry["rows_permuted"] = True
        meta.append(entry)
    out = {
        "model": src,
        "rank": rank,
        "alpha": alpha,
        "targets": [t.replace("_proj", "") for t in targets],
        "seqs": seqs,
        "loss": loss.item(),
        "tensors": meta,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, case + ".json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    d_embed = [e.grad[0].numpy().astype("<f4").reshape(-1) for e in embeds]
    np.concatenate(values + grads + d_embed).tofile(os.path.join(out_dir, case + ".f32"))
    print(case, "loss", loss.item(), len(meta), "tensors", sum(v.size for v in values), "values")


def main():
    tiny_dir, gguf, out_dir = os.path.expanduser(sys.argv[1]), sys.argv[2], sys.argv[3]
    torch.set_num_threads(2)
    for case in CASES:
        one(case, tiny_dir, gguf, out_dir)


if __name__ == "__main__":
    main()
