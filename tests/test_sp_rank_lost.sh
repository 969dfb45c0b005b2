#!/bin/bash
# test_sp_rank_lost.sh MPIRUN TEST_SP: a rank lost in the middle of a
# sequence-parallel training step ends the job on every rank, in bounded
# time, with a non-zero exit and a line that says what was lost
# (test_sp.c, lose_rank):
#  - rank 1 killed (SIGKILL) between its forward and backward: mpirun names
#    it ("process rank 1 ... exited on signal 9") and stops rank 0, which is
#    waiting in the backward's collectives;
#  - rank 1 alive but stalled: rank 0's collective passes its deadline (20 s
#    in this test), it says so, and its communicator ends the job.
# Each case must end within 60 s (mpirun itself is limited to 120 s).
set -u
mpirun="$1" test_sp="$2"
fail=0
run_case() { # name env-assignment expected-regex
  local name="$1" env="$2" want="$3" out rc start end
  start=$(date +%s)
  out=$(env "$env" timeout 120 "$mpirun" --oversubscribe -np 2 "$test_sp" 2>&1)
  rc=$?
  end=$(date +%s)
  echo "$name: exit $rc after $((end - start)) s"
  printf '%s\n' "$out" | grep -E "$want" | head -2 | sed 's/^/  /'
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then echo "$name: expected a non-zero exit before the 120 s limit"; fail=1; fi
  if [ $((end - start)) -gt 60 ]; then echo "$name: took more than 60 s"; fail=1; fi
  if ! printf '%s\n' "$out" | grep -Eq "$want"; then echo "$name: no line matches /$want/"; printf '%s\n' "$out" | tail -5; fail=1; fi
  if printf '%s\n' "$out" | grep -q "finished a step without its peer"; then echo "$name: a rank finished the step alone"; fail=1; fi
}
run_case killed REFGEO_SP_LOSE_RANK=1 "rank 1 .*exited on signal 9"
run_case stalled REFGEO_SP_STALL_RANK=1 "rank 0: .*did not complete in 20 s"
exit $fail
