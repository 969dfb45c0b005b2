"""Writes the seed corpora of the libFuzzer harnesses (tests/fuzz/corpus/).

Dev-only (never run by CI). Regenerate with:

    python3 tools/reference/make_fuzz_seeds.py build/refgeo data/harmbench

Argument 1 is a refgeo binary (its `synth-model` writes the safetensors
weights), argument 2 a directory holding HarmBench's behavior CSVs
(harmbench_behaviors_text_all.csv and adv_training_behaviors.csv from
HarmBench's data/behavior_datasets), of which a few rows are copied.

Seeds are taken from the repository's own files: the tokenizers and chat
templates of tests/fixtures, the prompts of data/prompts, the published
curves of data/published. The GGUF seeds are tiny Llama-family models
written by gguf-py (llama.cpp's own GGUF writer, pinned in
requirements.txt), so they are GGUF files as the converter writes them,
not as refgeo's reader expects them. Multi-file inputs use the framing of
tests/fuzz/fuzz_util.h ("\\n@@ NAME\\n" before each file).

Seed file names never end in .gguf/.safetensors/.h5 (the repository ignores
those); every seed is a few KB so that the committed corpora stay small.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
FIX = os.path.join(ROOT, "tests", "fixtures")


def out(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(parts):
    """tests/fuzz/fuzz_util.h framing: b"\\n@@ NAME\\n" + content, per part."""
    b = b""
    for name, data in parts:
        if isinstance(data, str):
            data = data.encode()
        b += b"\n@@ " + name.encode() + b"\n" + data
    return b


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


# ------------------------------------------------------------------ tokenizers

def bytelevel_tokenizer():
    return read(os.path.join(FIX, "hf_tiny", "llama_f32", "tokenizer.json"))


def spm_tokenizer(form):
    """The Mistral-7B tokenizer.json of tests/fixtures cut to its first 400
    ids (the byte tokens and the most frequent pieces) and the merges among
    them, in one of the three forms the Hub uses: "legacy" (Prepend +
    Replace normalizer), "first" (Metaspace, prepend_scheme first, split
    false) or "split" (Metaspace, split true)."""
    t = json.loads(read(os.path.join(FIX, "tokenizer", "mistral_tokenizer.json")))
    keep = {k: v for k, v in t["model"]["vocab"].items() if v < 400}
    merges = []
    for m in t["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    t["model"]["vocab"] = keep
    t["model"]["merges"] = merges
    if form != "legacy":
        t["normalizer"] = None
        t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                              "split": form == "split"}
        t["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                        "split": form == "split"}
    return json.dumps(t, ensure_ascii=False)


def prompts(n):
    texts = []
    for name in ("harmful_val.json", "harmless_val.json"):
        for p in json.loads(read(os.path.join(ROOT, "data", "prompts", name)))[:n]:
            texts.append(p["instruction"] if isinstance(p, dict) else p)
    return texts


def tokenizer_seeds():
    config = read(os.path.join(FIX, "hf_tiny", "llama_f32", "tokenizer_config.json"))
    texts = prompts(2)
    ids = np.array([0, 1, 2, 5, 120, 299, 300, -1, 1 << 24], dtype="<i4").tobytes()
    out("tokenizer", "bytelevel_hf_tiny", frame([("tokenizer.json", bytelevel_tokenizer()),
                                                 ("tokenizer_config.json", config),
                                                 ("text", "<|im_start|>user\n" + texts[0]), ("ids", ids)]))
    out("tokenizer", "bytelevel_tiny", frame([("tokenizer.json", read(os.path.join(FIX, "tokenizer",
                                                                                   "tiny_bytelevel_tokenizer.json"))),
                                              ("text", texts[1] + " 12345 caf\u00e9 \U0001F600")]))
    out("tokenizer", "minimal_bytelevel", frame([("tokenizer.json", json.dumps(MINIMAL_TOKENIZER)),
                                                 ("text", "ab a<|endoftext|>c\n"), ("ids", ids)]))
    spm = json.loads(spm_tokenizer("split"))
    spm["model"]["vocab"] = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>", "<0x0A>", "<0x41>", "<0x43>", "\u2581",
                                                         "A", "B", "\u2581A", "AB"])}
    spm["model"]["merges"] = ["\u2581 A", "A B"]
    out("tokenizer", "minimal_spm", frame([("tokenizer.json", json.dumps(spm, ensure_ascii=False)),
                                           ("text", "AB A  C\n"), ("ids", ids)]))
    for i, form in enumerate(("legacy", "first", "split")):
        out("tokenizer", "spm_mistral_" + form, frame([("tokenizer.json", spm_tokenizer(form)),
                                                       ("text", texts[2 + i % 2] + "  two  spaces\n<s>")]))


# ------------------------------------------------------------------ chat templates

def chat_template_seeds():
    cases = json.loads(read(os.path.join(FIX, "chat_template", "cases.json")))
    convs = {}
    for c in cases["cases"]:
        convs.setdefault(c["family"], c["messages"])
    for t in cases["templates"]:
        msgs = convs.get(t["family"], [{"role": "user", "content": "Hi"}])
        out("chat_template", t["family"], frame([("template", t["template"])] +
                                                [(m["role"], m["content"]) for m in msgs]))
    out("chat_template", "by_name", frame([("name", "llama-2"), ("system", "Be brief."), ("user", "Hi"),
                                           ("assistant", "Hello"), ("user", "Bye")]))


# ------------------------------------------------------------------ HarmBench

def csv_rows(path, ids):
    import csv
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    col = header.index("BehaviorID")
    return header, [r for r in body if r[col] in ids]


def write_csv(header, rows):
    import csv
    import io
    s = io.StringIO()
    w = csv.writer(s, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return s.getvalue()


def harmbench_seeds(harmbench_dir):
    all_csv = os.path.join(harmbench_dir, "harmbench_behaviors_text_all.csv")
    import csv
    with open(all_csv, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    fc, tags = header.index("FunctionalCategory"), header.index("Tags")
    picks = [next(r for r in rows[1:] if r[fc] == "standard"),
             next(r for r in rows[1:] if r[fc] == "contextual" and "context" in r[tags]),
             next(r for r in rows[1:] if r[fc] == "copyright" and "hash_check" in r[tags])]
    picks[1][header.index("ContextString")] = picks[1][header.index("ContextString")][:300]
    out("behaviors", "harmbench_3rows", write_csv(header, picks))
    h2, r2 = csv_rows(os.path.join(harmbench_dir, "adv_training_behaviors.csv"),
                      {"adv_training_1", "adv_training_2"})
    out("behaviors", "r2d2_category", write_csv(h2, r2))

    ids = [r[header.index("BehaviorID")] for r in picks]
    out("test_cases", "completions_in", read(os.path.join(FIX, "harmbench", "completions_in.json")))
    out("test_cases", "completions_flat", read(os.path.join(FIX, "harmbench", "completions_flat.json")))
    out("test_cases", "test_cases", json.dumps({ids[0]: ["tc 1", "tc 2 \u00fc"], ids[1]: ["ctx\n\n---\n\nx"],
                                                ids[2]: []}))


def wilson(k, n, z=1.959963984540054):
    """Wilson score interval, as src/harmbench/asr_stats.c documents it."""
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / d
    return c - h, c + h


def curve_seeds():
    for name in sorted(os.listdir(os.path.join(ROOT, "data", "published"))):
        if name.endswith(".csv"):
            lines = read(os.path.join(ROOT, "data", "published", name)).splitlines(True)
            out("asr_curve", name[:-4], "".join(lines[:5]))
    rows = ["step,attack,classifier,n,successes,asr,wilson95_lo,wilson95_hi\n"]
    for step, (n, k) in ((0, (40, 12)), (250, (40, 3)), (500, (40, 0))):
        lo, hi = wilson(k, n)
        rows.append(f"{step},DirectRequest,refusal_match,{n},{k},{k / n:.6f},{lo:.6f},{hi:.6f}\n")
    out("asr_curve", "measured_asr", "".join(rows))


# ------------------------------------------------------------------ prompts, checkpoints

def prompt_seeds():
    for name in ("harmful_val", "harmless_val"):
        items = json.loads(read(os.path.join(ROOT, "data", "prompts", name + ".json")))[:3]
        texts = [p["instruction"] for p in items]
        out("prompts", name, frame([("prompts.json", json.dumps(items, indent=4)),
                                    ("prompts.txt", "\r\n".join(texts) + "\n\n"),
                                    ("prompts.csv", write_csv(["Behavior", "SemanticCategory"],
                                                              [[p["instruction"], p["category"] or ""] for p in items]))]))


def checkpoint_seeds():
    """Manifests and run directories of the forms tests/test_geometry_checkpoints.c uses."""
    out("checkpoints", "manifest", frame([("manifest.csv", "step,path\n20,checkpoint-20\n0,base.gguf\n10,checkpoint-10\n"),
                                          ("dirs", "checkpoint-10\ncheckpoint-20\n")]))
    out("checkpoints", "run_dir", frame([("dirs", "checkpoint-0\ncheckpoint-500\ncheckpoint-1000\nruns\n")]))


# ------------------------------------------------------------------ models

TINY = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu"}


def synth(refgeo, config, dtype, shard=None):
    """Weights of CONFIG written by `refgeo synth-model`: {file name: bytes}."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        cmd = [refgeo, "synth-model", "--config", cfg, "--out", os.path.join(tmp, "m"), "--dtype", dtype]
        if shard:
            cmd += ["--max-shard-size", shard]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return {n: read(os.path.join(tmp, "m", n), "rb") for n in sorted(os.listdir(os.path.join(tmp, "m")))}


def model_seeds(refgeo):
    tok = bytelevel_tokenizer()
    tok_config = read(os.path.join(FIX, "hf_tiny", "llama_f32", "tokenizer_config.json"))
    llama = dict(TINY, model_type="llama", vocab_size=300, tie_word_embeddings=True)
    files = synth(refgeo, llama, "bf16")
    out("safetensors", "tiny_llama_bf16.st", files["model.safetensors"])
    out("safetensors", "roundtrip.st", bytes.fromhex(read(os.path.join(FIX, "hf_tiny", "roundtrip.safetensors.hex"))))
    out("hf_dir", "tiny_llama_bf16", frame([("config.json", files["config.json"]),
                                            ("model.safetensors", files["model.safetensors"]),
                                            ("tokenizer.json", tok), ("tokenizer_config.json", tok_config)]))
    qwen = dict(TINY, model_type="qwen2", vocab_size=300, tie_word_embeddings=False)
    files = synth(refgeo, qwen, "f16", "7KB")
    shards = [n for n in files if n.endswith(".safetensors")]
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], shards
    out("safetensors", "tiny_qwen2_f16_shard1.st", files[shards[0]])
    out("hf_dir", "tiny_qwen2_f16_sharded", frame(
        [("config.json", files["config.json"]), ("model.safetensors.index.json", files["model.safetensors.index.json"])] +
        [(n, files[n]) for n in shards] + [("tokenizer.json", tok),
                                           ("chat_template.jinja", json.loads(tok_config)["chat_template"])]))


MINIMAL_TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2, "ab": 3, "\u0120": 4, "\u0120a": 5, "c": 6, "\u010a": 7},
              "merges": [["a", "b"], ["\u0120", "a"]]},
}


def safetensors_bytes(tensors):
    """A safetensors file (huggingface/safetensors README layout) of float32
    TENSORS {name: numpy array}, header padded to 8 bytes as the library does."""
    header, data = {}, b""
    for name, a in tensors.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + data


def minimal_hf_seed():
    """The smallest HF directory the loader accepts (8 tokens, width 4, one
    head, float32), so that most mutations land in config and headers.
    (synth-model needs a vocabulary of at least 259 tokens.)"""
    cfg = dict(TINY, model_type="llama", vocab_size=8, hidden_size=4, intermediate_size=4, num_attention_heads=1,
               num_key_value_heads=1, head_dim=4, tie_word_embeddings=True)
    shapes = {"model.embed_tokens.weight": (8, 4), "model.norm.weight": (4,)}
    for suffix, shape in (("input_layernorm.weight", (4,)), ("self_attn.q_proj.weight", (4, 4)),
                          ("self_attn.k_proj.weight", (4, 4)), ("self_attn.v_proj.weight", (4, 4)),
                          ("self_attn.o_proj.weight", (4, 4)), ("post_attention_layernorm.weight", (4,)),
                          ("mlp.gate_proj.weight", (4, 4)), ("mlp.up_proj.weight", (4, 4)),
                          ("mlp.down_proj.weight", (4, 4))):
        shapes["model.layers.0." + suffix] = shape
    st = safetensors_bytes({n: np.full(s, 0.5) for n, s in shapes.items()})
    out("hf_dir", "minimal_llama_f32", frame([("config.json", json.dumps(cfg)), ("model.safetensors", st),
                                              ("tokenizer.json", json.dumps(MINIMAL_TOKENIZER))]))
    out("safetensors", "minimal_f32.st", st)


def gguf_bytelevel(path):
    """A tiny arch-llama GGUF with the hf_tiny byte-level tokenizer (gpt2,
    pre smollm, as SmolLM2's GGUF), f16 embedding, tied head."""
    t = json.loads(bytelevel_tokenizer())
    vocab = sorted(t["model"]["vocab"].items(), key=lambda kv: kv[1])
    special = {a["id"] for a in t["added_tokens"] if a["special"]}
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-bytelevel")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list([k for k, _ in vocab])
    w.add_token_types([3 if i in special else 1 for _, i in vocab])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(json.loads(read(os.path.join(FIX, "hf_tiny", "llama_f32",
                                                     "tokenizer_config.json")))["chat_template"])
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (300, 8), "output_norm.weight": (8,), "blk.0.attn_norm.weight": (8,),
              "blk.0.attn_q.weight": (8, 8), "blk.0.attn_k.weight": (4, 8), "blk.0.attn_v.weight": (4, 8),
              "blk.0.attn_output.weight": (8, 8), "blk.0.ffn_norm.weight": (8,), "blk.0.ffn_gate.weight": (16, 8),
              "blk.0.ffn_up.weight": (16, 8), "blk.0.ffn_down.weight": (8, 16)}
    for name, shape in shapes.items():
        a = (0.02 * rng.standard_normal(shape)).astype(np.float16 if name == "token_embd.weight" else np.float32)
        w.add_tensor(name, a)
    write(w)


def gguf_spm(path):
    """A tiny arch-qwen2 GGUF (q/k/v biases, untied output) with a llama
    (SentencePiece) tokenizer: <unk> <s> </s>, the 256 byte tokens, pieces."""
    pieces = ["\u2581", "\u2581t", "he", "\u2581the", "\u2581a", "in", "\u2581I", "er", "on", "\u2581w"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    n = len(tokens)
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name("tiny-spm")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_scores(scores)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    rng = np.random.default_rng(1)
    shapes = {"token_embd.weight": (n, 8), "output.weight": (n, 8), "output_norm.weight": (8,),
              "blk.0.attn_norm.weight": (8,), "blk.0.attn_q.weight": (8, 8), "blk.0.attn_q.bias": (8,),
              "blk.0.attn_k.weight": (8, 8), "blk.0.attn_k.bias": (8,), "blk.0.attn_v.weight": (8, 8),
              "blk.0.attn_v.bias": (8,), "blk.0.attn_output.weight": (8, 8), "blk.0.ffn_norm.weight": (8,),
              "blk.0.ffn_gate.weight": (16, 8), "blk.0.ffn_up.weight": (16, 8), "blk.0.ffn_down.weight": (8, 16)}
    for name, shape in shapes.items():
        w.add_tensor(name, (0.02 * rng.standard_normal(shape)).astype(np.float16 if "embd" in name else np.float32))
    write(w)


def gguf_minimal(path):
    """The smallest model the loader accepts (8 tokens, width 4, one head), so
    that most mutations land in the metadata and tensor infos."""
    tokens = ["<|endoftext|>", "a", "b", "ab", "\u0120", "\u0120a", "c", "\u010a"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(16)
    w.add_embedding_length(4)
    w.add_feed_forward_length(4)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3] + [1] * 7)
    w.add_token_merges(["a b", "\u0120 a"])
    w.add_eos_token_id(0)
    for name, shape in {"token_embd.weight": (8, 4), "output_norm.weight": (4,), "blk.0.attn_norm.weight": (4,),
                        "blk.0.attn_q.weight": (4, 4), "blk.0.attn_k.weight": (4, 4), "blk.0.attn_v.weight": (4, 4),
                        "blk.0.attn_output.weight": (4, 4), "blk.0.ffn_norm.weight": (4,),
                        "blk.0.ffn_gate.weight": (4, 4), "blk.0.ffn_up.weight": (4, 4),
                        "blk.0.ffn_down.weight": (4, 4)}.items():
        w.add_tensor(name, np.full(shape, 0.5, dtype=np.float32))
    write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_seeds():
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("tiny_llama_gpt2", gguf_bytelevel), ("tiny_qwen2_spm", gguf_spm),
                         ("minimal_llama", gguf_minimal)):
            p = os.path.join(tmp, name + ".gguf")
            fn(p)
            out("gguf", name + ".gguf.seed", read(p, "rb"))


# ------------------------------------------------------------------ HDF5

def h5_seeds():
    """The HDF5 harnesses read their input as a list of choices (see
    tests/fuzz/h5_build.h), not as an HDF5 file; a few fixed random byte
    strings start them off (fuzz_directions_h5: then a newline and a spec suffix)."""
    rng = random.Random(17)
    for i, n in enumerate((64, 256, 1024)):
        out("acts_h5", f"choices_{i}", bytes(rng.randrange(256) for _ in range(n)))
    for i, (n, spec) in enumerate(((64, b"step=100,pos=-1,layer=0"), (256, b"layer=1"), (512, b"step=7"))):
        choices = bytes(rng.randrange(256) for _ in range(n)).replace(b"\n", b" ")
        out("directions_h5", f"choices_{i}", choices + b"\n" + spec)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    refgeo, harmbench_dir = sys.argv[1], sys.argv[2]
    tokenizer_seeds()
    chat_template_seeds()
    harmbench_seeds(harmbench_dir)
    curve_seeds()
    prompt_seeds()
    checkpoint_seeds()
    model_seeds(refgeo)
    minimal_hf_seed()
    gguf_seeds()
    h5_seeds()


if __name__ == "__main__":
    main()
