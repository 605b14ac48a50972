#!/usr/bin/env bash
# A process takes a registry slot with home blocks of names (below 256)
# while one is free or its owner gone, before a slot past them: peers send
# RoCEv2 to a process past the home slots by their shared source port, and
# one flow then carries the packets of several processes (shm/registry.cpp,
# Registry::first_claimable). 300 processes open the device and exit; the
# next is given a QPN of a home block (its first byte is its slot), not a
# leased one (first byte 0). Before, processes took slots never used before
# dead ones: after 255 had come and gone on a host, every new one was past
# the home slots, and a new network namespace that found a leftover
# registry of 450 dead slots put its MPI ranks in slots 452 and 453.
# usage: home_slots_first.sh <process_limit_tool>
set -u
tool=$1
export SOFTVERBS_DOMAIN=homeslots$$
trap 'rm -f /dev/shm/softverbs-homeslots$$.v*' EXIT
gone=$(timeout 120 "$tool" 300) || { echo "the 300 processes failed: $gone"; exit 1; }
grep -q "opened 300 " <<<"$gone" || { echo "FAIL: the 300 processes did not all open the device: $gone"; exit 1; }
next=$(timeout 60 "$tool" 1 1) || { echo "the next process failed: $next"; exit 1; }
echo "$next"
qpn=$(sed -nE 's/.*max_qpn (0x[0-9a-f]+).*/\1/p' <<<"$next")
[[ -n $qpn ]] || { echo "FAIL: no QPN in: $next"; exit 1; }
((qpn >> 16 != 0)) || { echo "FAIL: after 300 processes exited, the next took a slot past the home ones (QPN $qpn)"; exit 1; }
echo "PASS: after 300 processes exited, the next took home slot $((qpn >> 16)) (QPN $qpn)"
