# timed.sh: sourced by the bench scripts. Runs a command under
# /usr/bin/time -v and reports its peak RSS and wall time against a limit.
#   timed_run LOG cmd args...      stderr of cmd (and time's report) -> LOG
#   timed_report LABEL LOG LIMIT_GIB   prints "LABEL: peak RSS X GiB, wall W";
#                                      returns 1 if X > LIMIT_GIB
timed_run() {
  log=$1
  shift
  /usr/bin/time -v "$@" 2>"$log" || { cat "$log" >&2; return 1; }
}

timed_report() {
  rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$2")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$2")
  rss_gib=$(awk -v k="$rss_kb" 'BEGIN { printf "%.2f", k / 1048576 }')
  echo "$1: peak RSS $rss_gib GiB, wall $wall"
  if awk -v k="$rss_kb" -v l="$3" 'BEGIN { exit !(k / 1048576 > l) }'; then
    echo "$1: FAIL: peak RSS $rss_gib GiB exceeds $3 GiB" >&2
    return 1
  fi
}
