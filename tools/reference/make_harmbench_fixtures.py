"""Writes the reference fixtures for refgeo's HarmBench code (tests/fixtures/harmbench/).

Dev-only; refgeo and its tests never run Python. Regenerate with:

    /root/.cache/refgeo-pyenv/bin/python tools/reference/make_harmbench_fixtures.py \
        --shared /work/shared/data --out tests/fixtures/harmbench

Every expected value is computed here with independent Python tools (the csv
module, str.format, plain substring tests, scipy.stats), never with refgeo.

Fixtures:
  csv_fields.json     every CSV under harmbench/ and advbench/ read with Python's csv
                      module: header, row count and, per field, its UTF-8 byte length and
                      FNV-1a 64 hash (so every byte is checked without copying the shared
                      data into the repository), plus the count of multi-line fields.
"""

import argparse
import csv
import json
import os


def fnv1a64(data: bytes) -> str:
    """FNV-1a, 64-bit (offset 0xcbf29ce484222325, prime 0x100000001b3)."""
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def csv_fields(shared):
    files = []
    for sub in ("harmbench", "advbench"):
        for name in sorted(os.listdir(os.path.join(shared, sub))):
            if not name.endswith(".csv"):
                continue
            rel = sub + "/" + name
            # newline='' keeps newlines inside quoted fields exactly as written;
            # utf-8-sig strips a byte order mark if there is one.
            with open(os.path.join(shared, rel), newline="", encoding="utf-8-sig") as f:
                rows = [r for r in csv.reader(f, strict=True) if r]  # blank lines carry no row
            header, data = rows[0], rows[1:]
            assert all(len(r) == len(header) for r in data), rel
            enc = [[x.encode("utf-8") for x in r] for r in data]
            files.append({
                "path": rel,
                "header": header,
                "n_rows": len(data),
                "multiline_fields": sum(b"\n" in x for r in enc for x in r),
                "lengths": [[len(x) for x in r] for r in enc],
                "fnv1a64": [[fnv1a64(x) for x in r] for r in enc],
            })
    return {"files": files}


def write_json(out, name, obj):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="/work/shared/data")
    ap.add_argument("--out", default="tests/fixtures/harmbench")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_json(args.out, "csv_fields.json", csv_fields(args.shared))


if __name__ == "__main__":
    main()
