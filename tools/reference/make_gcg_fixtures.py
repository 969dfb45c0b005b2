"""transformers references for src/adv_ft/gcg.c (tests/test_gcg.c).

1. The tokens GCG may not place, by HarmBench's rule (get_nonascii_toks,
   HarmBench 8e1604d adversarial_training/alignment-handbook/scripts/
   adv_training_utils.py): ids i in [3, vocab)
   whose tokenizer.decode([i]) is not (isascii() and isprintable()), plus
   the BOS, EOS, PAD and UNK ids, for SmolLM2-135M-Instruct's GGUF tokenizer
   as transformers loads it. Written as sorted [first, last] ranges.
2. On the tiny Llama of tests/fixtures/hf_tiny/llama_f32 (the weights as
   make_hf_tiny.py saved them), in float64: for a sequence
   prefix | suffix | after | target of random ids, the gradient of the mean
   target cross entropy with respect to the one-hot suffix matrix
   [n_suffix, vocab] (what GCG ranks), and the same loss for three other
   suffixes (what GCG's candidate selection compares).

Writes tests/fixtures/gcg/gcg.json. Dev only, never run by CI:

    python tools/reference/make_gcg_fixtures.py \
        ~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/refgeo/hf_tiny-ref/llama_f32
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "gcg", "gcg.json")
RNG = np.random.default_rng(3)


def disallowed_ranges(gguf_path):
    d, name = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    bad = set()
    for i in range(3, tok.vocab_size):
        s = tok.decode([i])
        if not (s.isascii() and s.isprintable()):
            bad.add(i)
    for t in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id):
        if t is not None:
            bad.add(t)
    ranges, ids = [], sorted(bad)
    for i in ids:
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return tok.vocab_size, ranges


def target_loss(model, ids, n_target):
    logits = model(torch.tensor([ids])).logits[0]
    n = len(ids)
    return torch.nn.functional.cross_entropy(logits[n - n_target - 1 : n - 1], torch.tensor(ids[n - n_target :]))


def token_grad_case(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).double().train(False)
    V = model.get_input_embeddings().weight.shape[0]
    prefix, suffix, after, target = (RNG.integers(0, V, k).tolist() for k in (5, 6, 3, 4))
    E = model.get_input_embeddings().weight
    onehot = torch.zeros(len(suffix), V, dtype=torch.float64)
    onehot[torch.arange(len(suffix)), torch.tensor(suffix)] = 1
    onehot.requires_grad_(True)
    embeds = torch.cat([E[prefix], onehot @ E, E[after + target]])[None]
    logits = model(inputs_embeds=embeds).logits[0]
    n, nt = embeds.shape[1], len(target)
    loss = torch.nn.functional.cross_entropy(logits[n - nt - 1 : n - 1], torch.tensor(target))
    (grad,) = torch.autograd.grad(loss, onehot)
    candidates = [RNG.integers(0, V, len(suffix)).tolist() for _ in range(3)]
    with torch.no_grad():
        cand_losses = [float(target_loss(model, prefix + c + after + target, nt)) for c in candidates]
    return {"prefix": prefix, "suffix": suffix, "after": after, "target": target, "loss": float(loss),
            "grad": [float("%.9g" % v) for v in grad.reshape(-1).tolist()],
            "candidates": candidates, "candidate_losses": cand_losses}


def main():
    vocab, ranges = disallowed_ranges(os.path.expanduser(sys.argv[1]))
    out = {"smollm2_vocab": vocab, "smollm2_disallowed": ranges,
           "llama_f32": token_grad_case(os.path.expanduser(sys.argv[2]))}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", os.path.relpath(OUT), len(ranges), "ranges")


if __name__ == "__main__":
    main()
