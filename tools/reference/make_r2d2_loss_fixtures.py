"""torch references for R2D2's losses (tests/test_r2d2_loss.c, tests/test_backend_grad.c).

The losses are HarmBench's, written out from HarmBench 8e1604d
adversarial_training/alignment-handbook/scripts/adv_training_utils.py (ATU):
log_1_minus_p_loss (ATU:451-488) for the away loss, torch's
CrossEntropyLoss() with ignore_index -100 for the toward loss (ATU:1264-1270)
and the utility ("clean") loss (ATU:1272-1278), and
    total = utility + 0.5 * away + 0.5 * toward                 (ATU:1281).

Writes two files:

tests/fixtures/grad/unlikelihood.json: the per-row operation (backend.h
  rg_op_unlikelihood) on float32 logits drawn at random, in float64: the
  rows' -log(1 - p) after HarmBench's threshold and the gradient of
  sum_r scale[r] * loss[r]. The targets are chosen so that some rows fall
  below the threshold, one has p near 1, and one row has scale 0.

tests/fixtures/r2d2_loss/<model>.json: a batch of two away, two toward and
  two utility examples (random token ids) through a tiny Hugging Face model
  of tests/fixtures/hf_tiny/ in float64. Its weights are made here from the
  committed config.json with make_hf_tiny.py's formula (the one `refgeo
  synth-model` writes at test time; the first elements are checked against
  <model>.expected.json). Each away target mixes the model's greedy tokens
  (log p about -4.2, kept by the -5 threshold) and random ones (log p about
  -5.7, dropped), every one at least MARGIN away from the threshold so that
  float32 logits cannot flip it. Three cases are differentiated with
  torch.autograd: the away loss alone, the toward loss alone, and the total.
  Each stores the three losses, the one differentiated ("loss", with the
  case's weights [utility, away, toward]), every parameter's gradient norm and every
  STRIDE-th element, and every D_STRIDE-th element of the gradient with
  respect to the input embeddings. Sequences run one at a time (no padding:
  the engine's ragged batch gives the same numbers; HarmBench's left padding
  with an attention mask does too, up to its position ids, 1.10 of the
  project's notes).

Dev only, never run by CI (from the repository root):

    python tools/reference/make_r2d2_loss_fixtures.py
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny  # noqa: E402  (the synth-model weight formula)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HF_TINY = os.path.join(ROOT, "tests", "fixtures", "hf_tiny")
OUT_OP = os.path.join(ROOT, "tests", "fixtures", "grad", "unlikelihood.json")
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "r2d2_loss")
MODELS = ["llama_f32", "mistral_f16"]  # tied head; untied head
THRESHOLD = -5.0  # log_1_minus_p_loss's default (ATU:451)
MARGIN = 0.05
STRIDE, D_STRIDE = 61, 7
RNG = np.random.default_rng(20261203)
torch.set_default_dtype(torch.float64)


def log_1_minus_p(logits, labels, threshold=THRESHOLD):
    """ATU:451-484: per position log(1 - p(label)), 0 where ignored (-100) or log p < threshold."""
    log_sum_exp_all = torch.logsumexp(logits, dim=-1)
    gather_labels = labels.clone()
    gather_labels[labels == -100] = 0
    logits_for_labels = torch.gather(logits, -1, gather_labels.unsqueeze(-1)).squeeze(-1)
    log_p = logits_for_labels - log_sum_exp_all
    mask = torch.zeros_like(logits).scatter_(-1, gather_labels.unsqueeze(-1), 1.0)
    masked_logits = logits * (1 - mask) + mask * (-1e10)
    log_sum_exp_without_true_label = torch.logsumexp(masked_logits, dim=-1)
    out = log_sum_exp_without_true_label - log_sum_exp_all
    ignored_values = labels == -100
    out[ignored_values] = 0
    out[log_p < threshold] = 0
    return out, log_p


def log_1_minus_p_loss(logits, labels, threshold=THRESHOLD):
    """ATU:451-488: divided by the count of ALL supervised positions, dropped ones included."""
    term, _ = log_1_minus_p(logits, labels, threshold)
    return -term.sum() / (labels != -100).sum().double()


def flat(t, digits=9):
    fmt = "%%.%dg" % digits
    return [float(fmt % v) for v in t.detach().reshape(-1).tolist()]


# ---------------------------------------------------------------- the operation

def op_case():
    rows, vocab = 6, 13
    logits = torch.tensor((RNG.standard_normal((rows, vocab)) * 3.0).astype(np.float32).astype(np.float64))
    logits[1, 4] += 12.0  # p near 1: 1 - p must keep its precision
    logits = logits.detach().requires_grad_()
    with torch.no_grad():
        lp = torch.log_softmax(logits, -1)
    # row 0: the least likely token (dropped); the others' most likely,
    # second most likely and a middle one
    order = lp.argsort(-1, descending=True)
    targets = [int(order[0, -1]), 4, int(order[2, 0]), int(order[3, 1]), int(order[4, vocab // 2]), int(order[5, 0])]
    scale = [0.5, 1.0, 0.25, 0.0, 2.0, 1.5]
    term, log_p = log_1_minus_p(logits, torch.tensor(targets))
    kept = (log_p >= THRESHOLD).tolist()
    assert not all(kept) and any(kept), kept
    assert (log_p - THRESHOLD).abs().min() > MARGIN
    losses = -term
    (losses * torch.tensor(scale)).sum().backward()
    return {"rows": rows, "vocab": vocab, "log_p_min": THRESHOLD, "logits": flat(logits, 17), "targets": targets,
            "scale": scale, "kept": kept, "losses": [float(v) for v in losses.tolist()],
            "dlogits": [float(v) for v in logits.grad.reshape(-1).tolist()]}


# ---------------------------------------------------------------- the model batch

def load_model(name):
    cfg = AutoConfig.from_pretrained(os.path.join(HF_TINY, name))
    model = AutoModelForCausalLM.from_config(cfg)
    with open(os.path.join(HF_TINY, name + ".expected.json")) as f:
        expected = json.load(f)
    synth = expected["synth"]
    make_hf_tiny.formula_weights(model, synth["seed"])
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[synth["dtype"]]
    with torch.no_grad():  # the file dtype's rounding of the parameters only: a float16 cast of the
        for prm in model.parameters():  # RoPE inv_freq buffer would move the logits by 1e-4
            prm.copy_(prm.to(dtype).to(prm.dtype))
    model = model.double().train(False)  # float64 math, no dropout
    sd = model.state_dict()
    for t in expected["tensors"]:  # the same weights as the committed expectations
        got = sd[t["name"]].reshape(-1)[:16].tolist()
        assert max(abs(a - b) for a, b in zip(got, t["first"])) == 0, t["name"]
    return model


def logits_of(model, ids):
    return model(torch.tensor([ids])).logits[0]


def away_target(model, prompt, n):
    """n target tokens: greedy ones and random unlikely ones, alternating, none near the threshold."""
    ids = list(prompt)
    for k in range(n):
        with torch.no_grad():
            lp = torch.log_softmax(logits_of(model, ids)[-1], -1)
        if k % 2 == 0:
            tok = int(lp.argmax())
        else:
            low = [v for v in range(len(lp)) if lp[v] < THRESHOLD - MARGIN]
            tok = int(low[RNG.integers(0, len(low))])
        assert abs(float(lp[tok]) - THRESHOLD) > MARGIN, float(lp[tok])
        ids.append(tok)
    return ids[len(prompt):]


def make_batch(model, vocab, eos):
    """[(kind, ids, first supervised position)]: position p >= first predicts ids[p + 1]."""
    rnd = lambda n: RNG.integers(3, vocab, n).tolist()  # noqa: E731  (ids 0-2 are special tokens)
    refusal = rnd(4) + [eos]  # "Sorry, I can't do that." + EOS in the recipe
    batch = []
    for plen, tlen in [(6, 5), (5, 4)]:
        prompt = rnd(plen)
        batch.append(("away", prompt + away_target(model, prompt, tlen), plen - 1))
        batch.append(("toward", prompt + refusal, plen - 1))
    for plen, clen in [(4, 6), (3, 5)]:
        batch.append(("utility", rnd(plen) + rnd(clen), plen - 1))
    return batch


def labels_for(ids, first):
    """HarmBench's shifted labels: -100 outside the supervised span (ATU:1181-1203, 1253-1255)."""
    lab = [-100] * (len(ids) - 1)
    for p in range(first, len(ids) - 1):
        lab[p] = ids[p + 1]
    return torch.tensor(lab)


def grad_of(emb):
    """d loss / d embeddings of one sequence, flattened (zero for a sequence the loss does not read)."""
    return (emb.grad[0] if emb.grad is not None else torch.zeros_like(emb[0])).reshape(-1)


def one_case(model, batch, what):
    model.zero_grad()
    embeds, logits, labels = [], {"away": [], "toward": [], "utility": []}, {"away": [], "toward": [], "utility": []}
    for kind, ids, first in batch:
        emb = model.get_input_embeddings()(torch.tensor([ids]))
        emb.retain_grad()
        embeds.append(emb)
        logits[kind].append(model(inputs_embeds=emb).logits[0, :-1])
        labels[kind].append(labels_for(ids, first))
    cat = {k: (torch.cat(logits[k]), torch.cat(labels[k])) for k in logits}
    ce = torch.nn.CrossEntropyLoss()
    away = log_1_minus_p_loss(*cat["away"])
    toward = ce(*cat["toward"])
    utility = ce(*cat["utility"])
    total = utility + away * 0.5 + toward * 0.5
    loss = {"away": away, "toward": toward, "total": total}[what]
    loss.backward()
    tensors = {}
    for pname, prm in model.named_parameters():
        g = prm.grad.reshape(-1)
        tensors[pname] = {"n": g.numel(), "norm": float(g.norm()), "sample": flat(g[::STRIDE])}
    _, log_p = log_1_minus_p(*cat["away"])
    sup = cat["away"][1] != -100
    return {"weights": {"away": [0, 1, 0], "toward": [0, 0, 1], "total": [1, 0.5, 0.5]}[what],
            "utility": utility.item(), "away": away.item(), "toward": toward.item(), "loss": loss.item(),
            "away_kept": int((log_p[sup] >= THRESHOLD).sum()), "away_rows": int(sup.sum()),
            "tensors": tensors, "d_embed": [flat(grad_of(e)[::D_STRIDE]) for e in embeds]}


def model_fixture(name):
    model = load_model(name)
    vocab, eos = model.config.vocab_size, model.config.eos_token_id
    batch = make_batch(model, vocab, eos)
    out = {"model": name, "log_p_min": THRESHOLD, "stride": STRIDE, "d_stride": D_STRIDE,
           "seqs": [{"kind": k, "ids": ids, "first": first} for k, ids, first in batch], "cases": {}}
    for what in ["away", "toward", "total"]:
        out["cases"][what] = one_case(model, batch, what)
    c = out["cases"]["total"]
    assert 0 < c["away_kept"] < c["away_rows"], (c["away_kept"], c["away_rows"])
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name + ".json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", os.path.relpath(path), "away rows kept %d of %d," % (c["away_kept"], c["away_rows"]),
          "losses u %.6f a %.6f t %.6f total %.6f" % (c["utility"], c["away"], c["toward"], c["loss"]))


def main():
    torch.manual_seed(0)
    case = op_case()
    with open(OUT_OP, "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(OUT_OP), "kept", case["kept"])
    for name in MODELS:
        model_fixture(name)


if __name__ == "__main__":
    main()
