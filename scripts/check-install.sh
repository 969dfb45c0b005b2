#!/usr/bin/env bash
# check-install.sh: the installed refgeo, and one built outside the source
# tree, find their data from any directory.
#
#   scripts/check-install.sh BUILD MODEL.gguf [OUT_OF_TREE_BUILD]
#
# Installs BUILD (cmake --install) to a temporary prefix, then runs
# PREFIX/bin/refgeo capture on MODEL from another directory with
# REFGEO_DATA unset: its default prompt sets must come from
# PREFIX/share/refgeo (tools/cli_data.h, rule 1), and the check fails if the
# run reads the source tree's data instead. OUT_OF_TREE_BUILD, when given,
# is a build folder outside the source tree: its refgeo must find the
# source tree's data/ (rule 5) the same way.
set -euo pipefail
BUILD=$1 MODEL=$2 OOT=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset REFGEO_DATA

# capture_from EXE LABEL: a small capture (2 + 2 prompts a split) run in an
# empty directory; prints the prompt file it read.
capture_from() {
  local exe=$1 label=$2 dir
  dir=$(mktemp -d "$work/run.XXXX")
  (cd "$dir" && "$exe" capture "$MODEL" --out acts.h5 --n-train 2 --n-val 2 --threads 2 --json >out.json 2>err.txt) ||
    { echo "check-install: $label: capture failed:" >&2; cat "$dir/err.txt" >&2; exit 1; }
  [ -s "$dir/acts.h5" ] || { echo "check-install: $label: no acts.h5" >&2; exit 1; }
  echo "check-install: $label ran capture from $dir: $(tr -d "\n\t" <"$dir/out.json")"
}

prefix="$work/prefix"
cmake --install "$BUILD" --prefix "$prefix" >/dev/null
for f in bin/refgeo share/refgeo/prompts/harmful_train.json share/doc/refgeo/ARCHITECTURE.md; do
  [ -e "$prefix/$f" ] || { echo "check-install: the install has no $f" >&2; exit 1; }
done
capture_from "$prefix/bin/refgeo" "installed refgeo"
# the prefix moved: the installed data is found relative to the executable
mv "$prefix" "$work/moved" && prefix="$work/moved"
capture_from "$prefix/bin/refgeo" "installed refgeo, prefix moved"
# and it is the installed data that is read, not the source tree's: with
# one installed prompt set gone, capture fails naming the installed path
rm "$prefix/share/refgeo/prompts/harmful_train.json"
if (cd "$work" && "$prefix/bin/refgeo" capture "$MODEL" --out x.h5 --n-train 2 --n-val 2 2>"$work/err.txt"); then
  echo "check-install: the installed refgeo read prompts from outside its prefix" >&2; exit 1
fi
grep -q "$prefix/share/refgeo/prompts/harmful_train.json" "$work/err.txt" ||
  { echo "check-install: unexpected error:" >&2; cat "$work/err.txt" >&2; exit 1; }
echo "check-install: without the installed prompts: $(cat "$work/err.txt")"
if [ -n "$OOT" ]; then
  case $(cd "$OOT" && pwd) in "$(cd "$(dirname "$0")/.." && pwd)"/*)
    echo "check-install: $OOT is inside the source tree" >&2; exit 1;; esac
  capture_from "$OOT/refgeo" "out-of-tree build"
fi
echo "check-install: ok"
