"""check_notebook.py: a notebook of `refgeo report --notebook` as Jupyter sees it.

    python check_notebook.py NOTEBOOK.ipynb OUT_DIR

1. nbformat.validate accepts it (nbformat's JSON schema for its version);
2. `jupyter nbconvert --to notebook --execute` runs it without error (a
   Python kernel, pandas reading the run's CSVs, matplotlib drawing);
3. every code cell, once executed, displays a figure (image/png).
Exit 0 when all hold, 1 with one line naming what failed, 77 (skip) when
nbformat or nbconvert is not installed.
"""
import json
import os
import subprocess
import sys


def main():
    nb_path, out_dir = sys.argv[1], sys.argv[2]
    try:
        import nbformat
        import nbconvert  # noqa: F401  (nbconvert runs below, as its CLI)
    except ImportError as e:
        print(f"check_notebook: skipped, {e}")
        return 77
    nb = nbformat.read(nb_path, as_version=nbformat.NO_CONVERT)
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as e:
        print(f"check_notebook: {nb_path}: not valid nbformat: {e.message}")
        return 1
    os.makedirs(out_dir, exist_ok=True)
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=300", "--output-dir", out_dir, "--output", "executed", nb_path],
        capture_output=True, text=True)
    if run.returncode != 0:
        last = run.stderr.strip().splitlines()[-1:] or ["(no output)"]
        print(f"check_notebook: {nb_path}: nbconvert --execute failed: {last[0]}")
        return 1
    with open(os.path.join(out_dir, "executed.ipynb")) as f:
        executed = json.load(f)
    for i, cell in enumerate(c for c in executed["cells"] if c["cell_type"] == "code"):
        kinds = [o["output_type"] for o in cell["outputs"]]
        if "error" in kinds or not any("image/png" in o.get("data", {}) for o in cell["outputs"]):
            print(f"check_notebook: {nb_path}: code cell {i} drew no figure (outputs: {kinds})")
            return 1
    print(f"check_notebook: {nb_path}: valid, executed, every code cell drew its figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
