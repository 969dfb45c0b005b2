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

    python tools/reference/make_backward_fixtures.py \
        ~/.cache/refgeo/hf_tiny-ref tests/fixtures/backward
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

MODELS = ["llama_f32", "qwen2_bf16", "mistral_f16", "llama3_bf16"]
# Variants: fixture name -> (model directory, config overrides, sequence
# lengths). mistral_f16's window of 16 never cuts a 7-token sequence, so
# mistral_f16_window4 loads the same weights with sliding_window 4 and runs
# 12- and 9-token sequences: most queries see only their last 4 keys. The test
# makes the same config change to its copy of the model.
VARIANTS = {name: (name, {}, (7, 5)) for name in MODELS}
VARIANTS["mistral_f16_window4"] = ("mistral_f16", {"sliding_window": 4}, (12, 9))
STRIDE = 29
RNG = np.random.default_rng(7)


def flat(t):
    # 9 significant digits: float32 precision, far below the test's 1e-4
    return [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]


def one(src_dir, out_dir, name):
    model_dir, overrides, lens = VARIANTS[name]
    model = AutoModelForCausalLM.from_pretrained(os.path.join(src_dir, model_dir), dtype=torch.float32, **overrides)
    model = model.double().train(False)  # eval-mode semantics (no dropout), float64 math
    vocab = model.config.vocab_size
    seqs = [RNG.integers(0, vocab, n).tolist() for n in lens]
    # rows: every position but each sequence's last predicts the next token;
    # the scales weight rows unevenly and skip one (scale 0)
    rows, targets, scale = [], [], []
    embeds, losses = [], []
    total = 0
    logits_of = []
    for si, ids in enumerate(seqs):
        emb = model.get_input_embeddings()(torch.tensor([ids]))
        emb.retain_grad()  # d loss / d embeddings, for GCG; the table still gets its gradient
        logits = model(inputs_embeds=emb).logits[0]
        logits_of.append(logits.detach())
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
    if "sliding_window" in overrides:  # the window must change the numbers, or the fixture tests nothing
        full = AutoModelForCausalLM.from_pretrained(os.path.join(src_dir, model_dir), dtype=torch.float32).double()
        with torch.no_grad():
            gap = (full(torch.tensor([seqs[0]])).logits[0] - logits_of[0]).abs().max().item()
        assert gap > 1e-2, "window %d leaves the logits unchanged (%g)" % (overrides["sliding_window"], gap)
        print(name, "max |logit change| from the window:", gap)
    tensors = {}
    for pname, prm in model.named_parameters():
        g = prm.grad.reshape(-1)
        tensors[pname] = {"n": g.numel(), "norm": float(g.norm()), "sample": flat(g[::STRIDE])}
    out = {
        "model": model_dir,
        "stride": STRIDE,
        "seqs": seqs,
        "rows": rows,
        "targets": targets,
        "scale": scale,
        "losses": losses,
        "d_embed": [flat(e.grad[0]) for e in embeds],
        "tensors": tensors,
    }
    if overrides:
        out["config_overrides"] = overrides
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", path, len(tensors), "tensors")


def main():
    src_dir, out_dir = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    for name in VARIANTS:
        one(os.path.expanduser(src_dir), out_dir, name)


if __name__ == "__main__":
    main()
