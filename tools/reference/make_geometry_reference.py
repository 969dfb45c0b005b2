"""numpy/scipy reference for tests/test_geometry_pipeline.c.

Reads activation files written by `refgeo capture` (HDF5, read here with
h5py: /step_<S>/acts/<split>/resid_pre, float32 [layers, prompts, eoi
positions, d_model]) and recomputes, independently of refgeo's C code, what
`refgeo geometry` derives from them without running the model:
  - per step, layer l and eoi position p (layer-major, as geometry.csv's rows):
    r = mean harmful_train - mean harmless_train (float64), |r|, the cosine to
    step 0's r, r . u for a fixed random unit vector u (stored here: it
    carries r's sign, which a split swap flips), the AUROC of the harmful vs
    harmless train projections onto r (scipy's Mann-Whitney U / (n_h n_l),
    ties 1/2), and the three spectrum measures (erank_sigma, erank_sigma2,
    participation ratio: src/geometry/spectrum.h's definitions) of the
    "prompt_diff" matrix x_i^harmful - mean harmless;
  - per step and layer, the spectrum measures of the "carrier" matrix (the 6
    unit directions r[p, l] as rows);
  - per step, for the candidate layers of --layers, the line angle
    arccos(|cos|) in degrees between every candidate direction and every
    step-0 candidate direction (migration.csv's drift, whichever carriers the
    model-based selection picks).
Selection itself (bypass, induce, KL) needs the model and is not recomputed.
Floats carry 10 significant digits; NaN is written as null.

Dev only, never run by CI. The activation files are the test's, made with the
test's own commands (from the repository root, MODEL = SmolLM2-135M-Instruct
Q4_1 GGUF):

    refgeo perturb --model MODEL --out pert.gguf --scale 0.05 --seed 1
    printf 'step,path\\n0,MODEL\\n100,pert.gguf\\n' > manifest.csv
    refgeo capture --manifest manifest.csv --out acts_full.h5 --n-train 32 --n-val 16 \\
        --threads 2 --harmful-train data/prompts/harmful_train.json \\
        --harmless-train data/prompts/harmless_train.json \\
        --harmful-val data/prompts/harmful_val.json --harmless-val data/prompts/harmless_val.json
    (the same with --n-train 8 --n-val 4 --out acts_small.h5, the sanitizer build's size)
    python tools/reference/make_geometry_reference.py --layers 4:6 \\
        --full acts_full.h5 --small acts_small.h5 --out tests/fixtures/geometry/pipeline_reference.json
"""

import argparse
import json
import math

import h5py
import numpy as np
from scipy.stats import mannwhitneyu


def g(x):
    x = float(x)
    return None if math.isnan(x) else float("%.10g" % x)


def spectrum(a):
    s = np.linalg.svd(a, compute_uv=False)
    if not s.sum() > 0:
        return [None, None, None]

    def erank(w):
        p = w[w > 0] / w.sum()
        return math.exp(-(p * np.log(p)).sum())

    lam = s * s
    return [g(erank(s)), g(erank(lam)), g(lam.sum() ** 2 / (lam * lam).sum())]


def unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def variant(path, u, lo, hi):
    with h5py.File(path, "r") as f:
        steps = sorted(int(k[len("step_"):]) for k in f if k.startswith("step_"))
        acts = {s: {c: f["step_%d/acts/%s_train/resid_pre" % (s, c)][()].astype(np.float64)
                    for c in ("harmful", "harmless")} for s in steps}
    n_layers, n_h, n_pos, _ = acts[steps[0]]["harmful"].shape
    n_l = acts[steps[0]]["harmless"].shape[1]
    dirs = {s: acts[s]["harmful"].mean(axis=1) - acts[s]["harmless"].mean(axis=1) for s in steps}  # [L, P, d]
    out = {"steps": steps, "n_layers": n_layers, "n_pos": n_pos, "n_harmful": n_h, "n_harmless": n_l,
           "layers": [lo, hi], "per_step": []}
    for s in steps:
        xh, xl, r = acts[s]["harmful"], acts[s]["harmless"], dirs[s]
        site = {k: [] for k in ("dir_norm", "cos_step0", "proj_u", "auroc", "erank_sigma", "erank_sigma2", "pr")}
        for l in range(n_layers):
            for p in range(n_pos):
                d = r[l, p]
                norm = np.linalg.norm(d)
                site["dir_norm"].append(g(norm))
                d0 = dirs[steps[0]][l, p]
                site["cos_step0"].append(g(d @ d0 / (norm * np.linalg.norm(d0))) if norm > 0 else None)
                site["proj_u"].append(g(d @ u))
                if norm > 0:
                    ph, pl = xh[l, :, p] @ (d / norm), xl[l, :, p] @ (d / norm)
                    site["auroc"].append(g(mannwhitneyu(ph, pl).statistic / (n_h * n_l)))
                else:
                    site["auroc"].append(None)
                es, es2, pr = spectrum(xh[l, :, p] - xl[l, :, p].mean(axis=0))
                site["erank_sigma"].append(es), site["erank_sigma2"].append(es2), site["pr"].append(pr)
        carrier = [spectrum(np.stack([unit(r[l, p]) for p in range(n_pos)])) for l in range(n_layers)]
        cand = [unit(r[l, p]) for p in range(n_pos) for l in range(lo, hi)]  # RD loop order: position, then layer
        cand0 = [unit(dirs[steps[0]][l, p]) for p in range(n_pos) for l in range(lo, hi)]
        angle = [[g(math.degrees(math.acos(min(1.0, abs(a @ b))))) for b in cand0] for a in cand]
        out["per_step"].append({"step": s, "sites": site, "carrier_spectrum": carrier, "line_angle_vs_step0": angle})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", required=True)
    ap.add_argument("--small", required=True)
    ap.add_argument("--layers", default="4:6")
    ap.add_argument("--out", default="tests/fixtures/geometry/pipeline_reference.json")
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.layers.split(":"))
    with h5py.File(args.full, "r") as f:
        d_model = f["step_0/acts/harmful_train/resid_pre"].shape[3]
    u = unit(np.random.default_rng(13).standard_normal(d_model))
    u = np.array([float("%.10g" % x) for x in u])  # the stored u is the one used
    ref = {"u": u.tolist(), "full": variant(args.full, u, lo, hi), "small": variant(args.small, u, lo, hi)}
    with open(args.out, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
