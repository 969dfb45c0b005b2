"""Reference data for tests/test_dequant.c and tests/test_model_gguf.c (dev-only; CI never runs it).

Regenerate with:
    python tools/reference/make_dequant_fixtures.py \
        --model ~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf --out tests/fixtures/dequant

The independent reference is the `gguf` Python package (llama.cpp's gguf-py):
gguf.quants.dequantize for the block formats and GGUFReader for the real file.

Writes into --out:
  manifest.json          what every other file holds (read by the C tests)
  <type>.bin / <type>.f32  raw blocks of each type and their float32 dequantization
  real_<n>.f32           dequantized rows of tensors of the real SmolLM2 GGUF
  f32_to_half.f32, f32_to_bf16.u16, f32_to_f16.u16
                         float32 inputs and their bf16 (torch) / f16 (numpy) roundings
  q8_0_quantize.f32, q8_0_quantize.bin
                         float32 rows and gguf-py's q8_0 blocks of them (what refgeo's
                         8-bit products quantize float weights to)
  model_gguf.json        config values and tensor counts read by GGUFReader
"""
import argparse
import json
import os

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

RNG = np.random.default_rng(20240607)

# Offsets of the f16 scale fields in each k-quant block (ggml-common.h). Random
# bytes are valid k-quant blocks except that a random f16 scale can be NaN/inf
# or huge, so those fields are overwritten with sane values.
K_SCALE_OFFSETS = {T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}
QUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def sample_floats(n):
    """Normal values with a spread of magnitudes plus edge cases every converter must get right."""
    x = (RNG.standard_normal(n) * np.exp(RNG.uniform(-8, 4, n))).astype(np.float32)
    edge = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 6.1e-5, 5.96e-8, 1e-40, 3.0e38, -2.5, 0.1], np.float32)
    x[: len(edge)] = edge
    return x


def synthetic(qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = 1024 if block == 256 else 256
    if qtype == T.F32:
        raw = sample_floats(n).tobytes()
    elif qtype == T.F16:
        h = RNG.integers(0, 1 << 16, n, dtype=np.uint16)
        # Drop NaNs with the quiet bit clear: signalling NaNs may be quieted by
        # any float conversion and are not a meaningful comparison.
        snan = ((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0)
        h[snan] = 0x7E00
        h[:6] = [0x0000, 0x8000, 0x0001, 0x03FF, 0x7C00, 0xFC00]  # zeros, subnormals, infinities
        raw = h.tobytes()
    elif qtype == T.BF16:
        raw = quantize(sample_floats(n), qtype).tobytes()
    elif qtype in QUANTIZABLE:
        # Weight-like blocks, each with its own magnitude (f16 scales stay finite).
        x = RNG.standard_normal((n // block, block)) * np.exp(RNG.uniform(-6, 2, (n // block, 1)))
        raw = quantize(x.astype(np.float32), qtype).tobytes()
    else:
        b = RNG.integers(0, 256, (n // block, size), dtype=np.uint8)
        for off in K_SCALE_OFFSETS[qtype]:
            s = (RNG.standard_normal(n // block) * 0.02).astype(np.float16)
            s[0] = np.float16(6e-6)  # a subnormal scale
            b[:, off : off + 2] = s.view(np.uint8).reshape(-1, 2)
        raw = b.tobytes()
    blocks = np.frombuffer(raw, np.uint8).reshape(-1, size)
    expected = dequantize(blocks, qtype).astype(np.float32).reshape(-1)
    assert expected.size == n
    return raw, expected


def real_rows(reader, out):
    """Rows of one tensor per type present in the model file."""
    picks = [("token_embd.weight", [0, 1, 2, 12345, 49151]),        # Q8_0
             ("blk.0.attn_q.weight", [0, 7, 575]),                   # Q4_1
             ("blk.29.ffn_down.weight", [0, 300, 575]),              # Q4_1
             ("blk.13.attn_norm.weight", [0]),                       # F32
             ("output_norm.weight", [0])]                            # F32
    tensors = {t.name: t for t in reader.tensors}
    entries = []
    for i, (name, rows) in enumerate(picks):
        t = tensors[name]
        data = t.data.reshape(-1, t.data.shape[-1]) if t.data.ndim > 1 else t.data.reshape(1, -1)
        vals = dequantize(data[rows], t.tensor_type).astype(np.float32)
        fname = f"real_{i}.f32"
        vals.tofile(os.path.join(out, fname))
        entries.append({"tensor": name, "type": t.tensor_type.name.lower(), "rows": rows,
                        "n": int(t.shape[0]), "expected": fname})
    return entries


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    v = f.parts[f.data[0]]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(v).decode("utf-8")
    return v.item()


def model_facts(reader):
    """What test_model_gguf checks, read independently of refgeo by GGUFReader."""
    a = field(reader, "general.architecture")
    counts = {}
    for t in reader.tensors:
        counts[t.tensor_type.name.lower()] = counts.get(t.tensor_type.name.lower(), 0) + 1
    names = [t.name for t in reader.tensors]
    return {
        "arch": a,
        "name": field(reader, "general.name"),
        "n_layers": field(reader, f"{a}.block_count"),
        "d_model": field(reader, f"{a}.embedding_length"),
        "d_ff": field(reader, f"{a}.feed_forward_length"),
        "n_heads": field(reader, f"{a}.attention.head_count"),
        "n_kv_heads": field(reader, f"{a}.attention.head_count_kv"),
        "head_dim": field(reader, f"{a}.rope.dimension_count"),
        "max_ctx": field(reader, f"{a}.context_length"),
        "rms_eps": field(reader, f"{a}.attention.layer_norm_rms_epsilon"),
        "rope_theta": field(reader, f"{a}.rope.freq_base"),
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "n_tensors": len(reader.tensors),
        "tied_embeddings": "output.weight" not in names,
        "n_params": int(sum(int(t.n_elements) for t in reader.tensors)),
        "tensor_types": counts,
        "chat_template_len": len(field(reader, "tokenizer.chat_template").encode("utf-8")),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    synth = []
    for qtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                  T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]:
        raw, expected = synthetic(qtype)
        name = qtype.name.lower()
        with open(os.path.join(args.out, f"{name}.bin"), "wb") as f:
            f.write(raw)
        expected.tofile(os.path.join(args.out, f"{name}.f32"))
        synth.append({"type": name, "type_id": int(qtype), "n": int(expected.size),
                      "raw": f"{name}.bin", "expected": f"{name}.f32"})

    # Scalar conversions: bf16 by torch (round to nearest even), f16 by numpy.
    x = sample_floats(4096)
    mant = RNG.integers(0, 1 << 23, 64, dtype=np.uint32)
    x[100:164] = ((mant & ~np.uint32(0xFFFF)) | np.uint32(0x8000)).view(np.float32)  # exact bf16 ties
    x[164:228] = ((mant & ~np.uint32(0x1FFF)) | np.uint32(0x1000) | np.uint32(0x3F800000)).view(np.float32)  # f16 ties in [1, 2)
    x.tofile(os.path.join(args.out, "f32_to_half.f32"))
    torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().astype("<u2").tofile(
        os.path.join(args.out, "f32_to_bf16.u16"))
    with np.errstate(over="ignore"):
        x.astype(np.float16).view("<u2").tofile(os.path.join(args.out, "f32_to_f16.u16"))

    # q8_0 quantization by gguf-py, its own generator so the files above stay as they were.
    qrng = np.random.default_rng(20261204)
    xq = (qrng.standard_normal((64, 32)) * np.exp(qrng.uniform(-8, 3, (64, 1)))).astype(np.float32)
    xq[0] = 0                                   # d = 0: every q 0
    xq[1] = np.arange(-16, 16) + np.float32(0.5)  # ...
    xq[1, 0] = -127                             # ... d = 1 exactly: every x / d a tie, rounded away from zero
    xq[2, 5] = np.float32(1e-30)                # a tiny value beside the block's others
    xq.tofile(os.path.join(args.out, "q8_0_quantize.f32"))
    with open(os.path.join(args.out, "q8_0_quantize.bin"), "wb") as f:
        f.write(quantize(xq, T.Q8_0).tobytes())

    reader = gguf.GGUFReader(args.model)
    manifest = {"generator": "tools/reference/make_dequant_fixtures.py", "reference": f"gguf-py {gguf.__version__ if hasattr(gguf, '__version__') else ''}".strip(),
                "synthetic": synth, "real": real_rows(reader, args.out),
                "half": {"input": "f32_to_half.f32", "bf16": "f32_to_bf16.u16", "f16": "f32_to_f16.u16"},
                "quantize_q8_0": {"input": "q8_0_quantize.f32", "blocks": "q8_0_quantize.bin", "n": int(xq.size)}}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(args.out, "model_gguf.json"), "w") as f:
        json.dump(model_facts(reader), f, indent=1)


if __name__ == "__main__":
    main()
