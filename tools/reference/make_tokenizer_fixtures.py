"""Writes the tokenizer fixtures under tests/fixtures/tokenizer/.

Dev-only (never run by CI). Regenerate with:

    python tools/reference/make_tokenizer_fixtures.py \
        ~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/tokenizer
    python tools/reference/make_tokenizer_fixtures.py --model qwen2 \
        ~/.cache/refgeo/models/Qwen2.5-Coder-0.5B-Instruct.gguf tests/fixtures/tokenizer

Outputs:
  cases.json          the test strings (as hex, so invalid UTF-8 is exact) with
                      - smollm: ids from a `tokenizers.Tokenizer` built from the
                        GGUF's vocab + merges and SmolLM2's real pre-tokenizer
                        (Digits(individual_digits) + ByteLevel), ByteLevel
                        decoder and its control tokens as special added tokens
                        (that is SmolLM2's tokenizer.json), with and without
                        special-token parsing, and the decoded strings;
                      - mistral: ids from the `sentencepiece` package on
                        Mistral-7B v0.1's tokenizer.model.v1 (shipped with
                        mistral-common) and its decode.
                      Invalid UTF-8 is first replaced as
                      bytes.decode('utf-8', errors='replace') does.
  mistral_tokenizer.json  tokenizer.model.v1 converted as transformers'
                      LlamaConverter does (legacy: Prepend("▁") + Replace
                      normalizer, byte_fallback BPE, merges from its
                      SentencePieceExtractor), the file the C side loads.
  mistral_vocab.gguf.fixture  the same SentencePiece model as a vocab-only GGUF
                      (tokenizer.ggml.model "llama": tokens, scores, token
                      types), for the score-ordered GGUF path; its ids must
                      equal sentencepiece's.
  tiny_bytelevel_tokenizer.json  a small byte-level BPE trained here with
                      tokenizers (Llama-3 Split regex + ByteLevel(use_regex=
                      false), ignore_merges, BOS template); cases.json "tiny"
                      holds its ids (with BOS) and decode.
  cli.json            what `refgeo tokenize` must print for SmolLM2: a plain
                      text, its --no-special ids, and the one-turn chat prompt
                      rendered by transformers' apply_chat_template (the
                      GGUF's own Jinja template) with its ids.
  report.txt          how often the other references disagree: transformers'
                      GGUF loader vs the tokenizers reference (SmolLM2), and the
                      converted fast tokenizer vs sentencepiece (Mistral).

With --model qwen2 (Qwen2.5-Coder-0.5B-Instruct's GGUF) it writes only
  qwen_cases.json     the same 320 strings with "qwen": ids etc. as for smollm,
                      from a `tokenizers.Tokenizer` built from the GGUF's vocab
                      + merges and Qwen2's real tokenizer.json pipeline (that of
                      transformers' Qwen2Tokenizer): NFC normalizer, Split on
                      Qwen2's regex (isolated) + ByteLevel(use_regex=false),
                      ByteLevel decoder; control tokens (type 3) as special
                      added tokens and user-defined ones (type 4: <tool_call>,
                      the FIM tokens) as non-special added tokens, as
                      Qwen2.5's tokenizer.json has them.
  qwen_report.txt     transformers' GGUF loader vs that reference.
"""
import argparse
import json
import os
import random
import sys

import gguf
import sentencepiece as spm
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers.convert_slow_tokenizer import generate_merges

SPM_MODEL = os.path.join(os.path.dirname(__import__("mistral_common").__file__), "data", "tokenizer.model.v1")


def gguf_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def gguf_ints(reader, key):
    f = reader.fields[key]
    return [int(f.parts[i][0]) for i in f.data]


def gguf_bpe(gguf_path):
    """A byte-level BPE Tokenizer of the GGUF's vocab and merges, with the
    ByteLevel decoder; returns it and the token types."""
    r = gguf.GGUFReader(gguf_path)
    tokens = gguf_strings(r, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in gguf_strings(r, "tokenizer.ggml.merges")]
    types = gguf_ints(r, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.decoder = decoders.ByteLevel()
    return tok, tokens, types


def smollm_reference(gguf_path):
    tok, tokens, types = gguf_bpe(gguf_path)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


# transformers models/qwen2/tokenization_qwen2.py PRETOKENIZE_REGEX (Qwen2's tokenizer.json)
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2_reference(gguf_path):
    tok, tokens, types = gguf_bpe(gguf_path)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
    return tok


def bytelevel_case(ref, text):
    """ref's ids for TEXT with special tokens parsed and as plain text
    (split_special_tokens), and its decodes with and without specials."""
    ids = ref.encode(text, add_special_tokens=False).ids
    ref.encode_special_tokens = True
    ids_plain = ref.encode(text, add_special_tokens=False).ids
    ref.encode_special_tokens = False
    return {"ids": ids, "ids_plain": ids_plain, "decoded": ref.decode(ids, skip_special_tokens=False),
            "decoded_skip": ref.decode(ids, skip_special_tokens=True)}


def transformers_gguf(gguf_path):
    return transformers.AutoTokenizer.from_pretrained(os.path.dirname(gguf_path),
                                                      gguf_file=os.path.basename(gguf_path))


def qwen2_main(gguf_path, out_dir):
    ref = qwen2_reference(gguf_path)
    hf_gguf = transformers_gguf(gguf_path)
    cases, report = [], []
    for raw in test_strings():
        text = raw.decode("utf-8", errors="replace")
        case = {"hex": raw.hex(), "qwen": bytelevel_case(ref, text)}
        cases.append(case)
        hf_ids = hf_gguf.encode(text, add_special_tokens=False)
        if hf_ids != case["qwen"]["ids"]:
            report.append(f"qwen transformers-gguf differs on {text!r}: {hf_ids} vs {case['qwen']['ids']}")
    with open(os.path.join(out_dir, "qwen_cases.json"), "w") as f:
        json.dump({"qwen_reference": "tokenizers " + __import__("tokenizers").__version__, "cases": cases}, f,
                  ensure_ascii=True, separators=(",", ":"))
    summary = (f"{len(cases)} strings; transformers {transformers.__version__} GGUF tokenizer differs from the "
               f"tokenizers reference (Qwen2 pipeline) on {len(report)}")
    with open(os.path.join(out_dir, "qwen_report.txt"), "w") as f:
        f.write(summary + "\n" + "\n".join(report) + "\n")
    print(summary)


def test_strings():
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "  \t ", " \n ", "\r\n", "\r\n\r\n", "\t\t\tx",
        "a", "A", "hello", "Hello world", " Hello world", "Hello  world", "Hello   world  ", "hello\tworld\n",
        "The quick brown fox jumps over the lazy dog.", "I'm can't won't they're we've he'd you'll",
        "I'M CAN'T THEY'RE", "don't", "'s", "''", "\"quoted\"", "end.", "a,b;c:d!e?f",
        "0", "7", "42", "123", "1234", "12345", "3.14159", "-2.5e10", "1,000,000", "0xFF", "2024-12-02",
        "123456789012345678901234567890", "v1.2.3", "abc123def", "٣٤٥", "①②③", "½ ¼", "Ⅻ",
        "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
        "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }",
        "if x == 1:\n        pass\n    else:\n        y = [1, 2, 3]",
        "    indented", "\tdef g():\n\t\treturn None", "x=>x*2 && y||z", "a->b::c", "$HOME/.bashrc",
        "https://example.com/path?q=1&r=2#frag", "user@example.com", "<html><body>hi</body></html>",
        "SELECT * FROM t WHERE a >= 10;", "λx.x", "∑_{i=1}^{n} i² = n(n+1)/2", "E = mc²",
        "你好，世界", "日本語のテキストです。", "한국어 텍스트", "中文 English 混合", "漢字かなカナ",
        "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏿‍💻 coding", "🇺🇸🇫🇷", "❤️", "emoji 🎉 party 🎊!",
        "e\u0301", "n\u0303o", "a\u0300\u0301\u0302", "Zalgo: Z\u0351\u0360\u0361o", "café", "cafe\u0301",
        "Ünïcödé", "ñandú", "Straße", "İstanbul", "ǅ", "ﬁ ligature",
        "שלום עולם", "مرحبا بالعالم", "English עברית mixed", "\u202eRTL override\u202c", "فارسی ۱۲۳",
        "Привет, мир!", "Ελληνικά", "हिन्दी", "ไทย", "ქართული", "Հայերեն", "አማርኛ",
        "\u00a0nbsp", "a\u2003b", "zero\u200bwidth", "a\u3000b", "tab\u000bvt", "ff\u000c", "\u0085nel",
        "<|im_start|>user\nhi<|im_end|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
        "<|im_st", "<|im_start", "im_start|>", "<|im_start|", "<<|im_end|>>", "<|im_end|><|im_end|>",
        "text<|endoftext|>more", "<repo_name>x<file_sep>y", "<s>", "</s>", "<unk>", "<|endoftext",
        "<|IM_START|>", " <|im_start|> ", "a<|im_start|>b",
        "~!@#$%^&*()_+`-={}|[]\\:\";'<>?,./", "...", "---", "===", "!!!", "??", "…", "—", "«»", "“smart”",
        "a" * 50, " " * 20, "\n" * 10, "ab" * 30, "1" * 40, "😀" * 8, "x " * 25,
    ]
    invalid = [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
               b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xf4\x90\x80\x80",
               b"caf\xe9", b"\x80\x80\x80", b"ok \xe4\xbd good", b"\xef\xbb\xbfBOM", b"nul\x00byte"]
    out = [x.encode("utf-8") for x in s] + invalid
    rng = random.Random(20261202)
    pieces = [x for x in s if 0 < len(x) < 40] + [" ", "\n", "  ", "1", "99", "é", "😀", "<|im_end|>"]
    while len(out) < 320:
        k = rng.randint(2, 5)
        out.append("".join(rng.choice(pieces) for _ in range(k)).encode("utf-8"))
    return out


def mistral_converted():
    """tokenizer.model.v1 as a tokenizers BPE, built as transformers' LlamaConverter
    (legacy mode) does; its convert() path is broken in transformers 5 (it
    passes the piece scores where the extractor expects a model type, and so
    orders the merges by id instead of by score), so the same pieces are
    assembled here, with the merges ordered by piece score as it intends."""
    sp = spm.SentencePieceProcessor(model_file=SPM_MODEL)
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    merges = generate_merges(vocab, pieces)
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1)])
    tok.add_special_tokens([AddedToken(sp.id_to_piece(i), special=True, normalized=False) for i in range(3)])
    return sp, tok


def write_mistral_gguf(sp, path):
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_tokenizer_model("llama")
    n = sp.get_piece_size()
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types([3 if sp.is_control(i) else 2 if sp.is_unknown(i) else 6 if sp.is_byte(i)
                       else 5 if sp.is_unused(i) else 1 for i in range(n)])
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train_tiny(strings):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    corpus = [x.decode("utf-8", errors="replace") for x in strings] * 3
    corpus += ["The refusal direction is the difference of mean activations on harmful and harmless prompts."] * 20
    trainer = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|eot_id|>"], show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", 0)])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["smollm2", "qwen2"], default="smollm2")
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    gguf_path, out_dir = args.gguf, args.out_dir
    os.makedirs(out_dir, exist_ok=True)
    if args.model == "qwen2":
        qwen2_main(gguf_path, out_dir)
        return
    ref = smollm_reference(gguf_path)
    hf_gguf = transformers_gguf(gguf_path)
    sp, fast = mistral_converted()
    # Compact form (no indentation, merges as "left right" strings, which
    # tokenizers also reads) keeps the fixture under 2 MiB.
    fast_json = json.loads(fast.to_str())
    fast_json["model"]["merges"] = [" ".join(m) for m in fast_json["model"]["merges"]]
    with open(os.path.join(out_dir, "mistral_tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(fast_json, f, ensure_ascii=False, separators=(",", ":"))
    write_mistral_gguf(sp, os.path.join(out_dir, "mistral_vocab.gguf.fixture"))
    strings = test_strings()
    tiny = train_tiny(strings)
    tiny.save(os.path.join(out_dir, "tiny_bytelevel_tokenizer.json"), pretty=False)
    chat = hf_gguf.apply_chat_template([{"role": "user", "content": "hi <b>there</b>"}], add_generation_prompt=True,
                                       tokenize=False)
    plain = "<|im_start|>user\nhi<|im_end|> 2024"
    ref.encode_special_tokens = True
    plain_nospecial = ref.encode(plain, add_special_tokens=False).ids
    ref.encode_special_tokens = False
    with open(os.path.join(out_dir, "cli.json"), "w") as f:
        json.dump({"chat_user": "hi <b>there</b>", "chat_rendered": chat,
                   "chat_ids": ref.encode(chat, add_special_tokens=False).ids,
                   "plain": plain, "plain_ids": ref.encode(plain, add_special_tokens=False).ids,
                   "plain_nospecial_ids": plain_nospecial}, f, ensure_ascii=True)
    cases, report = [], []
    n_hf_diff = n_fast_diff = 0
    for raw in strings:
        text = raw.decode("utf-8", errors="replace")
        smollm = bytelevel_case(ref, text)
        ids = smollm["ids"]
        sp_ids = sp.encode(text)
        case = {
            "hex": raw.hex(),
            "smollm": smollm,
            "mistral": {"ids": sp_ids, "decoded": sp.decode(sp_ids)},
            "tiny": {"ids": tiny.encode(text).ids, "decoded": tiny.decode(tiny.encode(text).ids,
                                                                          skip_special_tokens=True)},
        }
        cases.append(case)
        hf_ids = hf_gguf.encode(text, add_special_tokens=False)
        if hf_ids != ids:
            n_hf_diff += 1
            report.append(f"smollm transformers-gguf differs on {text!r}: {hf_ids} vs {ids}")
        fast_ids = fast.encode(text, add_special_tokens=False).ids
        # the fast tokenizer parses <s> etc. in the text; sentencepiece never does
        fast.encode_special_tokens = True
        fast_plain = fast.encode(text, add_special_tokens=False).ids
        fast.encode_special_tokens = False
        if fast_plain != sp_ids:
            n_fast_diff += 1
            report.append(f"mistral fast-converted differs on {text!r}: {fast_plain} vs {sp_ids} (parsed: {fast_ids})")
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"smollm_reference": "tokenizers " + __import__("tokenizers").__version__,
                   "mistral_reference": "sentencepiece " + spm.__version__, "cases": cases}, f,
                  ensure_ascii=True, separators=(",", ":"))
    summary = (f"{len(cases)} strings; transformers {transformers.__version__} GGUF tokenizer differs from the "
               f"tokenizers reference on {n_hf_diff}; converted Mistral fast tokenizer differs from "
               f"sentencepiece on {n_fast_diff}")
    with open(os.path.join(out_dir, "report.txt"), "w") as f:
        f.write(summary + "\n" + "\n".join(report) + "\n")
    print(summary)


if __name__ == "__main__":
    main()
