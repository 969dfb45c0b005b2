"""torch autograd references for the backend's gradient operations.

Writes tests/fixtures/grad/grad_ops.json, read by tests/test_backend_grad.c.
Regenerate (dev only, never run by CI) from the repository root with:

    python tools/reference/make_grad_fixtures.py

Each case draws float32 inputs and an upstream gradient dy, runs the
operation in float64 torch (the float32 values cast up, so the reference
carries no float32 rounding of its own), and stores torch.autograd's
gradients of sum(y * dy) with respect to every input. The operations follow
transformers' Llama modules: LlamaRMSNorm, rotate-half RoPE (and the
adjacent-pair variant of GGUF files), SiLU-gated MLP, causal grouped-query
attention with an optional sliding window, nn.Embedding and cross entropy.
Floats are written with repr() of the float64 value (exact round trip).
"""
import json
import math
import os

import numpy as np
import torch

RNG = np.random.default_rng(20261202)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "grad", "grad_ops.json")
torch.set_default_dtype(torch.float64)


def f32(*shape, scale=1.0):
    """float32 draws, returned as the float64 tensor of the same values."""
    a = (RNG.standard_normal(shape) * scale).astype(np.float32)
    return torch.tensor(a.astype(np.float64), requires_grad=True)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def matmul_case():
    M, K, N = 5, 12, 7
    x, w, b, dy = f32(M, K), f32(N, K, scale=0.3), f32(N), f32(M, N)
    y = x @ w.T + b
    (y * dy).sum().backward()
    return {"M": M, "K": K, "N": N, "x": flat(x), "w": flat(w), "bias": flat(b), "dy": flat(dy),
            "dx": flat(x.grad), "dw": flat(w.grad), "dbias": flat(b.grad)}


def rmsnorm_case():
    rows, d, eps = 4, 16, 1e-5
    x, w, dy = f32(rows, d), f32(d), f32(rows, d)
    y = w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    (y * dy).sum().backward()
    return {"rows": rows, "d": d, "eps": eps, "x": flat(x), "w": flat(w), "dy": flat(dy),
            "dx": flat(x.grad), "dw": flat(w.grad)}


def rope_case(adjacent):
    T, nh, hd = 5, 2, 8
    pos = [0, 3, 1, 7, 2]
    # the angle is float32(pos) * float32(inv_freq) in refgeo and transformers
    inv_freq = (1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float32) / hd))).astype(np.float32)
    x, dy = f32(T, nh * hd), f32(T, nh * hd)
    # the float32 product's value; only cos and sin are taken in float64
    ang32 = (np.array(pos, dtype=np.float32)[:, None] * inv_freq[None, :]).astype(np.float32)
    v = x.reshape(T, nh, hd)
    c = torch.cos(torch.tensor(ang32.astype(np.float64)))[:, None, :]
    s = torch.sin(torch.tensor(ang32.astype(np.float64)))[:, None, :]
    if adjacent:
        a, b = v[..., 0::2], v[..., 1::2]
        y = torch.stack([a * c - b * s, b * c + a * s], dim=-1).reshape(T, nh * hd)
    else:
        a, b = v[..., : hd // 2], v[..., hd // 2:]
        y = torch.cat([a * c - b * s, b * c + a * s], dim=-1).reshape(T, nh * hd)
    (y * dy).sum().backward()
    return {"n_tokens": T, "n_heads": nh, "head_dim": hd, "adjacent": adjacent, "pos": pos,
            "inv_freq": [float(f) for f in inv_freq], "x": flat(x), "y": flat(y), "dy": flat(dy),
            "dx": flat(x.grad)}


def swiglu_case():
    n = 40
    g, u, dy = f32(n, scale=2.0), f32(n), f32(n)
    y = torch.nn.functional.silu(g) * u
    (y * dy).sum().backward()
    return {"n": n, "gate": flat(g), "up": flat(u), "dy": flat(dy), "dgate": flat(g.grad), "dup": flat(u.grad)}


def attention_case(window, seq=(0, 1, 0, 1, 1, 0, 1), nh=4, nkv=2, hd=8):
    """Causal GQA attention over a ragged batch: token t belongs to sequence
    seq[t], at the next position of that sequence (the default interleaves
    two sequences). lse is each query's log-sum-exp of its visible scaled
    scores, what the forward keeps for the backward."""
    pos, count = [], {}
    for s_ in seq:
        pos.append(count.get(s_, 0))
        count[s_] = pos[-1] + 1
    T = len(seq)
    q, k, v, dy = f32(T, nh * hd), f32(T, nkv * hd), f32(T, nkv * hd), f32(T, nh * hd)
    group = nh // nkv
    outs, lse = [], []
    for t in range(T):
        heads = []
        for h in range(nh):
            kvh = h // group
            js = [j for j in range(T) if seq[j] == seq[t] and pos[j] <= pos[t]
                  and (window == 0 or pos[j] > pos[t] - window)]
            kk = torch.stack([k[j, kvh * hd:(kvh + 1) * hd] for j in js])
            vv = torch.stack([v[j, kvh * hd:(kvh + 1) * hd] for j in js])
            scores = kk @ q[t, h * hd:(h + 1) * hd] / math.sqrt(hd)
            lse.append(float(torch.logsumexp(scores.detach(), dim=0)))
            heads.append(torch.softmax(scores, dim=0) @ vv)
        outs.append(torch.cat(heads))
    y = torch.stack(outs)
    (y * dy).sum().backward()
    return {"n_heads": nh, "n_kv_heads": nkv, "head_dim": hd, "window": window, "seq": list(seq), "pos": pos,
            "q": flat(q), "k": flat(k), "v": flat(v), "y": flat(y), "lse": lse, "dy": flat(dy),
            "dq": flat(q.grad), "dk": flat(k.grad), "dv": flat(v.grad)}


def embed_case():
    vocab, d = 10, 6
    ids = [3, 0, 3, 9, 5, 3]
    w, dy = f32(vocab, d), f32(len(ids), d)
    y = torch.nn.functional.embedding(torch.tensor(ids), w)
    (y * dy).sum().backward()
    return {"vocab": vocab, "d": d, "ids": ids, "w": flat(w), "dy": flat(dy), "dw": flat(w.grad)}


def cross_entropy_case():
    rows, vocab = 4, 11
    logits = f32(rows, vocab, scale=3.0)
    targets = [2, 0, 10, 2]
    scale = [0.25, 1.0, 0.0, 0.5]
    losses = torch.nn.functional.cross_entropy(logits, torch.tensor(targets), reduction="none")
    (losses * torch.tensor(scale)).sum().backward()
    return {"rows": rows, "vocab": vocab, "logits": flat(logits), "targets": targets, "scale": scale,
            "losses": flat(losses), "dlogits": flat(logits.grad)}


def main():
    cases = {
        "matmul": matmul_case(),
        "rmsnorm": rmsnorm_case(),
        "rope": [rope_case(False), rope_case(True)],
        "swiglu": swiglu_case(),
        "attention": [attention_case(0), attention_case(2)],
        "embed": embed_case(),
        "cross_entropy": cross_entropy_case(),
    }
    # Sequences longer than the CPU kernel's tiles (32 query tokens, 128
    # keys; backend/cpu/attention.c), interleaved unevenly, with groups of 3
    # query heads as in SmolLM2; a window that cuts through key tiles. Drawn
    # last so the cases above keep their values.
    long_seq = [0, 1, 1, 1] * 40 + [1] * 40
    cases["attention"] += [attention_case(0, long_seq, nh=6, nkv=2, hd=4),
                           attention_case(70, long_seq, nh=6, nkv=2, hd=4)]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(OUT))


if __name__ == "__main__":
    main()
