"""Writes tests/fixtures/tokenizer/spm_forms.json: the ids Hugging Face
`tokenizers` gives for the Mistral-7B tokenizer in each tokenizer.json form the
Hub uses, and for a Split-String tokenizer, on the repo's prompt sets.

Dev-only (never run by CI). Regenerate with (packages pinned in
tools/reference/requirements.txt; the HarmBench and XSTest data directories
hold harmbench_behaviors_text_all.csv and xstest_prompts.csv):

    python tools/reference/make_spm_form_fixtures.py data/harmbench data/xstest tests/fixtures/tokenizer

The forms are edits of the committed mistral_tokenizer.json, so its vocabulary
is not stored again: each form names its base file and the top-level fields
(normalizer, pre_tokenizer, decoder) that replace the base's.
  legacy            mistral_tokenizer.json as committed: Prepend("▁") +
                    Replace(" " -> "▁") normalizer, no pre-tokenizer. This is
                    what transformers' LlamaConverter gives with legacy=True
                    (checked below against its normalizer()/pre_tokenizer()/
                    decoder() methods; its tokenizer() step is broken in
                    transformers 5, see make_tokenizer_fixtures.py, which built
                    the committed file's BPE model).
  metaspace_first   LlamaConverter with legacy=False: no normalizer, Metaspace
                    prepend_scheme "first", split false.
  metaspace_split   a default tokenizers Metaspace(): prepend_scheme "always",
                    split true.
  metaspace_first_v015  Metaspace as tokenizers 0.15 wrote it
                    (add_prefix_space + prepend_scheme "first", no "split"
                    key), which tokenizers >= 0.19 reads as split true.
  Every form keeps LlamaConverter's decoder (Replace, ByteFallback, Fuse,
  Strip), as the Hub's files of each form do.
  split_string      the legacy form plus a pre-tokenizer of Split
                    pre-tokenizers on String (literal) patterns, two holding
                    regex metacharacters, with four behaviors.
  split_contiguous_invert  the same with the Contiguous behavior and
                    inverted patterns.
Each form is loaded back with Tokenizer.from_str from exactly the JSON the C
test builds, and every text is encoded with add_special_tokens=False (added
tokens in the text are parsed, as refgeo's parse_special does).

Prompt sets (the texts are stored once, as UTF-8, or hex when a text holds
invalid UTF-8 or NUL; tokenizers sees bytes.decode('utf-8', 'replace')):
  engine     the 320 strings of cases.json (make_tokenizer_fixtures.py);
  prompts    data/prompts/*.json instructions;
  harmbench  HarmBench behaviors (harmbench_behaviors_text_all.csv, MIT,
             centerforaisafety/HarmBench) and their context strings;
  xstest     XSTest prompts (xstest_prompts.csv, CC-BY-4.0, Röttger et al.
             2024, paul-rottger/exaggerated-safety).
For a form with a same_as, ids[form][i] is null when it equals
ids[same_as][i] (the forms agree on most texts; this keeps the fixture small),
else {"head": h, "tail": t, "ids": [...]}: the first h ids of same_as's, the
listed ids, then its last t ids. ids_plain[form] maps the index
of each text whose ids change when special-token text is encoded as plain
text (encode_special_tokens=True, refgeo's parse_special off) to those ids.
decoded[form][i] is tokenizers' decode of ids[form][i]
(skip_special_tokens=False), null when it equals the text itself (only for
texts stored as UTF-8). The legacy form's ids are also compared here with the
sentencepiece package (special tokens as text).
"""
import csv
import glob
import json
import os
import sys
import types

import sentencepiece as spm
import tokenizers
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers.convert_slow_tokenizer import LlamaConverter

SPM_MODEL = os.path.join(os.path.dirname(__import__("mistral_common").__file__), "data", "tokenizer.model.v1")
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EDITED_FIELDS = ("normalizer", "pre_tokenizer", "decoder")


def component_json(normalizer=None, pre_tokenizer=None, decoder=None):
    """The JSON tokenizers writes for these components (None stays null)."""
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre_tokenizer is not None:
        tok.pre_tokenizer = pre_tokenizer
    if decoder is not None:
        tok.decoder = decoder
    j = json.loads(tok.to_str())
    return {k: j[k] for k in EDITED_FIELDS}


def llama_converter_fields(legacy):
    """normalizer / pre_tokenizer / decoder of transformers' LlamaConverter for
    a Llama tokenizer with this legacy flag (add_prefix_space defaults to True)."""
    sp = spm.SentencePieceProcessor(model_file=SPM_MODEL)
    original = types.SimpleNamespace(vocab_file=SPM_MODEL, legacy=legacy, add_prefix_space=True,
                                     convert_ids_to_tokens=sp.id_to_piece)
    conv = LlamaConverter(original)
    return component_json(conv.normalizer(conv.proto), conv.pre_tokenizer("\u2581", True), conv.decoder("\u2581", True))


def forms(out_dir):
    with open(os.path.join(out_dir, "mistral_tokenizer.json"), encoding="utf-8") as f:
        mistral = json.load(f)
    legacy = llama_converter_fields(legacy=True)
    for k in EDITED_FIELDS:
        assert mistral[k] == legacy[k], f"committed mistral_tokenizer.json {k} is not LlamaConverter's legacy form"
    first = llama_converter_fields(legacy=False)
    assert first["normalizer"] is None and first["pre_tokenizer"]["prepend_scheme"] == "first"
    assert first["pre_tokenizer"]["split"] is False
    split = {"normalizer": None, "pre_tokenizer": component_json(pre_tokenizer=pre_tokenizers.Metaspace())[
        "pre_tokenizer"]}
    assert split["pre_tokenizer"]["split"] is True and split["pre_tokenizer"]["prepend_scheme"] == "always"
    v015 = {"normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                                                  "add_prefix_space": True, "prepend_scheme": "first"}}
    # Patterns see the normalized text, where spaces are already "▁".
    split_string = component_json(pre_tokenizer=pre_tokenizers.Sequence([
        pre_tokenizers.Split(".\u2581", behavior="isolated"),
        pre_tokenizers.Split("?", behavior="removed"),
        pre_tokenizers.Split("\n", behavior="merged_with_previous"),
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split("\u2019", behavior="isolated")]))
    assert all("String" in p["pattern"] for p in split_string["pre_tokenizer"]["pretokenizers"])
    # The other behavior and the invert flag: a run of dots as one piece, and
    # inverted patterns, where the text between matches is the match.
    split_contiguous = component_json(pre_tokenizer=pre_tokenizers.Sequence([
        pre_tokenizers.Split(".", behavior="contiguous"),
        pre_tokenizers.Split("-", behavior="merged_with_next", invert=True),
        pre_tokenizers.Split(",", behavior="merged_with_previous", invert=True),
        pre_tokenizers.Split("?", behavior="contiguous", invert=True)]))
    return [
        {"name": "legacy", "base": "mistral_tokenizer.json", "edit": {}, "same_as": None},
        {"name": "metaspace_first", "base": "mistral_tokenizer.json", "edit": first, "same_as": "legacy"},
        {"name": "metaspace_split", "base": "mistral_tokenizer.json", "edit": split, "same_as": "legacy"},
        {"name": "metaspace_first_v015", "base": "mistral_tokenizer.json", "edit": v015, "same_as": "legacy"},
        {"name": "split_string", "base": "mistral_tokenizer.json", "edit": {"pre_tokenizer":
                                                                              split_string["pre_tokenizer"]},
         "same_as": "legacy"},
        {"name": "split_contiguous_invert", "base": "mistral_tokenizer.json",
         "edit": {"pre_tokenizer": split_contiguous["pre_tokenizer"]}, "same_as": "legacy"},
    ]


def load_form(out_dir, form):
    """The tokenizer.json the C test builds: the base with the edited fields."""
    with open(os.path.join(out_dir, form["base"]), encoding="utf-8") as f:
        j = json.load(f)
    j.update(form["edit"])
    return Tokenizer.from_str(json.dumps(j))


def prompt_texts(harmbench_dir, xstest_dir, out_dir):
    """(set name, raw bytes) for every prompt, in a fixed order."""
    with open(os.path.join(out_dir, "cases.json")) as f:
        texts = [("engine", bytes.fromhex(c["hex"])) for c in json.load(f)["cases"]]
    for path in sorted(glob.glob(os.path.join(REPO, "data", "prompts", "*.json"))):
        with open(path, encoding="utf-8") as f:
            texts += [("prompts", p["instruction"].encode("utf-8")) for p in json.load(f)]
    with open(os.path.join(harmbench_dir, "harmbench_behaviors_text_all.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts += [("harmbench", r["Behavior"].encode("utf-8")) for r in rows]
    texts += [("harmbench", r["ContextString"].encode("utf-8")) for r in rows if r["ContextString"]]
    with open(os.path.join(xstest_dir, "xstest_prompts.csv"), newline="", encoding="utf-8") as f:
        texts += [("xstest", r["prompt"].encode("utf-8")) for r in csv.DictReader(f)]
    return texts


def text_entry(set_name, raw):
    try:
        s = raw.decode("utf-8")
        if "\0" not in s:
            return {"set": set_name, "text": s}
    except UnicodeDecodeError:
        pass
    return {"set": set_name, "hex": raw.hex()}


def diff_ids(ids, base):
    """None when IDS equal BASE, else the part that differs: IDS are BASE's
    first "head" ids, then "ids", then BASE's last "tail" ids."""
    if ids == base:
        return None
    head = 0
    while head < min(len(ids), len(base)) and ids[head] == base[head]:
        head += 1
    tail = 0
    while tail < min(len(ids), len(base)) - head and ids[-1 - tail] == base[-1 - tail]:
        tail += 1
    return {"head": head, "tail": tail, "ids": ids[head:len(ids) - tail]}


def main():
    harmbench_dir, xstest_dir, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    form_list = forms(out_dir)
    texts = prompt_texts(harmbench_dir, xstest_dir, out_dir)
    decoded = [raw.decode("utf-8", errors="replace") for _, raw in texts]
    ids, plain_ids, decodes = {}, {}, {}
    summary = []
    for form in form_list:
        tok = load_form(out_dir, form)
        if form["name"] == "metaspace_first_v015":  # tokenizers reads the missing "split" as true
            assert json.loads(tok.to_str())["pre_tokenizer"]["split"] is True
        full = [tok.encode(s, add_special_tokens=False).ids for s in decoded]
        tok.encode_special_tokens = True  # refgeo's parse_special off (tokenize --no-special)
        plain = [tok.encode(s, add_special_tokens=False).ids for s in decoded]
        tok.encode_special_tokens = False
        plain_ids[form["name"]] = {str(i): p for i, (p, x) in enumerate(zip(plain, full)) if p != x}
        back = [tok.decode(x, skip_special_tokens=False) for x in full]
        decodes[form["name"]] = [None if d == s and "text" in text_entry("", raw) else d
                                 for d, s, (_, raw) in zip(back, decoded, texts)]
        same = ids.get(form["same_as"])
        ids[form["name"]] = full
        n_ids = sum(len(x) for x in full)
        n_diff = sum(1 for i, x in enumerate(full) if same is None or x != same[i])
        n_dec = sum(1 for d in decodes[form["name"]] if d is not None)
        n_plain = len(plain_ids[form["name"]])
        summary.append(f"{form['name']}: {n_ids} ids, {n_diff} texts differ from {form['same_as'] or 'nothing'}, "
                       f"{n_plain} differ with special tokens as text, {n_dec} decodes stored (the rest equal "
                       f"the text)")
    sp = spm.SentencePieceProcessor(model_file=SPM_MODEL)
    legacy = load_form(out_dir, form_list[0])
    legacy.encode_special_tokens = True  # sentencepiece never parses "<s>" in text
    n_sp_diff = sum(1 for s in decoded if legacy.encode(s, add_special_tokens=False).ids != sp.encode(s))
    summary.append(f"legacy form vs sentencepiece (special tokens as text): {n_sp_diff} of {len(decoded)} differ")
    assert n_sp_diff == 0
    stored = {}
    for form in form_list:
        same = ids.get(form["same_as"])
        stored[form["name"]] = [x if same is None else diff_ids(x, same[i]) for i, x in enumerate(ids[form["name"]])]
    out = {
        "reference": f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__} LlamaConverter, "
                     f"sentencepiece {spm.__version__}",
        "sources": {"harmbench": "HarmBench harmbench_behaviors_text_all.csv (MIT, centerforaisafety/HarmBench)",
                    "xstest": "XSTest xstest_prompts.csv (CC-BY-4.0, Röttger et al. 2024, "
                              "paul-rottger/exaggerated-safety)"},
        "summary": summary,
        "forms": form_list,
        "texts": [text_entry(name, raw) for name, raw in texts],
        "ids": stored,
        "ids_plain": plain_ids,
        "decoded": decodes,
    }
    with open(os.path.join(out_dir, "spm_forms.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(texts)} texts")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
