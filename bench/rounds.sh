# rounds.sh: sourced by the peer benches (prefill.sh, train_step.sh). These
# machines are shared: their sgemm peak was seen to move between 135 and
# 305 GFLOP/s within ten minutes. A ratio of two medians taken minutes apart
# then measures the drift as much as the code, so the peer benches run
# ROUNDS rounds of refgeo and the peer back to back, alternating which goes
# first, print each round's ratio and report the median of those ratios.
#   median      the median of the numbers on stdin (any whitespace between)
#   first_of R  prints "refgeo" for odd rounds R and "torch" (the peer) for even ones
#   play_round R REFGEO_FN TORCH_FN
#               runs both functions in round R's order; their stdout lands in
#               $round_refgeo and $round_torch
ROUNDS=${ROUNDS:-3}
case $ROUNDS in
  '' | *[!0-9]* | 0) echo "rounds.sh: ROUNDS must be a positive whole number, not '$ROUNDS'" >&2; exit 2 ;;
esac

median() {
  tr -s ' \t' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit 1
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

first_of() {
  if [ $(($1 % 2)) -eq 1 ]; then echo refgeo; else echo torch; fi
}

# shellcheck disable=SC2034 # round_refgeo and round_torch are read by the sourcing script
play_round() {
  if [ "$(first_of "$1")" = refgeo ]; then
    round_refgeo=$($2)
    round_torch=$($3)
  else
    round_torch=$($3)
    round_refgeo=$($2)
  fi
}
