"""transformers + torch reference of a few training steps (tests/test_optimizer.c).

For two tiny Hugging Face models of tests/fixtures/hf_tiny/ (the weights as
make_hf_tiny.py saved them in its reference directory, identical to what
`refgeo synth-model` writes at test time), trains in float64 on one fixed
two-sequence batch: loss = mean next-token cross entropy over the batch's
rows, torch.nn.utils.clip_grad_norm_(max_norm=1.0), torch.optim.AdamW(lr,
weight decay 0.01, default betas and eps), STEPS updates. Writes
tests/fixtures/train/<name>.json with the batch and, per step, the loss
before the update and the gradient norm before clipping.

Dev only, never run by CI:

    python tools/reference/make_train_fixtures.py \
        ~/.cache/refgeo/hf_tiny-ref tests/fixtures/train
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

MODELS = ["llama_f32", "qwen2_bf16"]
STEPS, LR, WD, MAX_NORM = 5, 3e-3, 0.01, 1.0
RNG = np.random.default_rng(11)


def one(src_dir, out_dir, name):
    model = AutoModelForCausalLM.from_pretrained(os.path.join(src_dir, name), dtype=torch.float32).double()
    model.train(False)  # no dropout: the math of training without its noise
    vocab = model.config.vocab_size
    seqs = [RNG.integers(0, vocab, 8).tolist(), RNG.integers(0, vocab, 6).tolist()]
    n_rows = sum(len(s) - 1 for s in seqs)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    steps = []
    for _ in range(STEPS):
        opt.zero_grad()
        total = 0
        for ids in seqs:
            logits = model(torch.tensor([ids])).logits[0, :-1]
            total = total + torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="sum")
        loss = total / n_rows
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM))
        opt.step()
        steps.append({"loss": float(loss), "grad_norm": norm})
    out = {"model": name, "lr": LR, "weight_decay": WD, "max_norm": MAX_NORM, "seqs": seqs, "steps": steps}
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", path, [round(s["loss"], 5) for s in steps])


def main():
    for name in MODELS:
        one(os.path.expanduser(sys.argv[1]), sys.argv[2], name)


if __name__ == "__main__":
    main()
