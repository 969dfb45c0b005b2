"""transformers reference for one GCG step of `refgeo attack` (tests/test_attack_cli.c).

With --top-k 1 and --search-width equal to the suffix length (20), HarmBench's
GCG step has no randomness: candidate j replaces suffix position j (HarmBench
8e1604d baselines/gcg/gcg.py: int64(arange(0, L, L / search_width))) by the
allowed token with the smallest gradient there (top-1 of -grad, disallowed
tokens by get_nonascii_toks, as make_gcg_fixtures.py computes them), and the
suffix becomes the candidate of lowest loss. This script runs that step for
the first standard behavior of harmbench_behaviors_text_val.csv whose step no
near-tie decides (see below) on SmolLM2-135M-Instruct
(the GGUF, dequantized by transformers, computed in float64) and writes
tests/fixtures/gcg/attack_step.json: that behavior's row as a one-row
behaviors CSV (the test attacks it alone), the test case the attack must
write, all 20 candidate losses, the argmin and the loss the log must report.

Token layout as gcg.py builds it: the chat template (apply_chat_template with
the generation prompt) split around the instruction; the text before it
tokenized with the tokenizer's special tokens (gcg.py: tokenizer([before_tc])),
the behavior plus " ", the suffix "! ! ... !" (20 tokens), the text after it
and the target without them; the loss is the mean cross entropy of the target
tokens.

The argmin candidate must re-tokenize to itself (decoded and re-encoded as
HarmBench's re-tokenization filter does), so that the step is the same with
`refgeo attack`'s default filter on or off; "candidate_retokenizes" records
each candidate's.

The step's result is stable only if no near-tie decides it: where a
position's top two allowed tokens have gradients within float32 noise, the
candidate with either token must lose to the best by a margin, which the
script asserts (and records) far above float32 noise.

Dev only, never run by CI:

    python tools/reference/make_attack_fixtures.py \
        PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import csv
import io
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from make_gcg_fixtures import disallowed_ranges

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "gcg", "attack_step.json")
SLOT = "{instruction}"
N_SUFFIX = 20


def build_case(tok, b, target):
    """gcg.py's token layout for behavior B: (behavior text, ids, suffix start, target ids)."""
    behavior = b["Behavior"] + " "  # gcg.py: behavior += ' '
    template = tok.apply_chat_template([{"role": "user", "content": SLOT}], tokenize=False, add_generation_prompt=True)
    before_tc, after_tc = template.split(SLOT)
    optim_str = " ".join(["!"] * N_SUFFIX)
    before = tok([before_tc])["input_ids"][0]
    beh, suffix, after, tgt = tok([behavior, optim_str, after_tc, target], add_special_tokens=False)["input_ids"]
    assert len(suffix) == N_SUFFIX
    return behavior, before + beh + suffix + after + tgt, len(before) + len(beh), tgt


def suffix_grad(model, ids, start, nt, disallowed):
    """(loss, d loss / d one-hot suffix [N_SUFFIX, vocab]) with disallowed tokens' entries at +inf."""
    n = len(ids)
    E = model.get_input_embeddings().weight
    vocab = E.shape[0]
    onehot = torch.zeros(N_SUFFIX, vocab, dtype=torch.float64)
    onehot[torch.arange(N_SUFFIX), torch.tensor(ids[start : start + N_SUFFIX])] = 1
    onehot.requires_grad_(True)
    emb = E[torch.tensor(ids)].detach().clone()
    emb = torch.cat([emb[:start], onehot @ E, emb[start + N_SUFFIX :]]).unsqueeze(0)
    logits = model(inputs_embeds=emb).logits[0, n - nt - 1 : n - 1]
    loss0 = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[n - nt :]))
    loss0.backward()
    grad = onehot.grad.clone()
    for lo, hi in disallowed:
        grad[:, lo : hi + 1] = float("inf")
    return loss0, grad


def one_step(tok, model, disallowed, b, target):
    """The fixture record for behavior B, or None when a near-tie decides its step."""
    behavior, ids, start, tgt = build_case(tok, b, target)
    n, nt = len(ids), len(tgt)
    vocab = model.get_input_embeddings().weight.shape[0]

    def losses_of(batch):
        with torch.no_grad():
            logits = model(torch.tensor(batch)).logits[:, n - nt - 1 : n - 1]
            ce = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), torch.tensor([tgt] * len(batch)).reshape(-1),
                                                   reduction="none")
        return ce.reshape(len(batch), nt).mean(dim=1).tolist()

    loss0, grad = suffix_grad(model, ids, start, nt, disallowed)
    top2 = torch.topk(-grad, 2, dim=1)
    top1 = top2.indices[:, 0].tolist()
    grad_gap = (top2.values[:, 0] - top2.values[:, 1]).tolist()
    scale = grad[:, top1].abs().max().item()
    cands = []
    for j in range(N_SUFFIX):
        c = list(ids)
        c[start + j] = top1[j]
        cands.append(c)
    cand_losses = losses_of(cands)
    best = min(range(N_SUFFIX), key=lambda j: cand_losses[j])
    # float32 noise is ~1e-6 relative: where a position's top two gradients are
    # closer than 1e-4 of their scale, refgeo may take either token; the step's
    # result must not depend on it, so both tokens' candidates must lose to
    # the best by a margin, and the best must not sit at such a position.
    near = [j for j in range(N_SUFFIX) if grad_gap[j] <= 1e-4 * scale]
    second = top2.indices[:, 1].tolist()
    alt = []
    for j in near:
        c = list(ids)
        c[start + j] = second[j]
        alt.append(c)
    alt_losses = losses_of(alt) if alt else []
    others = [cand_losses[j] for j in range(N_SUFFIX) if j != best] + alt_losses
    margin = min(others) - cand_losses[best]
    # HarmBench's re-tokenization filter (gcg.py:174-197), on in `refgeo attack`
    # by default: the step is the same with it on or off when the argmin keeps
    retok = [tok(tok.batch_decode([c[start : start + N_SUFFIX]])[0], add_special_tokens=False)["input_ids"]
             == c[start : start + N_SUFFIX] for c in cands]
    print(b["BehaviorID"], "argmin", best, "loss", cand_losses[best], "near ties", near, "margin", margin,
          "argmin re-tokenizes", retok[best])
    if best in near or margin <= 1e-3 or not retok[best]:
        return None
    chosen = cands[best][start : start + N_SUFFIX]
    row = io.StringIO()
    w = csv.DictWriter(row, fieldnames=list(b.keys()), lineterminator="\n")
    w.writeheader()
    w.writerow(b)
    return {
        "behavior_id": b["BehaviorID"],
        "behaviors_csv": row.getvalue(),
        "ids": ids,
        "suffix_start": start,
        "n_suffix": N_SUFFIX,
        "n_target": nt,
        "initial_loss": loss0.item(),
        "top1_tokens": top1,
        "near_tie_positions": near,
        "candidate_losses": cand_losses,
        "candidate_retokenizes": retok,
        "argmin": best,
        "loss": cand_losses[best],
        "margin_to_next_candidate": margin,
        "test_case": behavior + tok.decode(chosen, clean_up_tokenization_spaces=False),
    }


def main():
    gguf = os.path.abspath(sys.argv[1])
    d, name = os.path.split(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).double().train(False)
    disallowed = disallowed_ranges(gguf)[1]
    with open(os.path.join(ROOT, "data/harmbench/harmbench_behaviors_text_val.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(ROOT, "data/harmbench/harmbench_targets_text.json"), encoding="utf-8") as f:
        targets = json.load(f)
    for b in rows:  # the first standard behavior whose step no near-tie decides
        if b["FunctionalCategory"] != "standard" or b["ContextString"]:
            continue
        out = one_step(tok, model, disallowed, b, targets[b["BehaviorID"]])
        if out:
            break
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", OUT, out["behavior_id"])


if __name__ == "__main__":
    main()
