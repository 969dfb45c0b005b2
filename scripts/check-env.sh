#!/usr/bin/env bash
# Makes the Python environment of the optional checks (tests/check/: the
# report in headless Chromium, the notebook in Jupyter) and prints its
# python. A venv under ~/.cache/refgeo/check-venv with the pinned packages
# of tests/check/requirements.txt; a second run with the same requirements
# does nothing and needs no network. On failure it prints nothing and exits
# non-zero: the checks then skip.
#   PY="$(bash scripts/check-env.sh)"
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${REFGEO_CACHE:-$HOME/.cache/refgeo}/check-venv"
REQ="$ROOT/tests/check/requirements.txt"
STAMP="$VENV/requirements.sha256"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "check-env: installing tests/check/requirements.txt into $VENV" >&2
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q -r "$REQ" >&2
  echo "$want" > "$STAMP"
fi
echo "$VENV/bin/python"
