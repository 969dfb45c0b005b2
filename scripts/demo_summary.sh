#!/usr/bin/env bash
# The demo's closing summary of a `refgeo run` directory: the refusal carrier
# per checkpoint (geometry/migration.csv), ASR as it is and with the carrier
# ablated (asr/, asr-ablate/), the refusal rate of harmless prompts as they
# are and with the carrier added (asr-xstest/, asr-actadd/), and the verdict
# of `refgeo repro` against Lan et al. 2026's published curve, and last the
# carrier verdict with Lan et al.'s claims one by one (geometry/verdict.txt).
# Parts whose files the run did not write are left out.
#
#   scripts/demo_summary.sh REFGEO RUN_DIR
set -euo pipefail
RG=$1 RUN=$2
cd "$(dirname "$0")/.."

# Prints the named columns of a CSV (by header name), "|"-separated so that
# empty cells survive `IFS='|' read`.
columns() {
  local file=$1
  shift
  awk -F, -v want="$*" 'NR == 1 { n = split(want, w, " "); for (i = 1; i <= NF; i++) c[$i] = i; next }
    { line = ""; for (k = 1; k <= n; k++) line = line (k > 1 ? "|" : "") $(c[w[k]]); print line }' "$file"
}

echo "== summary of $RUN"
if [ -f "$RUN/geometry/migration.csv" ]; then
  echo "refusal carrier per step (the plan: $RUN/geometry/plan.ini):"
  columns "$RUN/geometry/migration.csv" step status best_pos best_layer label bypass null_bypass_p5 induce kl \
    n_admissible layer_lo layer_hi refusal_tokens harmful_train_kept harmful_train_total |
    while IFS="|" read -r step status pos layer label bypass p5 induce kl n lo hi tokens kept total; do
      if [ -z "$layer" ]; then
        echo "  step $step: $status (refusal tokens ${tokens:-none}; $kept of $total harmful train prompts refused)"
      else
        printf '  step %s: %s: pos %s, layer %s (%s, 95%% interval %s-%s); bypass %.3f (null p5 %.3f), induce %.3f, KL %.4f; %s admissible\n' \
          "$step" "$status" "$pos" "$layer" "$label" "$lo" "$hi" "$bypass" "$p5" "$induce" "$kl" "$n"
      fi
    done
fi
# One line per row of a rate table: FILE COUNT_COLUMN RATE_COLUMN [GROUP]
# (asr.csv: successes, asr; refusal_rates.csv: refusals, refusal_rate, and
# only the rows of GROUP).
rate_lines() {
  [ -f "$1" ] || return 0
  local want=${4:-} group_column=attack # asr.csv has no group: any column will do
  [ -z "$want" ] || group_column=group
  columns "$1" step attack "$group_column" n "$2" "$3" wilson95_lo wilson95_hi |
  while IFS="|" read -r step attack group n k rate lo hi; do
    [ -z "$want" ] || [ "$group" = "$want" ] || continue
    printf '  step %s, %s: %s/%s = %.3f [%.3f, %.3f]\n' "$step" "$attack" "$k" "$n" "$rate" "$lo" "$hi"
  done
}
if [ -f "$RUN/asr/asr.csv" ]; then
  echo "HarmBench ASR (Wilson 95%):"
  rate_lines "$RUN/asr/asr.csv" successes asr
  rate_lines "$RUN/asr-ablate/asr.csv" successes asr
fi
if [ -f "$RUN/asr-xstest/refusal_rates.csv" ]; then
  echo "refusal rate of XSTest's safe prompts (Wilson 95%):"
  rate_lines "$RUN/asr-xstest/refusal_rates.csv" refusals refusal_rate safe
  rate_lines "$RUN/asr-actadd/refusal_rates.csv" refusals refusal_rate safe
fi
if [ -f "$RUN/asr/asr.csv" ]; then
  echo "against Lan et al. 2026 (fixed-source R2D2 curve, steps 50-500):"
  set +e
  verdict=$("$RG" repro --published data/published/lan2026_r2d2.csv --measured "$RUN/asr/asr.csv" \
    --measured-attack DirectRequest --attack fixed_source --common-steps 2>&1)
  rc=$?
  set -e
  case $rc in
    0) echo "  reproduced: $(echo "$verdict" | tail -1)" ;;
    1) echo "  not reproduced: $(echo "$verdict" | tail -1)" ;;
    *) echo "  cannot compare: ${verdict#refgeo repro: }" ;;
  esac
fi
if [ -f "$RUN/geometry/verdict.txt" ]; then
  echo "does the refusal carrier migrate? (the plan's sha256: $(cut -c1-12 "$RUN/geometry/plan.sha256")...)"
  cat "$RUN/geometry/verdict.txt"
fi
