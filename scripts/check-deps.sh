#!/bin/sh
# check-deps.sh: checks that the source folders depend on each other only in
# their order (docs/ARCHITECTURE.md) and that no file depends on itself
# through others.
#
#   scripts/check-deps.sh [ROOT] [BUILD]
#
# ROOT is the source tree (default: this script's). Two graphs are checked:
#  - includes: every `#include "..."` of src/ and tools/, file to file;
#  - calls, when BUILD names a build folder: the objects of refgeo_core, an
#    object depending on the one that defines a symbol it uses (nm).
# In both, a unit may depend only on its own folder or a folder earlier in
#   util < tensor < formats < tokenizer < model < backend < dist < engine
#     < capture, harmbench, adv_ft < geometry, report < tools
# (backend/cpu and backend/gpu count as backend; folders of one rank may use
# each other but not in a cycle), and no unit or folder may be in a cycle.
# Prints each violation and exits 1 when there is one; a folder not in the
# order is a violation too, so a new folder has to be placed in it.
set -eu
ROOT=${1:-$(dirname "$0")/..}
BUILD=${2:-}
cd "$ROOT"

# RANKS: folder rank, one per line
RANKS='util 0
tensor 1
formats 2
tokenizer 3
model 4
backend 5
dist 6
engine 7
capture 8
harmbench 8
adv_ft 8
geometry 9
report 9
tools 10'

# include_edges prints "from-unit to-unit" for each quoted include; a name is
# taken relative to src/ (the include path) or else to the including file.
include_edges() {
  find src tools -name '*.[ch]' -o -name '*.cu' | sort | while read -r f; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
      if [ -e "src/$inc" ]; then to="src/$inc"
      elif [ -e "$(dirname "$f")/$inc" ]; then to="$(dirname "$f")/$inc"
      else echo "$f: #include \"$inc\" names no file" >&2; echo "MISSING $f"; continue
      fi
      echo "$f $to"
    done
  done
}

# call_edges prints "from-unit to-unit" for each symbol an object of
# refgeo_core uses and another defines.
call_edges() {
  objdir="$BUILD/CMakeFiles/refgeo_core.dir"
  [ -d "$objdir" ] || { echo "check-deps: $objdir: no refgeo_core objects (build first)" >&2; exit 1; }
  find "$objdir" -name '*.o' | sort | while read -r o; do
    unit=${o#"$objdir"/}
    unit=${unit%.o}
    echo "@ ${unit%.*}"
    nm "$o" | awk '$2 ~ /^[TDBRCVW]$/ {print "D", $3} $1 == "U" {print "U", $2}'
  done | awk '
    $1 == "@" { unit = $2; next }
    $1 == "D" { def[$2] = unit; next }
    { use[++n] = unit " " $2 }
    END { for (i = 1; i <= n; i++) { split(use[i], p, " "); if (p[2] in def && def[p[2]] != p[1]) print p[1], def[p[2]] } }' | sort -u
}

# check reads "from to" edges and prints the violations: an edge to a later
# folder, a folder outside the order, a cycle of units or of folders.
check() { # what
  awk -v what="$1" -v ranks="$RANKS" '
    function folder(u,  p) { n = split(u, p, "/"); return p[1] == "tools" ? "tools" : p[2] }
    # Tarjan: each strongly connected component of more than one node is a cycle
    function visit(v, adj, cnt,   i, w, members) {
      index_of[v] = low[v] = ++counter; stack[++sp] = v; on[v] = 1
      for (i = 1; i <= cnt[v]; i++) {
        w = adj[v, i]
        if (!(w in index_of)) { visit(w, adj, cnt); if (low[w] < low[v]) low[v] = low[w] }
        else if (on[w] && index_of[w] < low[v]) low[v] = index_of[w]
      }
      if (low[v] == index_of[v]) {
        members = ""; size = 0
        do { w = stack[sp--]; on[w] = 0; members = members " " w; size++ } while (w != v)
        if (size > 1) { print what " cycle:" members; bad = 1 }
      }
    }
    BEGIN { n = split(ranks, r, "\n"); for (i = 1; i <= n; i++) { split(r[i], kv, " "); rank[kv[1]] = kv[2] } }
    $1 == "MISSING" { bad = 1; next }
    $1 == $2 { next }
    {
      a = folder($1); b = folder($2)
      if (!(a in rank)) { if (!(a in told)) print "folder " a " (" $1 ") is not in the order of scripts/check-deps.sh"; told[a] = bad = 1; next }
      if (!(b in rank)) { if (!(b in told)) print "folder " b " (" $2 ") is not in the order of scripts/check-deps.sh"; told[b] = bad = 1; next }
      if (rank[b] > rank[a]) { print what ": " $1 " -> " $2 ": " a " may not depend on " b ", which comes after it"; bad = 1 }
      if (!(($1, $2) in seen)) { seen[$1, $2] = 1; unit_adj[$1, ++unit_cnt[$1]] = $2; nodes[$1] = nodes[$2] = 1 }
      if (a != b && !((a, b) in fseen)) { fseen[a, b] = 1; f_adj[a, ++f_cnt[a]] = b; fnodes[a] = fnodes[b] = 1 }
    }
    END {
      for (v in nodes) if (!(v in index_of)) visit(v, unit_adj, unit_cnt)
      delete index_of; delete low; delete on; counter = sp = 0
      for (v in fnodes) if (!(v in index_of)) visit(v, f_adj, f_cnt)
      exit bad
    }'
}

status=0
include_edges | check includes || status=1
if [ -n "$BUILD" ]; then call_edges | check calls || status=1; fi
if [ $status -eq 0 ]; then echo "check-deps: folders in order, no cycles (includes${BUILD:+ and calls})"; fi
exit $status
