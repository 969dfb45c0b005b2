"""torch references for src/adv_ft/adamw.c (tests/test_adamw.c).

Runs torch.optim.AdamW (weight decay 0.1, betas and eps at their defaults)
on two parameter tensors for 6 steps in float64, with the gradients clipped
by torch.nn.utils.clip_grad_norm_(max_norm=1.0) and the learning rate from
transformers' get_cosine_schedule_with_warmup (2 warmup steps, 6 in all).
The gradients are float32 draws of varied scale, so that clipping acts on
some steps and not on others. Writes tests/fixtures/adamw/adamw.json: the
initial parameters, each step's gradients, learning rate, total gradient
norm and the parameters after the step.

Dev only, never run by CI:

    python tools/reference/make_adamw_fixtures.py
"""
import json
import os

import numpy as np
import torch
from transformers import get_cosine_schedule_with_warmup

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "adamw", "adamw.json")
RNG = np.random.default_rng(5)
BASE_LR, WD, STEPS, WARMUP, MAX_NORM = 1e-2, 0.1, 6, 2, 1.0
SIZES = [7, 5]
GRAD_SCALES = [0.05, 2.0, 0.3, 5.0, 0.01, 1.0]


def f32(n, scale):
    return (RNG.standard_normal(n) * scale).astype(np.float32).astype(np.float64)


def main():
    params = [torch.tensor(f32(n, 1.0), requires_grad=True) for n in SIZES]
    init = [p.detach().tolist() for p in params]
    opt = torch.optim.AdamW(params, lr=BASE_LR, weight_decay=WD)
    sched = get_cosine_schedule_with_warmup(opt, WARMUP, STEPS)
    steps = []
    for t in range(STEPS):
        grads = [f32(n, GRAD_SCALES[t]) for n in SIZES]
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        lr = opt.param_groups[0]["lr"]
        norm = float(torch.nn.utils.clip_grad_norm_(params, MAX_NORM))
        opt.step()
        sched.step()
        steps.append({"grads": [g.tolist() for g in grads], "lr": lr, "total_norm": norm,
                      "params": [p.detach().tolist() for p in params]})
    out = {"base_lr": BASE_LR, "weight_decay": WD, "warmup": WARMUP, "total": STEPS, "max_norm": MAX_NORM,
           "init": init, "steps": steps}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(OUT))


if __name__ == "__main__":
    main()
