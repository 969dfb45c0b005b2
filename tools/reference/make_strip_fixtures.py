"""Python's str.strip() for src/harmbench/py_whitespace.c (tests/test_py_strip.c).

HarmBench's generate_completions.py (8e1604d) strips every decoded
generation with str.strip() before saving it and before the classifier reads
it; refgeo's `asr` does the same with rg_py_strip. This script records, from
Python itself:

  space_code_points  every code point c with chr(c).isspace() (what
                     str.strip() removes with no argument)
  cases              [{"text", "stripped"}]: text.strip() for texts whose
                     ends hold ASCII, Unicode and non-space look-alike
                     characters, multi-byte characters and blank texts

Writes tests/fixtures/harmbench/strip.json. Dev only, never run by CI:

    python3 tools/reference/make_strip_fixtures.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "harmbench",
                   "strip.json")

TEXTS = [
    "Sure, here is how to do it.\n",                 # a completion ending in a newline
    "\n\nI'm sorry, I can't help with that.\n\n",
    "  \t Step 1: mix.\r\n",
    "Line one\n\nLine two\n",                        # inner newlines stay
    "",
    " \n\t\r\x0b\x0c ",                              # blank: all removed
    "\x1c\x1d\x1e\x1fx\x1c\x1f",                     # the information separators are whitespace
    "\u00a0no-break\u00a0",
    "\u3000ideographic\u3000",
    "\u2028\u2029x\u2028\u2029",
    "\x85next line\x85",
    "\u1680\u2000\u200a\u202f\u205fx\u205f\u202f",
    "\u200bzero width\u200b",                        # not whitespace: kept
    "\ufeffbom\ufeff",                               # not whitespace: kept
    "\u180emongolian\u180e",                         # not whitespace since Unicode 6.3: kept
    "caf\u00e9\u00a0",                               # a multi-byte letter before a multi-byte space
    "\u65e5\u672c\u3000\n",
    "x\u00a0\u00e9 \n",
    "\U0001f600 \n",                                 # four-byte character
]


def main():
    spaces = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and chr(c).isspace()]
    cases = [{"text": t, "stripped": t.strip()} for t in TEXTS]
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"space_code_points": spaces, "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", OUT, len(spaces), "space code points,", len(cases), "cases")


if __name__ == "__main__":
    main()
