"""transformers references for whole-model gradients (tests/test_backward.c).

For each tiny Hugging Face model of tests/fixtures/hf_tiny/ (the weights as
make_hf_tiny.py saved them in its reference directory, bit-identical to what
`refgeo synth-model` writes at test time), runs a two-sequence batch through
transformers' AutoModelForCausalLM in float64 and differentiates
    sum_r scale[r] * CE(logits[r], next token[r])
with torch.autograd. Writes tests/fixtures/backward/<name>.json with the
batch, the per-row losses, the gradient with respect to the input
embeddings, and for every parameter tensor (Hugging Face name) its gradient's
L2 norm over all elements plus every STRIDE-th element (a sample that keeps
the fixture small; the norm covers the rest). Floats carry 9 significant
digits.

Dev only, never run by CI:

    /root/.cache/refgeo-pyenv/bin/python tools/reference/make_backward_fixtures.py \
        ~/.cache/refgeo/hf_tiny-ref tests/fixtures/backward
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

MODELS = ["llama_f32", "qwen2_bf16", "mistral_f16", "llama3_bf16"]
STRIDE = 29
RNG = np.random.default_rng(7)


def flat(t):
    # 9 significant digits: float32 precision, far below the test's 1e-4
    return [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]


def one(src_dir, out_dir, name):
    model = AutoModelForCausalLM.from_pretrained(os.path.join(src_dir, name), dtype=torch.float32)
    model = model.double().train(False)  # eval-mode semantics (no dropout), float64 math
    vocab = model.config.vocab_size
    seqs = [RNG.integers(0, vocab, 7).tolist(), RNG.integers(0, vocab, 5).tolist()]
    # rows: every position but each sequence's last predicts the next token;
    # the scales weight rows unevenly and skip one (scale 0)
    rows, targets, scale = [], [], []
    embeds, losses = [], []
    total = 0
    for si, ids in enumerate(seqs):
        emb = model.get_input_embeddings()(torch.tensor([ids]))
        emb.retain_grad()  # d loss / d embeddings, for GCG; the table still gets its gradient
        logits = model(inputs_embeds=emb).logits[0]
        for p in range(len(ids) - 1):
            w = 0.0 if (si == 1 and p == 2) else 1.0 / (1 + p)
            ce = torch.nn.functional.cross_entropy(logits[p : p + 1], torch.tensor([ids[p + 1]]))
            rows.append([si, p])
            targets.append(ids[p + 1])
            scale.append(w)
            losses.append(float(ce))
            total = total + w * ce
        embeds.append(emb)
    total.backward()
    tensors = {}
    for pname, prm in model.named_parameters():
        g = prm.grad.reshape(-1)
        tensors[pname] = {"n": g.numel(), "norm": float(g.norm()), "sample": flat(g[::STRIDE])}
    out = {
        "model": name,
        "stride": STRIDE,
        "seqs": seqs,
        "rows": rows,
        "targets": targets,
        "scale": scale,
        "losses": losses,
        "d_embed": [flat(e.grad[0]) for e in embeds],
        "tensors": tensors,
    }
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", path, len(tensors), "tensors")


def main():
    src_dir, out_dir = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    for name in MODELS:
        one(os.path.expanduser(src_dir), out_dir, name)


if __name__ == "__main__":
    main()
