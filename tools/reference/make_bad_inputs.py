"""Writes the hostile model inputs of tests/data/bad/ (issue 17).

Dev-only (never run by CI); the files it writes are committed. Regenerate with:

    python3 tools/reference/make_bad_inputs.py tests/data/bad

Standard library only: every byte is laid out here by hand from the format
specifications (ggml docs/gguf.md; huggingface/safetensors README), not by
refgeo's own writers, so the inputs do not inherit refgeo's assumptions.

Each hostile input is a tiny, otherwise valid one-layer Llama model (d_model
8, 2 heads of 4, 1 kv head, d_ff 16, vocabulary 4, float32) with exactly one
thing wrong. The two controls, ok-tiny.gguf.bin and ok-tiny-hf/, are that
model with nothing wrong: tests/test_hostile_files.c requires them to load,
which shows that each hostile input fails for its planted defect alone.

Names: .gitignore ignores *.gguf and *.safetensors (no model file may be
committed), so GGUF inputs end in .gguf.bin (refgeo reads any non-directory
as GGUF), and the Hugging Face directories hold their weights in a shard
named model-00001-of-00001.st, listed by model.safetensors.index.json (the
sharded form that most Hub models use; rg_model_load reads it the same way).
"""
import json
import os
import struct
import sys

D_MODEL, N_HEADS, N_KV_HEADS, HEAD_DIM, D_FF, VOCAB = 8, 2, 1, 4, 16, 4
GGUF_ALIGN = 32
SHARD = "model-00001-of-00001.st"

# ---------------------------------------------------------------- GGUF

GGUF_U32, GGUF_F32, GGUF_STRING, GGUF_ARRAY = 4, 6, 8, 9
GGML_F32 = 0


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    out = gguf_str(key) + struct.pack("<I", vtype)
    if vtype == GGUF_U32:
        return out + struct.pack("<I", value)
    if vtype == GGUF_F32:
        return out + struct.pack("<f", value)
    if vtype == GGUF_STRING:
        return out + gguf_str(value)
    assert vtype == GGUF_ARRAY  # value: a list of strings
    return out + struct.pack("<IQ", GGUF_STRING, len(value)) + b"".join(gguf_str(s) for s in value)


def gguf_tensors():
    """(GGUF name, ne in ggml order) of the tiny model; the embedding is tied."""
    q, kv = N_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM
    return [
        ("token_embd.weight", [D_MODEL, VOCAB]),
        ("output_norm.weight", [D_MODEL]),
        ("blk.0.attn_norm.weight", [D_MODEL]),
        ("blk.0.attn_q.weight", [D_MODEL, q]),
        ("blk.0.attn_k.weight", [D_MODEL, kv]),
        ("blk.0.attn_v.weight", [D_MODEL, kv]),
        ("blk.0.attn_output.weight", [q, D_MODEL]),
        ("blk.0.ffn_norm.weight", [D_MODEL]),
        ("blk.0.ffn_gate.weight", [D_MODEL, D_FF]),
        ("blk.0.ffn_up.weight", [D_MODEL, D_FF]),
        ("blk.0.ffn_down.weight", [D_FF, D_MODEL]),
    ]


def n_elems(ne):
    n = 1
    for d in ne:
        n *= d
    return n


def gguf_file(block_count=1, head_count=N_HEADS, extra=None, offset_shift=None):
    """The tiny model as GGUF bytes. EXTRA: (name, ne, stored bytes) of one
    more f32 tensor placed after the others, its data being STORED BYTES long
    whatever ne says. OFFSET_SHIFT: (name, bytes) moves one tensor's data
    offset (only the header changes)."""
    kvs = [
        gguf_kv("general.architecture", GGUF_STRING, "llama"),
        gguf_kv("general.name", GGUF_STRING, "tiny"),
        gguf_kv("llama.block_count", GGUF_U32, block_count),
        gguf_kv("llama.embedding_length", GGUF_U32, D_MODEL),
        gguf_kv("llama.feed_forward_length", GGUF_U32, D_FF),
        gguf_kv("llama.attention.head_count", GGUF_U32, head_count),
        gguf_kv("llama.attention.head_count_kv", GGUF_U32, N_KV_HEADS),
        gguf_kv("llama.context_length", GGUF_U32, 32),
        gguf_kv("llama.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5),
        gguf_kv("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
        gguf_kv("tokenizer.ggml.tokens", GGUF_ARRAY, ["a", "b", "c", "d"]),
        gguf_kv("tokenizer.ggml.merges", GGUF_ARRAY, []),
    ]
    tensors = [(name, ne, n_elems(ne) * 4) for name, ne in gguf_tensors()]
    if extra:
        tensors.append(extra)
    infos, data = b"", b""
    for name, ne, nbytes in tensors:
        offset = len(data)
        if offset_shift and offset_shift[0] == name:
            offset += offset_shift[1]
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", GGML_F32, offset)
        data += bytes(nbytes) + bytes(-nbytes % GGUF_ALIGN)
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    return head + bytes(-len(head) % GGUF_ALIGN) + data


# ---------------------------------------------------------------- Hugging Face

def hf_tensors():
    """(HF name, shape in row-major HF order) of the tiny model."""
    q, kv = N_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM
    p = "model.layers.0."
    return [
        ("model.embed_tokens.weight", [VOCAB, D_MODEL]),
        ("model.norm.weight", [D_MODEL]),
        (p + "input_layernorm.weight", [D_MODEL]),
        (p + "self_attn.q_proj.weight", [q, D_MODEL]),
        (p + "self_attn.k_proj.weight", [kv, D_MODEL]),
        (p + "self_attn.v_proj.weight", [kv, D_MODEL]),
        (p + "self_attn.o_proj.weight", [D_MODEL, q]),
        (p + "post_attention_layernorm.weight", [D_MODEL]),
        (p + "mlp.gate_proj.weight", [D_FF, D_MODEL]),
        (p + "mlp.up_proj.weight", [D_FF, D_MODEL]),
        (p + "mlp.down_proj.weight", [D_MODEL, D_FF]),
    ]


def safetensors_file(extra=None, offset_shift=None, header_len=None):
    """The tiny model's weights as safetensors bytes. EXTRA: (name, shape,
    data_offsets) of one more F32 tensor with no data of its own.
    OFFSET_SHIFT: (name, bytes) moves one tensor's data_offsets. HEADER_LEN
    replaces the 8-byte header length field."""
    header, offset = {}, 0
    for name, shape in hf_tensors():
        nbytes = n_elems(shape) * 4
        begin = offset + (offset_shift[1] if offset_shift and offset_shift[0] == name else 0)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, begin + nbytes]}
        offset += nbytes
    if extra:
        header[extra[0]] = {"dtype": "F32", "shape": extra[1], "data_offsets": extra[2]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads to 8 bytes
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + bytes(offset)


def hf_config(**override):
    config = {
        "model_type": "llama",
        "hidden_size": D_MODEL,
        "intermediate_size": D_FF,
        "num_hidden_layers": 1,
        "num_attention_heads": N_HEADS,
        "num_key_value_heads": N_KV_HEADS,
        "vocab_size": VOCAB,
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
    }
    config.update(override)
    return config


# A byte-level BPE over the four single-letter tokens, as `tokenizers` writes it.
TOKENIZER = {
    "version": "1.0",
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "d": 3}, "merges": []},
}


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def hostile_tokenizer(added_id):
    """TOKENIZER's vocabulary, compact and without the optional fields, with
    one added token of ADDED_ID (issue 17 defect 3)."""
    tok = {"model": {"vocab": TOKENIZER["model"]["vocab"], "merges": []}, "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": added_id, "content": "x"}]}
    return json.dumps(tok, separators=(",", ":")).encode()


def write_hf_dir(path, config=None, shard=None, tokenizer=None):
    os.makedirs(path, exist_ok=True)
    write(os.path.join(path, "config.json"), (json.dumps(config or hf_config(), indent=2) + "\n").encode())
    write(os.path.join(path, "tokenizer.json"),
          tokenizer if tokenizer is not None else (json.dumps(TOKENIZER, indent=2) + "\n").encode())
    index = {"metadata": {}, "weight_map": {name: SHARD for name, _ in hf_tensors()}}
    write(os.path.join(path, "model.safetensors.index.json"), (json.dumps(index, indent=2) + "\n").encode())
    write(os.path.join(path, SHARD), shard if shard is not None else safetensors_file())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    j = lambda name: os.path.join(out, name)

    write(j("ok-tiny.gguf.bin"), gguf_file())
    write_hf_dir(j("ok-tiny-hf"))

    # Defect 1: ne[0] = 2^62 + 16 f32 elements are 2^64 + 64 bytes, which
    # wrap around to 64 in 64-bit arithmetic; the file stores those 64 bytes.
    write(j("gguf-size-wrap.gguf.bin"), gguf_file(extra=("x", [2**62 + 16], 64)))
    # Defect 2: a layer count no file of this size can back.
    write(j("gguf-layers-1e9.gguf.bin"), gguf_file(block_count=10**9))
    write_hf_dir(j("hf-layers-1e9"), config=hf_config(num_hidden_layers=10**9))
    # Heads that do not divide the width (8 / 3), with no head_dim given.
    write(j("gguf-heads-3-width-8.gguf.bin"), gguf_file(head_count=3))
    write_hf_dir(j("hf-heads-3-width-8"), config=hf_config(num_attention_heads=3, num_key_value_heads=3))
    # Data past the end of the file: one tensor's offset moved 1 MiB on.
    write(j("gguf-offset-past-end.gguf.bin"), gguf_file(offset_shift=("blk.0.attn_q.weight", 1 << 20)))
    write_hf_dir(j("hf-offsets-past-end"),
                 shard=safetensors_file(offset_shift=("model.layers.0.self_attn.q_proj.weight", 1 << 20)))
    # A safetensors header length of 2^63 - 1.
    write_hf_dir(j("hf-header-2p63"), shard=safetensors_file(header_len=2**63 - 1))
    # Defect 4: an empty tensor (a zero dimension) whose other dimensions
    # multiply past 2^63; 2^53 is the largest integer a JSON double keeps.
    end = sum(n_elems(shape) * 4 for _, shape in hf_tensors())
    write_hf_dir(j("hf-zero-dim-overflow"),
                 shard=safetensors_file(extra=("x", [0, 2**53, 2**53, 2**53], [end, end])))
    # Defect 3: a 141-byte tokenizer.json whose one added token
    # claims id 2^24 - 1 (refgeo once sized its tables by it), and a negative id.
    write_hf_dir(j("hf-tok-id-2p24"), tokenizer=hostile_tokenizer(2**24 - 1))
    write_hf_dir(j("hf-tok-id-negative"), tokenizer=hostile_tokenizer(-1))


if __name__ == "__main__":
    main()
