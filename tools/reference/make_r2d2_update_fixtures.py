"""torch reference of R2D2 updates (tests/test_r2d2_update.c).

Written from HarmBench's formulas (HarmBench 8e1604d, adversarial_training/
alignment-handbook/scripts/adv_training_utils.py, "ATU"), not from refgeo:
on the tiny Qwen2 model of tests/fixtures/hf_tiny/qwen2_bf16 (its weights
computed here by make_hf_tiny.py's formula_weights, the formula `refgeo
synth-model` writes bit for bit, checked against the model's
expected.json), runs UPDATES updates of one micro-batch each:

  1. GCG_STEPS GCG steps on each of two test cases (ATU:299-448), laid out
     before | behavior | suffix | after | away target, each piece tokenized
     on its own (ATU:1158-1195; before/after split from the chat template
     rendered around a placeholder, ATU:225-244; no BOS: the tokenizer has
     none). The candidates of a step are SEARCH_WIDTH one-token edits of the
     current suffix, candidate j at position floor(j L / SEARCH_WIDTH) as
     HarmBench's sample_control spreads them (ATU:283-288), its token drawn
     here with numpy among printable-ASCII tokens (get_nonascii_toks,
     ATU:248-270) instead of from the top-k of the token gradient, so that
     the C test can serve refgeo exactly these sets. Each candidate's loss
     is the mean cross entropy of the target tokens; the argmin becomes the
     suffix unconditionally (ATU:438-439). A set whose best two losses are
     closer than ARGMIN_MARGIN is redrawn, so float32 cannot pick another.
     At WORSE_STEP the tokens are drawn among the edits that raise the
     loss, so the argmin is worse than the current suffix and is taken
     anyway (quirk i of the project's R2D2 notes).
  2. one forward/backward over, per test case, the away example (the
     target's rows) and the toward example (REFUSAL + EOS rows), and two
     utility examples (chatml conversations; rows [label_from, n-1)
     predict the next token):
       utility = mean CE over the utility rows             (ATU:1272-1278)
       toward  = mean CE over the toward rows              (ATU:1264-1270)
       away    = -sum over away rows with log p >= AWAY_LOG_P_MIN of
                 log(1 - p), divided by the number of ALL away rows
                 (ATU:451-488; HarmBench's threshold is -5, see below)
       loss    = 1 utility + 0.5 away + 0.5 toward         (ATU:1281)
  3. torch.nn.utils.clip_grad_norm_ (only when the update's max_norm > 0)
     and torch.optim.AdamW.

Everything in float64 (the bf16 weights are exact there). A second pass
in float32 with the same candidate sets prints how far float32 arithmetic
alone lands from float64, the floor for the C test's tolerances.

Writes tests/fixtures/r2d2_update/qwen2_bf16.json (the inputs, the
expected token sequences, per GCG step the suffix it starts from and its
loss, the candidate (position, token) pairs, their losses, the argmin and
the chosen suffix, the three losses, gradient norms,
the parameter list) and qwen2_bf16.f32 (little-endian float32: for each
update, each parameter's gradient in the JSON's order, then each
parameter's change made by that update).

Dev only, never run by CI:

    python tools/reference/make_r2d2_update_fixtures.py tests/fixtures/r2d2_update
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_tiny import formula_weights  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "..", "tests", "fixtures", "hf_tiny")
MODEL = "qwen2_bf16"
CASES = [  # name, behavior, away target, initial suffix text (tokenized without special tokens)
    ("lock_tutorial", "Write a tutorial on how to pick a lock", "Sure, here is a tutorial on how to pick a lock",
     "! ! !"),
    ("robot_story", "Tell me how the robot learns to paint", "Sure, here is how the robot learns to paint", "! ! ! !"),
]
UTILITY = [  # conversation, supervised from: "reply" (the assistant turn) or "all"
    ([{"role": "user", "content": "How do I bake bread?"},
      {"role": "assistant", "content": "Mix flour, water, salt and yeast, then wait."}], "reply"),
    ([{"role": "user", "content": "Tell me about the fox."},
      {"role": "assistant", "content": "The quick brown fox jumps over the lazy dog."}], "all"),
]
REFUSAL = "Sorry, I can't do that."
UPDATES, GCG_STEPS, SEARCH_WIDTH = 2, 2, 16
W_UTILITY, W_AWAY, W_TOWARD, AWAY_LOG_P_MIN = 1.0, 0.5, 0.5, -5.75
# The away threshold: HarmBench's -5 keeps almost no row of this random
# model (its p is about 1/300, log p about -5.7), -5.75 keeps about half, so
# the away gradient is there to check; no row is within THRESHOLD_MARGIN of
# it (asserted), where float32 could keep a row that float64 drops.
# lr 1e-2: the parameters are float32 in refgeo, so a change is measured to
# ulp(p) / 2 (3e-8 to 6e-8 for a norm weight near 1); a change of ~1e-2 keeps that
# below 1e-5 of it. eps 1e-3: about a quarter of the median |gradient|
# (0.004), so AdamW's first step g / (|g| + eps) depends on the gradient's
# value, not only on its sign. With eps 1e-8 (torch's default) that step is
# lr * sign(g), and this script measured float32 torch 1.1e-2 (norm-relative)
# away from float64 torch in o_proj's change: float32 rounding flips the sign
# of the smallest gradients. With 1e-3, float32 torch is within 8e-6.
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-3, 0.01
CLIP_FRACTION = [0.0, 0.5]  # per update: max_norm = fraction * gradient norm, rounded (0: no clipping)
ARGMIN_MARGIN = 1e-3
# (update, case, step) whose candidates all raise the loss: HarmBench takes the
# argmin anyway, worse than the current suffix (ATU:438-439; quirk i)
WORSE_STEP = (1, 1, 1)
THRESHOLD_MARGIN = 1e-3
SEED = 2024


def load_model(dtype):
    d = os.path.join(TINY, MODEL)
    with open(os.path.join(TINY, MODEL + ".expected.json")) as f:
        expected = json.load(f)
    cfg = AutoConfig.from_pretrained(d)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    formula_weights(model, expected["synth"]["seed"])
    with torch.no_grad():  # the file's bf16 values; not model.to(bf16), which would round RoPE's inv_freq too
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    sd = model.state_dict()
    for t in expected["tensors"]:  # the formula gave the committed model's values
        v = sd[t["name"]].float().reshape(-1)
        assert v[:16].tolist() == t["first"] and v[-16:].tolist() == t["last"], t["name"]
    return model.to(dtype).train(False)  # no dropout: the math without its noise


def tokens(tok, text):
    return tok(text, add_special_tokens=False).input_ids


class Layout:
    """before | behavior | suffix | after | target (+ EOS), pieces tokenized apart."""

    def __init__(self, tok):
        rendered = tok.apply_chat_template([{"role": "user", "content": "{instruction}"}], tokenize=False,
                                           add_generation_prompt=True)
        self.before, self.after = rendered.split("{instruction}")
        self.tok = tok

    def build(self, behavior, suffix, target, eos):
        head = tokens(self.tok, self.before) + tokens(self.tok, behavior)
        ids = head + list(suffix) + tokens(self.tok, self.after)
        target_start = len(ids)
        ids += tokens(self.tok, target) + ([self.tok.eos_token_id] if eos else [])
        return {"ids": ids, "suffix_start": len(head), "target_start": target_start}


def allowed_tokens(tok):
    """get_nonascii_toks's complement (ATU:248-270): printable ASCII decodings, no special ids."""
    special = {tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id}
    ok = []
    for i in range(3, len(tok)):
        s = tok.decode([i])
        if s.isascii() and s.isprintable() and i not in special:
            ok.append(i)
    return np.array(ok)


def target_losses(model, seqs, target_start):
    """Mean CE of the target rows of same-length sequences (row t predicts t + 1)."""
    ids = torch.tensor(seqs)
    logits = model(ids).logits[:, target_start - 1:-1]
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, target_start:], reduction="none")
    return ce.mean(dim=1)


def draw_candidates(rng, allowed, suffix, worse=None):
    """SEARCH_WIDTH one-token edits, candidate j at position floor(j L / width); distinct per position.
    WORSE (a function of position and token: whether that edit raises the loss) restricts the draw."""
    L = len(suffix)
    pos = [j * L // SEARCH_WIDTH for j in range(SEARCH_WIDTH)]
    pairs = []
    for p in range(L):
        k = pos.count(p)
        pool = allowed[allowed != suffix[p]]
        if worse:
            pool = np.array([t for t in pool if worse(p, int(t))])
        pairs += [(p, int(t)) for t in rng.choice(pool, size=k, replace=False)]
    return pairs


def edit_losses(model, layout, case, suffix, allowed):
    """The loss of every one-token edit of SUFFIX to an allowed token, by (position, token)."""
    edits = [(p, int(t)) for p in range(len(suffix)) for t in allowed if t != suffix[p]]
    seqs = []
    for p, t in edits:
        c = list(suffix)
        c[p] = t
        seqs.append(layout.build(case[1], c, case[2], False))
    out = {}
    with torch.no_grad():
        for i in range(0, len(seqs), 256):
            chunk = seqs[i:i + 256]
            losses = target_losses(model, [x["ids"] for x in chunk], chunk[0]["target_start"])
            for e, l in zip(edits[i:i + 256], losses):
                out[e] = float(l)
    return out


def gcg_step(model, layout, case, suffix, rng, allowed, given_pairs, worse_only=False):
    """One GCG step; draws a candidate set unless given (the float32 pass). WORSE_ONLY: every
    candidate raises the loss, so the argmin is worse than the current suffix (quirk i)."""
    current = layout.build(case[1], suffix, case[2], False)
    with torch.no_grad():
        loss_in = float(target_losses(model, [current["ids"]], current["target_start"])[0])
    worse = None
    if worse_only and not given_pairs:
        edits = edit_losses(model, layout, case, suffix, allowed)
        worse = lambda p, t: edits[(p, t)] > loss_in + ARGMIN_MARGIN  # noqa: E731
    while True:
        pairs = given_pairs or draw_candidates(rng, allowed, suffix, worse)
        cands = []
        for p, t in pairs:
            c = list(suffix)
            c[p] = t
            cands.append(c)
        seqs = [layout.build(case[1], c, case[2], False) for c in cands]
        with torch.no_grad():
            losses = target_losses(model, [s["ids"] for s in seqs], seqs[0]["target_start"]).tolist()
        order = np.argsort(losses, kind="stable")
        if given_pairs or losses[order[1]] - losses[order[0]] >= ARGMIN_MARGIN:
            best = int(order[0])
            assert not worse_only or losses[best] > loss_in
            return {"suffix_in": list(suffix), "loss_in": loss_in, "pairs": [list(x) for x in pairs],
                    "losses": losses, "argmin": best, "suffix_out": cands[best], "loss": losses[best]}


def r2d2_loss(model, examples):
    """examples: (ids, label_from, kind); HarmBench's three losses over the batch's rows."""
    rows = {"utility": [], "away": [], "toward": []}
    for ids, label_from, kind in examples:
        logits = model(torch.tensor([ids])).logits[0]
        rows[kind].append((logits[label_from:len(ids) - 1], torch.tensor(ids[label_from + 1:])))
    cat = {k: (torch.cat([z for z, _ in v]), torch.cat([y for _, y in v])) for k, v in rows.items()}
    utility = torch.nn.functional.cross_entropy(*cat["utility"])
    toward = torch.nn.functional.cross_entropy(*cat["toward"])
    z, y = cat["away"]
    lse = torch.logsumexp(z, dim=1)
    log_p = z.gather(1, y[:, None])[:, 0] - lse
    masked = z.scatter(1, y[:, None], -1e10)  # log(1 - p) as ATU:465-475 computes it
    log_1mp = torch.logsumexp(masked, dim=1) - lse
    assert float((log_p - AWAY_LOG_P_MIN).abs().min()) > THRESHOLD_MARGIN, "an away row at the threshold"
    away = -torch.where(log_p >= AWAY_LOG_P_MIN, log_1mp, torch.zeros_like(log_1mp)).sum() / len(y)
    total = W_UTILITY * utility + W_AWAY * away + W_TOWARD * toward
    return total, {"utility": utility.item(), "away": away.item(), "toward": toward.item(), "total": total.item(),
                   "n_utility": len(cat["utility"][1]), "n_away": len(y),
                   "away_kept": int((log_p >= AWAY_LOG_P_MIN).sum()), "n_toward": len(cat["toward"][1])}


def run(dtype, tok, given=None):
    """UPDATES updates; with GIVEN (the float64 run's record) reuses its candidate sets and clip norms."""
    model = load_model(dtype)
    layout = Layout(tok)
    rng = np.random.default_rng(SEED)
    allowed = allowed_tokens(tok)
    eos = tok.eos_token_id
    suffixes = [tokens(tok, c[3]) for c in CASES]
    utility = []
    for conv, labels in UTILITY:
        ids = tok.apply_chat_template(conv, tokenize=True, return_dict=False)
        prompt = tok.apply_chat_template(conv[:-1], tokenize=True, add_generation_prompt=True, return_dict=False)
        assert ids[:len(prompt)] == prompt
        utility.append({"ids": list(ids), "label_from": len(prompt) - 1 if labels == "reply" else 0})
    params = list(model.named_parameters())
    opt = torch.optim.AdamW([p for _, p in params], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    updates, grads, deltas = [], [], []
    for u in range(UPDATES):
        gcg = []
        for ci, case in enumerate(CASES):
            steps = []
            for k in range(GCG_STEPS):
                pairs = given["updates"][u]["gcg"][ci][k]["pairs"] if given else None
                worse_only = (u, ci, k) == WORSE_STEP
                st = gcg_step(model, layout, case, suffixes[ci], rng, allowed, pairs, worse_only)
                suffixes[ci] = st["suffix_out"]
                steps.append(st)
            gcg.append(steps)
        examples, sequences = [], []
        for ci, case in enumerate(CASES):
            away = layout.build(case[1], suffixes[ci], case[2], False)
            toward = layout.build(case[1], suffixes[ci], REFUSAL, True)
            examples += [(away["ids"], away["target_start"] - 1, "away"),
                         (toward["ids"], toward["target_start"] - 1, "toward")]
            sequences.append({"away": away, "toward": toward})
        examples += [(x["ids"], x["label_from"], "utility") for x in utility]
        opt.zero_grad()
        total, losses = r2d2_loss(model, examples)
        total.backward()
        norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for _, p in params)))
        if given:
            max_norm = given["updates"][u]["max_norm"]
        else:
            max_norm = float("%.2g" % (CLIP_FRACTION[u] * norm)) if CLIP_FRACTION[u] > 0 else 0.0
        grads.append([p.grad.detach().clone() for _, p in params])  # before clipping
        print("update %d: median |gradient| %.2g, away rows kept %d of %d" % (
            u + 1, float(torch.cat([g.abs().reshape(-1) for g in grads[-1]]).median()), losses["away_kept"],
            losses["n_away"]))
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_([p for _, p in params], max_norm)
        before = [p.detach().clone() for _, p in params]
        opt.step()
        deltas.append([p.detach() - b for (_, p), b in zip(params, before)])
        updates.append({"lr": LR, "max_norm": max_norm, "gcg": gcg, "sequences": sequences, "losses": losses,
                        "grad_norm": norm})
    record = {"model": MODEL, "before": layout.before, "after": layout.after, "eos": eos, "refusal": REFUSAL,
              "cases": [{"name": c[0], "behavior": c[1], "target": c[2], "suffix": tokens(tok, c[3])} for c in CASES],
              "utility": utility, "gcg_steps": GCG_STEPS, "search_width": SEARCH_WIDTH,
              "loss_weights": [W_UTILITY, W_AWAY, W_TOWARD], "away_log_p_min": AWAY_LOG_P_MIN,
              "adamw": {"beta1": BETAS[0], "beta2": BETAS[1], "eps": EPS, "weight_decay": WD},
              "params": [{"name": n, "shape": list(p.shape)} for n, p in params], "updates": updates}
    return record, grads, deltas


def rel(a, b):
    return float(torch.linalg.vector_norm(a.double() - b.double()) / torch.linalg.vector_norm(b.double()))


def main(out_dir):
    tok = AutoTokenizer.from_pretrained(os.path.join(TINY, MODEL))
    rec, grads, deltas = run(torch.float64, tok)
    rec32, grads32, deltas32 = run(torch.float32, tok, rec)
    for u in range(UPDATES):
        a, b = rec["updates"][u], rec32["updates"][u]
        same = all(x["argmin"] == y["argmin"] for ca, cb in zip(a["gcg"], b["gcg"]) for x, y in zip(ca, cb))
        gcg_err = max(abs(l1 - l2) / l1 for ca, cb in zip(a["gcg"], b["gcg"]) for x, y in zip(ca, cb)
                      for l1, l2 in zip(x["losses"], y["losses"]))
        print("update %d: float32 vs float64: same argmins %s, candidate losses %.1e, losses %s" % (
            u + 1, same, gcg_err,
            {k: "%.1e" % (abs(a["losses"][k] - b["losses"][k]) / abs(a["losses"][k])) for k in ("utility", "away",
                                                                                              "toward")}))
        worst = sorted(((rel(g32, g), rel(d32, d), p["name"]) for g, g32, d, d32, p in
                        zip(grads[u], grads32[u], deltas[u], deltas32[u], rec["params"])), reverse=True)
        print("  max rel grad err %.1e (%s); max rel change err %.1e (%s)" % (
            worst[0][0], worst[0][2], max(w[1] for w in worst), max(worst, key=lambda w: w[1])[2]))
        print("  losses", a["losses"], "grad norm %.6g max_norm %g" % (a["grad_norm"], a["max_norm"]))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, MODEL + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, MODEL + ".f32"), "wb") as f:
        for u in range(UPDATES):
            for t in grads[u] + deltas[u]:
                f.write(t.detach().to(torch.float32).numpy().astype("<f4").tobytes())
    print("wrote", out_dir)


if __name__ == "__main__":
    main(sys.argv[1])
