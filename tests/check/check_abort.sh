#!/usr/bin/env bash
# SOFTVERBS_CHECK=abort: each misuse of check_test.cpp, run alone, ends
# the process with SIGABRT right after its report.
#   check_abort.sh SOFTVERBS_CHECK_TESTS
set -u
bin=$1
fail=0
for t in ASendQueueOverrunByUnsignaledWorkRequests:sq-overrun ACqSmallerThanWhatItsQpsCanComplete:cq-too-small \
         DestroyingACqWithUnacknowledgedEvents:unacked-events DeregisteringAnMrAWorkRequestStillNames:mr-in-use \
         ForkWithRegisteredMemoryAndNoForkInit:fork-without-fork-init ASingleThreadedCqPolledByTwoThreads:single-thread-cq \
         ABufferWrittenBeforeItsWorkRequestCompleted:buffer-reused; do
  name=${t%%:*} check=${t#*:}
  out=$(SOFTVERBS_CHECK=abort timeout 30 "$bin" --gtest_filter="Check.$name" 2>&1)
  rc=$?
  if [[ $rc == 134 ]] && grep -q "check \[$check\]" <<<"$out" && grep -q "called from softverbs_check_tests" <<<"$out" &&
     grep -q "aborting (SOFTVERBS_CHECK=abort)" <<<"$out"; then
    echo "ok:   $name: aborted at its report ($check)"
  else
    echo "FAIL: $name: status $rc"; echo "$out" | tail -n 15; fail=1
  fi
done
exit $fail
