#!/usr/bin/env bash
# A QPN names a QP, and 0, 1 and 0xffffff (the multicast QPN) never do:
# with 254 processes holding the device, the 255th (the last registry slot,
# whose QPNs are 0xff0000..0xffffff) creates and destroys UD QPs until its
# QP indices have gone all the way round, and is never given 0xffffff
# (it was, to its 65536th QP: unicast to it then went to every group member).
# usage: qpn_space.sh <process_limit_tool>
set -u
tool=$1
export SOFTVERBS_DOMAIN=qpns$$
trap 'rm -f /dev/shm/softverbs-qpns$$.v*' EXIT
out=$(timeout 240 "$tool" 254 70000) || { echo "tool failed: $out"; exit 1; }
echo "$out"
grep -q "opened 254 " <<<"$out" || { echo "FAIL: the 254 holders did not all open the device"; exit 1; }
max=$(sed -nE 's/.*max_qpn (0x[0-9a-f]+).*/\1/p' <<<"$out")
given=$(sed -nE 's/.*reserved_qpns_given ([0-9]+).*/\1/p' <<<"$out")
((max >= 0xff0000)) || { echo "FAIL: the parent was not in the last slot (largest QPN $max)"; exit 1; }
((max == 0xfffffe)) || { echo "FAIL: the QP indices did not go round (largest QPN $max)"; exit 1; }
[ "$given" = 0 ] || { echo "FAIL: a reserved QPN was given $given times"; exit 1; }
echo "PASS: the last slot's QPNs went round without 0xffffff"
