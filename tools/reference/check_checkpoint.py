"""Checks that a checkpoint directory written by refgeo loads in transformers
as the model refgeo computes (issue 9, acceptance 3).

Dev-only, not run by CI (it needs torch + transformers and about a minute on
SmolLM2). Write a checkpoint and check it with:

    refgeo export MODEL.gguf --out /tmp/ckpt          # or a trainer's checkpoint-<step>
    python tools/reference/check_checkpoint.py build/refgeo /tmp/ckpt [MODEL.gguf]

For the same directory it compares
  - token ids of 50 strings: transformers' AutoTokenizer (tokenizer.json +
    tokenizer_config.json, add_special_tokens=True) against `refgeo
    tokenize DIR --json TEXT`; every string must give identical ids;
  - last-position logits of 4 prompts: AutoModelForCausalLM in float32 on
    the ids refgeo used, against `refgeo logits DIR --prompt P --top 200
    --json` at refgeo's 200 largest ids; the largest absolute difference
    must be <= 2e-3 and the argmax the same. Both run the same bf16 (or
    f32) weights in float32, so the difference is summation order only.
  - with the source MODEL given, the same transformers logits against
    `refgeo logits MODEL`: this is what catches a wrong weight layout (q/k
    rows left in GGUF order), which the two checks above cannot, since
    transformers and refgeo then read the same wrong file alike. Tolerance
    2e-3 for a float32 checkpoint; 0.5 and the same argmax for bf16, whose
    rounding of the weights (8 significant bits) moves SmolLM2's logits by
    about 0.1 (test_model_checkpoint measures it).
Prints one line per check and the maxima; exits 1 on any mismatch.
"""
import json
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

STRINGS = [
    "Hello world", "hello, World!", "  leading spaces", "trailing spaces   ", "tabs\tand\nnewlines\n\n",
    "12345 678 9", "3.14159 and 2,718", "x = y + 42;", "def f(a, b):\n    return a ** b",
    "It's a dog's life; they'll see, we've done, I'm here, you'd know",
    "CAPITALS and MixedCase WORDS", "émigré café naïve résumé", "Grüße aus München", "日本語のテキスト",
    "中文文本测试", "한국어 텍스트", "Ελληνικά κείμενα", "Русский текст", "עברית", "العربية",
    "emoji 😀🎉👍🏽", "math ∑ ∫ √ ∞ ≠ ≤", "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>",
    "a<|im_end|>b", "http://example.com/path?q=1&r=2", "email@example.org", "#hashtag @mention",
    "```python\nprint('hi')\n```", "{\"json\": [1, 2, 3]}", "  \n  \n", "...!!!???", "----====",
    "a" * 40, "ab" * 20, "The quick brown fox jumps over the lazy dog.", "How do I make a cake?",
    "Write a poem about the sea.", "Sorry, I can't do that.", "I cannot help with that request.",
    "'s 't 're 've 'm 'll 'd", "ÀÉÎÕÜ àéîõü", "0x1F 0b1010 1e-5", "C:\\Users\\name\\file.txt",
    "tab\tseparated\tvalues", "mixed 123abc456def", "Ünïcödé wörds", "\u00a0non-breaking\u00a0space",
    "line1\r\nline2\r\n", "end.",
]
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, there was",
           "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]
TOP = 200
TOL = 2e-3
SOURCE_TOL_BF16 = 0.5


def refgeo(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    binary, ckpt = sys.argv[1], sys.argv[2]
    source = sys.argv[3] if len(sys.argv) > 3 else None
    with open(f"{ckpt}/config.json") as f:
        source_tol = TOL if json.load(f)["torch_dtype"] == "float32" else SOURCE_TOL_BF16
    tok = AutoTokenizer.from_pretrained(ckpt)
    bad = 0
    for s in STRINGS:
        want = tok(s, add_special_tokens=True)["input_ids"]
        got = refgeo(binary, "tokenize", ckpt, "--json", "--", s)["ids"]
        if want != got:
            bad += 1
            print(f"TOKENS DIFFER {s!r}: transformers {want} refgeo {got}")
    print(f"tokens: {len(STRINGS) - bad}/{len(STRINGS)} strings identical")

    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    model.eval()
    worst = {}
    for p in PROMPTS:
        ids = refgeo(binary, "tokenize", ckpt, "--json", "--", p)["ids"]
        with torch.no_grad():
            lg = model(torch.tensor([ids])).logits[0, -1].double()
        for name, path, tol in [("checkpoint", ckpt, TOL)] + ([("source", source, source_tol)] if source else []):
            rep = refgeo(binary, "logits", path, "--prompt", p, "--top", str(TOP), "--json", "--threads", "2")
            diff = max(abs(lg[e["id"]].item() - e["logit"]) for e in rep["top"])
            same_argmax = int(lg.argmax()) == rep["top"][0]["id"]
            if rep["prompt_tokens"] != len(ids):
                print(f"PROMPT TOKENS DIFFER {p!r} on the {name}: {rep['prompt_tokens']} vs {len(ids)}")
                bad += 1
            worst[name] = max(worst.get(name, 0.0), diff)
            ok = diff <= tol and same_argmax
            bad += not ok
            print(f"logits {p!r} vs refgeo on the {name}: {len(ids)} tokens, max |diff| over top {TOP} = "
                  f"{diff:.3g}, argmax {'same' if same_argmax else 'DIFFERS'}{'' if ok else '  FAIL'}")
    for name, w in worst.items():
        print(f"max |logit diff| vs refgeo on the {name}: {w:.3g} "
              f"(tolerance {TOL if name == 'checkpoint' else source_tol})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
