"""Transformers side of bench/generate.sh: batched greedy `generate` tokens/s.

    python bench/generate_peer.py MODEL.gguf BATCH NEW_TOKENS REPEATS THREADS

Loads the GGUF in transformers as float32 (as tools/reference/
make_forward_fixtures.py does), renders the first BATCH instructions of
bench/bench_generate.c with the tokenizer's chat template (one user turn,
generation prompt), left-pads them with an attention mask, and times
REPEATS greedy generations of exactly NEW_TOKENS tokens per sequence
(min_new_tokens = max_new_tokens) after one warm-up. Prints the median new
tokens/s. Dev-only.
"""
import os
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# Same list, same order as INSTRUCTIONS in bench/bench_generate.c.
INSTRUCTIONS = [
    "Write a short poem about the sea.",
    "Explain how a refrigerator works.",
    "Give three tips for learning a new language.",
    "What is the capital of France and why is it famous?",
    "Describe the water cycle in simple terms.",
    "List some healthy breakfast ideas.",
    "How do airplanes stay in the air?",
    "Summarize the plot of a detective story you invent.",
    "Why is the sky blue?",
    "Write a haiku about autumn leaves.",
    "Explain recursion to a ten year old.",
    "What are the benefits of regular exercise?",
    "How does a bill become a law?",
    "Describe your ideal weekend.",
    "Give a recipe for pancakes.",
    "What causes earthquakes?",
]


def main():
    path, batch, new_tokens, repeats, threads = sys.argv[1], *map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    d, name = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
    texts = [tok.apply_chat_template([{"role": "user", "content": s}], tokenize=False, add_generation_prompt=True)
             for s in INSTRUCTIONS[:batch]]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    rates = []
    with torch.inference_mode():
        for r in range(repeats + 1):
            t0 = time.perf_counter()
            out = model.generate(**enc, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 pad_token_id=tok.pad_token_id)
            dt = time.perf_counter() - t0
            produced = (out.shape[1] - enc["input_ids"].shape[1]) * batch
            if r:
                rates.append(produced / dt)
    print(f"{statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
