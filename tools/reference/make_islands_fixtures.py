"""References for the islands' outer step and encodings
(src/adv_ft/islands_outer.c, islands_quant.c; tests/test_islands_outer.c).

1. torch.optim.SGD (lr 0.7, momentum 0.9, dampening 0) with nesterov=True
   and with nesterov=False, on a float32 parameter vector, for 5 steps of
   float32 pseudo-gradients of varied scale: the parameters after each step.
   PyTorch's SGD keeps b_1 = g_1 (no zero start); that is what the C code
   must reproduce.
2. The weighted mean of 3 pseudo-gradients with weights (tokens) 120, 80, 41,
   in float64, rounded to float32.
3. numpy's blockwise absmax quantization of a float32 vector (x / s rounded
   half to even, s = absmax / 127 or / 7, float32 throughout) decoded again,
   for blocks of 32 and 7 (a short last block), the byte counts by the
   formula 4 * blocks + n (int8) and 4 * blocks + sum ceil(len / 2) (int4),
   and torch's float32 -> bfloat16 -> float32 round trip.

Writes tests/fixtures/islands/outer.json and quant.json. Dev only, never run
by CI:

    /root/.cache/refgeo/ref-venv/bin/python tools/reference/make_islands_fixtures.py
"""
import json
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "islands")
RNG = np.random.default_rng(46)


def f32(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32)]


def sgd_run(theta0, grads, nesterov):
    p = torch.nn.Parameter(torch.tensor(theta0, dtype=torch.float32))
    opt = torch.optim.SGD([p], lr=0.7, momentum=0.9, dampening=0, nesterov=nesterov)
    out = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        out.append(f32(p.detach().numpy()))
    return out


def quant(x, block, levels):
    deq = np.empty_like(x)
    for at in range(0, len(x), block):
        b = x[at:at + block]
        s = np.float32(np.max(np.abs(b))) / np.float32(levels)
        s = np.float32(s)
        q = np.zeros_like(b) if s == 0 else np.clip(np.rint(b / s), -levels, levels).astype(np.float32)
        deq[at:at + block] = (q * s).astype(np.float32)
    return deq


def main():
    os.makedirs(OUT, exist_ok=True)
    n = 11
    theta0 = RNG.normal(0, 1, n).astype(np.float32)
    grads = [(RNG.normal(0, 1, n) * s).astype(np.float32) for s in (0.05, 0.3, 1.0, 0.01, 0.2)]
    deltas = [RNG.normal(0, 0.1, n).astype(np.float32) for _ in range(3)]
    weights = [120.0, 80.0, 41.0]
    mean = sum(w * d.astype(np.float64) for w, d in zip(weights, deltas)) / sum(weights)
    outer = {
        "lr": 0.7, "momentum": 0.9, "theta0": f32(theta0), "grads": [f32(g) for g in grads],
        "nesterov": sgd_run(theta0, grads, True), "plain": sgd_run(theta0, grads, False),
        "deltas": [f32(d) for d in deltas], "weights": weights, "mean": f32(mean.astype(np.float32)),
    }
    with open(os.path.join(OUT, "outer.json"), "w") as f:
        json.dump(outer, f, indent=1)

    x = np.concatenate([RNG.normal(0, 1, 60) * 0.01, RNG.normal(0, 1, 40) * 3.0, np.zeros(9),
                        [0.5, -0.5, 1.5, 2.5]]).astype(np.float32)  # ties at a scale of 1 in some block
    cases = []
    for block in (32, 7):
        blocks = [(at, min(block, len(x) - at)) for at in range(0, len(x), block)]
        cases.append({"block": block,
                      "int8": f32(quant(x, block, 127)), "int8_bytes": 4 * len(blocks) + len(x),
                      "int4": f32(quant(x, block, 7)), "int4_bytes": sum(4 + (ln + 1) // 2 for _, ln in blocks)})
    bf = torch.tensor(x).to(torch.bfloat16).to(torch.float32).numpy()
    with open(os.path.join(OUT, "quant.json"), "w") as f:
        json.dump({"x": f32(x), "cases": cases, "bf16": f32(bf), "f32_bytes": 4 * len(x), "bf16_bytes": 2 * len(x)}, f,
                  indent=1)


if __name__ == "__main__":
    main()
