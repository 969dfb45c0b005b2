"""Reference fixtures for tests/test_utility_data.c (dev-only; CI never runs this).

Writes under OUT_DIR (tests/fixtures/utility/):

  conversations.jsonl  a few chat conversations in the {"messages": [...]} JSONL
                       format (system / user / assistant turns, multi-turn,
                       non-ASCII text, a reply opening with a newline or a space)
  expected.json        per line of conversations.jsonl, as transformers renders
                       and tokenizes it with the GGUF's own chat template:
                         ids          tokenizer.apply_chat_template(messages)
                                      (add_special_tokens=False: SmolLM2 adds no BOS)
                         prompt_len   len(apply_chat_template(messages[:-1],
                                      add_generation_prompt=True))
                         first_reply  the index of the first token of ids that
                                      differs from that prompt's ids (= prompt_len
                                      unless a token straddles the boundary)
                       and "completions": for three harmless prompts, the greedy
                       continuation (do_sample=False, MAX_NEW new tokens, ended by
                       <|im_end|>) of the one-turn chat prompt, its ids, the
                       decoded text (skip_special_tokens=True) and the smallest
                       top-1/top-2 logit margin along the path.

The model is the GGUF the C tests use, loaded by transformers (dequantized with
the gguf package) and run in float32 on the CPU, as make_forward_fixtures.py does.

Regenerate (from the repository root):
  python tools/reference/make_utility_fixtures.py \
      ~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/utility
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MAX_NEW = 16

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"},
     {"role": "assistant", "content": "The capital of France is Paris."}],
    [{"role": "system", "content": "You answer in one short sentence."},
     {"role": "user", "content": "Name a primary colour."},
     {"role": "assistant", "content": "Red is a primary colour."}],
    [{"role": "user", "content": "Give me a number."},
     {"role": "assistant", "content": "Seven."},
     {"role": "user", "content": "Another one, please."},
     {"role": "assistant", "content": "Forty-two.\nAnything else?"}],
    [{"role": "user", "content": "Translate \"Grüße\" and say hi in Japanese 👋"},
     {"role": "assistant", "content": "\n\"Grüße\" means \"greetings\"; hi is こんにちは."}],
    [{"role": "user", "content": "Start your reply with a space."},
     {"role": "assistant", "content": " Sure, done."}],
]

# Prompts of tests/fixtures/forward/index.json whose 32-token greedy paths have
# reference margins of 0.08 and more.
PROMPTS = [
    "What is the capital of France?",
    "Give three tips for staying healthy.",
    "Summarize the plot of Romeo and Juliet in two sentences.",
]


def chat_ids(tok, messages, gen):
    out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    d, name = os.path.split(os.path.abspath(args.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    os.makedirs(args.out_dir, exist_ok=True)

    with open(os.path.join(args.out_dir, "conversations.jsonl"), "w", encoding="utf-8") as f:
        for c in CONVERSATIONS:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    conv = []
    for c in CONVERSATIONS:
        ids = chat_ids(tok, c, False)
        prompt = chat_ids(tok, c[:-1], True)
        first = 0
        while first < min(len(ids), len(prompt)) and ids[first] == prompt[first]:
            first += 1
        conv.append({"ids": ids, "prompt_len": len(prompt), "first_reply": first})

    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    comps = []
    for p in PROMPTS:
        ids = chat_ids(tok, [{"role": "user", "content": p}], True)
        t = torch.tensor([ids])
        with torch.no_grad():
            g = model.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=MAX_NEW, do_sample=False,
                               output_scores=True, return_dict_in_generate=True,
                               pad_token_id=tok.eos_token_id, eos_token_id=None)
        new = g.sequences[0, len(ids):].tolist()
        margins = [float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in g.scores]
        if im_end in new:  # what refgeo's generate keeps: the tokens before the stop id
            k = new.index(im_end)
            new, margins = new[:k], margins[:k + 1]
        comps.append({"prompt": p, "prompt_ids": ids, "ids": new,
                      "text": tok.decode(new, skip_special_tokens=True), "margin": min(margins)})

    out = {"model": name, "conversations": conv,
           "completions": {"max_new_tokens": MAX_NEW, "items": comps}}
    with open(os.path.join(args.out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
