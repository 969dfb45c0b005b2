"""transformers reference for the top-k sets of one GCG step of `refgeo attack`
(tests/test_attack_topk.c, read back from --dump-steps).

HarmBench's sample_control (8e1604d baselines/gcg/gcg_utils.py, as
adv_training_utils.py) samples each suffix position's token from
topk(-grad, k) of the gradient of the target loss with respect to the
one-hot suffix, disallowed tokens (get_nonascii_toks) set above every other
entry. This script computes that gradient in float64 on SmolLM2-135M-Instruct
(the GGUF dequantized by transformers) for the behavior and token layout of
make_attack_fixtures.py (tests/fixtures/gcg/attack_step.json: its
behaviors_csv row and ids, the initial suffix of 20 "!") and writes, per
position, the K + EXTRA best tokens of -grad with their values, so that the
test can tell a real difference from an exchange of two tokens whose values
float32 cannot separate at the K-th place.

Writes tests/fixtures/gcg/topk_step.json. Dev only, never run by CI:

    python tools/reference/make_gcg_topk_fixtures.py \\
        PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from make_attack_fixtures import N_SUFFIX, ROOT, suffix_grad
from make_gcg_fixtures import disallowed_ranges

OUT = os.path.join(ROOT, "tests", "fixtures", "gcg", "topk_step.json")
K, EXTRA = 32, 8


def main():
    gguf = os.path.abspath(sys.argv[1])
    d, name = os.path.split(gguf)
    AutoTokenizer.from_pretrained(d, gguf_file=name)  # the same loader as make_attack_fixtures.py
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).double().train(False)
    with open(os.path.join(ROOT, "tests", "fixtures", "gcg", "attack_step.json"), encoding="utf-8") as f:
        case = json.load(f)
    ids, start, nt = case["ids"], case["suffix_start"], case["n_target"]
    assert case["n_suffix"] == N_SUFFIX
    loss0, grad = suffix_grad(model, ids, start, nt, disallowed_ranges(gguf)[1])
    top = torch.topk(-grad, K + EXTRA, dim=1)
    out = {
        "behavior_id": case["behavior_id"],
        "behaviors_csv": case["behaviors_csv"],
        "k": K,
        "initial_loss": loss0.item(),
        "top_ids": top.indices.tolist(),
        "top_values": [[float("%.9g" % v) for v in row] for row in top.values.tolist()],
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
