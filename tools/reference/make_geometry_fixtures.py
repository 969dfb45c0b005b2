"""Independent float64 references for refgeo's geometry measures (numpy/scipy).

Writes tests/fixtures/geometry/geometry_cases.json, read by tests/test_geometry.c.
Regenerate (dev only, never run by CI) from the repository root with:

    python tools/reference/make_geometry_fixtures.py

Every expected value here comes from numpy / scipy, not from refgeo:
  - singular values: numpy.linalg.svd(compute_uv=False)
  - erank_sigma / erank_sigma2: exp(scipy.stats.entropy(p)) with p = s/sum(s)
    or s^2/sum(s^2) (Roy & Vetterli 2007; entropy ignores zero weights)
  - participation ratio: (sum l)^2 / sum l^2, l = s^2
  - principal angles: scipy.linalg.subspace_angles on the column matrices
    (refgeo stores spanning vectors as rows, so the JSON holds rows)
  - AUROC: scipy.stats.mannwhitneyu(harmful, harmless).statistic / (n1 n2)
  - difference in means: float32 activations cast to float64, numpy means
Floats are written with repr(), which round-trips float64 exactly; NaN is
written as null.
"""
import json
import math
import os

import numpy as np
import scipy.linalg
import scipy.stats

RNG = np.random.default_rng(20260601)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "geometry", "geometry_cases.json")


def num(x):
    x = float(x)
    return None if math.isnan(x) else x


def nums(a):
    return [num(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def erank(w):
    w = np.asarray(w, dtype=np.float64)
    if not np.any(w > 0):
        return math.nan
    return float(np.exp(scipy.stats.entropy(w / w.sum())))


def spectrum_case(name, A):
    s = np.linalg.svd(A, compute_uv=False)
    lam = s**2
    pr = lam.sum() ** 2 / (lam**2).sum() if np.any(lam > 0) else math.nan
    return {
        "name": name,
        "rows": A.shape[0],
        "cols": A.shape[1],
        "a": nums(A),
        "singular_values": nums(s),
        "erank_sigma": num(erank(s)),
        "erank_sigma2": num(erank(s**2)),
        "participation_ratio": num(pr),
    }


def unit_rows_with_cos(k, d, c):
    """k unit vectors of length d with pairwise cosine exactly c (Gram = (1-c)I + c 11^T)."""
    gram = (1 - c) * np.eye(k) + c * np.ones((k, k))
    factor = np.linalg.cholesky(gram)  # rows of factor have that Gram matrix
    basis, _ = np.linalg.qr(RNG.standard_normal((d, k)))
    return factor @ basis.T


def angle_case(name, A, B):
    theta = scipy.linalg.subspace_angles(A.T, B.T)
    return {"name": name, "d": A.shape[1], "ka": A.shape[0], "kb": B.shape[0], "a": nums(A), "b": nums(B), "angles": nums(theta)}


def vector_pair(name, a, b):
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        cos = angle = line = math.nan
    else:
        cos = float(np.dot(a, b) / (na * nb))
        angle = float(np.arccos(np.clip(cos, -1, 1)))
        line = float(scipy.linalg.subspace_angles(a[:, None], b[:, None])[0])
    return {"name": name, "a": nums(a), "b": nums(b), "cos": num(cos), "angle": num(angle), "line_angle": num(line)}


def pair_with_cos(d, c):
    u, _ = np.linalg.qr(RNG.standard_normal((d, 2)))
    a = u[:, 0] * 3.0
    b = (c * u[:, 0] + math.sqrt(1 - c * c) * u[:, 1]) * 0.5
    return a, b


def auroc_case(name, pos, neg):
    u = scipy.stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic
    return {"name": name, "harmful": nums(pos), "harmless": nums(neg), "auroc": float(u) / (len(pos) * len(neg))}


def diff_means_case():
    n_pos, n_layers, d = 2, 3, 16
    harmful = (RNG.standard_normal((7, n_layers, n_pos, d)) + 0.7).astype(np.float32)
    harmless = RNG.standard_normal((5, n_layers, n_pos, d)).astype(np.float32)
    mu = harmful.astype(np.float64).mean(axis=0)  # [L, P, d]
    nu = harmless.astype(np.float64).mean(axis=0)
    r = np.transpose(mu - nu, (1, 0, 2))  # [P, L, d], the RD mean_diffs axes
    layer = 1
    carrier = r[:, layer, :] / np.linalg.norm(r[:, layer, :], axis=1, keepdims=True)
    s = np.linalg.svd(carrier, compute_uv=False)
    # per-prompt differences at position -1 (index 1), layer 1: x_i - nu
    X = harmful[:, layer, 1, :].astype(np.float64) - nu[layer, 1, :]
    sx = np.linalg.svd(X, compute_uv=False)
    return {
        "n_pos": n_pos,
        "n_layers": n_layers,
        "d_model": d,
        "harmful": nums(harmful),
        "harmless": nums(harmless),
        "directions": nums(r),
        "norms": nums(np.linalg.norm(r, axis=2)),
        "carrier_layer": layer,
        "carrier_erank_sigma": erank(s),
        "carrier_erank_sigma2": erank(s**2),
        "prompt_diff_singular_values": nums(sx),
    }


def main():
    spectra = [
        spectrum_case("random_6x40", RNG.standard_normal((6, 40))),
        spectrum_case("rank3_8x30", RNG.standard_normal((8, 3)) @ RNG.standard_normal((3, 30))),
        spectrum_case("five_unit_cos0.95", unit_rows_with_cos(5, 64, 0.95)),
        spectrum_case("five_unit_cos0.99", unit_rows_with_cos(5, 64, 0.99)),
        spectrum_case("two_unit_cos0.99", unit_rows_with_cos(2, 64, 0.99)),
        spectrum_case("tall_50x4", RNG.standard_normal((50, 4)) * np.array([5.0, 1.0, 0.3, 0.01])),
        spectrum_case("zero_3x5", np.zeros((3, 5))),
    ]
    angles = [
        angle_case("random_3_vs_2", RNG.standard_normal((3, 40)), RNG.standard_normal((2, 40))),
        angle_case("random_2_vs_4", RNG.standard_normal((2, 20)), RNG.standard_normal((4, 20))),
        angle_case("rank2_of_4_vs_3", RNG.standard_normal((4, 2)) @ RNG.standard_normal((2, 25)), RNG.standard_normal((3, 25))),
        angle_case("same_span", *(lambda Q: (Q, RNG.standard_normal((3, 3)) @ Q))(RNG.standard_normal((3, 30)))),
    ]
    for c in (0.99, 0.9999):
        a, b = pair_with_cos(48, c)
        angles.append(angle_case(f"lines_cos{c}", a[None, :], b[None, :]))
    pairs = []
    for c in (0.99, 0.9999, 0.0, -0.9):
        a, b = pair_with_cos(32, c)
        pairs.append(vector_pair(f"cos{c}", a, b))
    pairs.append(vector_pair("zero", np.zeros(32), RNG.standard_normal(32)))
    pos = np.round(RNG.standard_normal(37) + 0.8, 1)  # rounding to 0.1 makes ties
    neg = np.round(RNG.standard_normal(29), 1)
    aurocs = [
        auroc_case("normal_with_ties", pos, neg),
        auroc_case("separated", np.array([3.0, 4.0, 5.0]), np.array([-1.0, 0.0])),
        auroc_case("all_tied", np.full(4, 2.0), np.full(6, 2.0)),
        auroc_case("reversed", np.array([-3.0, -2.0]), np.array([1.0, 2.0, 3.0])),
    ]
    doc = {
        "generator": "tools/reference/make_geometry_fixtures.py",
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "spectra": spectra,
        "angles": angles,
        "vector_pairs": pairs,
        "auroc": aurocs,
        "diff_means": diff_means_case(),
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {os.path.normpath(OUT)} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
