"""Torch side of bench/gcg.sh: HarmBench's GCG step, timed in its parts.

    python bench/gcg_peer.py MODEL.gguf BEHAVIOR TARGET WIDTH STEPS BATCH THREADS [FILTER]

The logic of HarmBench's baselines/gcg/gcg.py (8e1604d), written here for
the bench: the model in float32 from the same GGUF; the chat template's
text before the instruction and the behavior run once into a prefix KV
cache; each step takes the gradient of the target loss with respect to the
one-hot suffix (through the embedding matrix, on top of the prefix cache),
samples WIDTH candidates (one position each, from that position's top 256
of -gradient, non-ASCII tokens excluded), drops the candidates whose
suffix does not decode and re-encode to itself, one tokenizer call each,
keeping all when all would go (gcg.py:174-197; FILTER=0 skips this), and
evaluates the rest's losses in batches of BATCH on the expanded prefix
cache; the argmin becomes the suffix. Prints, as bench_gcg does, each step's parts and the medians over
STEPS steps after one untimed warm-up step. Dev-only.
"""
import os
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache


def main():
    path, behavior, target = sys.argv[1:4]
    width, steps, batch, threads = map(int, sys.argv[4:8])
    use_filter = len(sys.argv) < 9 or sys.argv[8] != "0"
    torch.set_num_threads(threads)
    d, name = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    embed = model.get_input_embeddings()
    vocab = embed.weight.shape[0]

    # gcg.py: the template is split around "{instruction}"; behavior += " ".
    marker = "<<INSTRUCTION>>"
    text = tok.apply_chat_template([{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True)
    before, after = text.split(marker)
    ids = lambda s: torch.tensor([tok(s, add_special_tokens=False).input_ids])
    before_ids, behavior_ids, after_ids, target_ids = ids(before), ids(behavior + " "), ids(after), ids(target)
    suffix = ids("! " * 19 + "!")[0]
    n_suffix = suffix.numel()

    # gcg.py's get_nonascii_toks: disallow ids whose decoding is not printable ASCII, and the specials.
    bad = [i for i in range(3, tok.vocab_size) if not (tok.decode([i]).isascii() and tok.decode([i]).isprintable())]
    for s in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id):
        if s is not None:
            bad.append(s)
    not_allowed = torch.tensor(sorted(set(bad)), dtype=torch.long)

    vocab_embeds = embed(torch.arange(vocab))
    after_embeds, target_embeds = embed(after_ids), embed(target_ids)
    with torch.no_grad():
        out = model(inputs_embeds=embed(torch.cat([before_ids, behavior_ids], 1)), use_cache=True)
    prefix = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
    n_target = target_ids.shape[1]

    def cache(b):
        return DynamicCache(ddp_cache_data=[(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1)) for k, v in prefix])

    def target_loss(logits, b):
        tail = logits[:, -n_target - 1:-1, :]
        return torch.nn.functional.cross_entropy(tail.transpose(1, 2), target_ids.expand(b, -1), reduction="none").mean(1)

    n_prefix = before_ids.shape[1] + behavior_ids.shape[1]
    print(f"{path}: {n_prefix + n_suffix + after_ids.shape[1] + n_target} tokens (prefix {n_prefix}, suffix "
          f"{n_suffix}, target {n_target}), width {width}, batch {batch}, threads {threads}")
    g = torch.Generator().manual_seed(12345)
    t_grad, t_rate, t_step, t_filter = [], [], [], []
    for s in range(steps + 1):
        t0 = time.perf_counter()
        onehot = torch.zeros(1, n_suffix, vocab)
        onehot[0, torch.arange(n_suffix), suffix] = 1
        onehot.requires_grad_(True)
        inp = torch.cat([onehot @ vocab_embeds, after_embeds, target_embeds], 1)
        loss = target_loss(model(inputs_embeds=inp, past_key_values=cache(1)).logits, 1)[0]
        grad = torch.autograd.grad(loss, onehot)[0][0]
        t1 = time.perf_counter()
        with torch.no_grad():
            grad[:, not_allowed] = float("inf")  # sample_control
            top = (-grad).topk(256, dim=1).indices
            pos = (torch.arange(width) * n_suffix // width).long()
            pick = torch.randint(0, 256, (width,), generator=g)
            cands = suffix.repeat(width, 1)
            cands[torch.arange(width), pos] = top[pos, pick]
            t1f = time.perf_counter()
            if use_filter:  # gcg.py's re-tokenization filter
                texts = tok.batch_decode(cands)
                kept = [c for c, t in zip(cands, texts)
                        if torch.equal(tok(t, return_tensors="pt", add_special_tokens=False)["input_ids"][0], c)]
                if kept:
                    cands = torch.stack(kept)
            t2 = time.perf_counter()
            losses = []
            for i in range(0, cands.shape[0], batch):
                c = cands[i:i + batch]
                b = c.shape[0]
                inp = torch.cat([embed(c), after_embeds.expand(b, -1, -1), target_embeds.expand(b, -1, -1)], 1)
                losses.append(target_loss(model(inputs_embeds=inp, past_key_values=cache(b)).logits, b))
            losses = torch.cat(losses)
            t3 = time.perf_counter()
            best = int(losses.argmin())
            suffix = cands[best].clone()
        if s == 0:
            continue
        n = cands.shape[0]
        t_grad.append(t1 - t0), t_rate.append(n / (t3 - t2)), t_step.append(t3 - t0), t_filter.append(t2 - t1f)
        print(f"step {s}: token gradient {t1 - t0:.3f} s, filter {t2 - t1f:.3f} s ({n} of {width} kept), "
              f"{n} candidate losses {t3 - t2:.3f} s, step {t3 - t0:.3f} s, loss {loss.item():.4f} -> "
              f"{float(losses[best]):.4f}")
    step = statistics.median(t_step)
    print(f"median: {statistics.median(t_rate):.1f} candidate losses/s, {1 / step:.3f} steps/s ({step:.3f} s per "
          f"step, token gradient {statistics.median(t_grad):.3f} s)")
    print(f"filter: median {statistics.median(t_filter):.4f} s a step "
          f"({100 * statistics.median(t_filter) / step:.1f}% of the step)")


if __name__ == "__main__":
    main()
