"""PyTorch's prefill of the Mistral-7B shape on one GPU: refgeo's peer in
bench/gpu_check.sh.

The same shapes as bench/synth_7b.sh's model (hidden 4096, intermediate
14336, 32 layers, 32 query and 8 key/value heads of 128, vocab 32000), bf16
weights drawn at random (speed does not depend on their values), the batch
refgeo's bench_forward runs: B sequences of T tokens, causal attention
through torch's scaled_dot_product_attention (FlashAttention on an H100 or
H200), RoPE and RMSNorm as Mistral's, and logits of every sequence's last
position. Prints the median tokens/s of --repeats timed passes after one
warm-up, as its last line.

    python bench/gpu_prefill_peer.py --batch 4 --tokens 512 --repeats 3
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 32, 8, 128, 32000
THETA, EPS = 10000.0, 1e-5


def rms_norm(x, w):
    return w * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


def rope(x, cos, sin):  # x [B, H, T, D], rotate-half as transformers' Mistral
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, device=dev, generator=g, dtype=torch.float32) * 0.02).to(dt)

    layers = [dict(q=w(HEADS * HEAD_DIM, HIDDEN), k=w(KV_HEADS * HEAD_DIM, HIDDEN), v=w(KV_HEADS * HEAD_DIM, HIDDEN),
                   o=w(HIDDEN, HEADS * HEAD_DIM), gate=w(INTER, HIDDEN), up=w(INTER, HIDDEN), down=w(HIDDEN, INTER),
                   n1=torch.ones(HIDDEN, device=dev, dtype=dt), n2=torch.ones(HIDDEN, device=dev, dtype=dt))
              for _ in range(LAYERS)]
    emb, head, norm = w(VOCAB, HIDDEN), w(VOCAB, HIDDEN), torch.ones(HIDDEN, device=dev, dtype=dt)
    B, T = args.batch, args.tokens
    inv_freq = 1.0 / THETA ** (torch.arange(0, HEAD_DIM, 2, device=dev, dtype=torch.float32) / HEAD_DIM)
    ang = torch.outer(torch.arange(T, device=dev, dtype=torch.float32), inv_freq)
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos().to(dt), ang.sin().to(dt)
    ids = torch.randint(0, VOCAB, (B, T), device=dev, generator=g)

    @torch.no_grad()
    def forward():
        x = emb[ids]
        for L in layers:
            h = rms_norm(x, L["n1"])
            q = (h @ L["q"].T).view(B, T, HEADS, HEAD_DIM).transpose(1, 2)
            k = (h @ L["k"].T).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = (h @ L["v"].T).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
            x = x + a @ L["o"].T
            h = rms_norm(x, L["n2"])
            x = x + (F.silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
        return rms_norm(x[:, -1], norm).float() @ head.float().T

    forward()
    torch.cuda.synchronize()
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        forward()
        torch.cuda.synchronize()
        rates.append(B * T / (time.perf_counter() - t0))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {B} x {T} tokens")
    print(f"{statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
