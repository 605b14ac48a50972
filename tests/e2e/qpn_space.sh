#!/usr/bin/env bash
# A QPN names a QP, and 0, 1 and 0xffffff (the multicast QPN) never do:
# with 254 processes holding the device, the 255th (the last slot with home
# blocks, whose home QPNs are 0xff0000..0xffffff) creates and destroys UD
# QPs 70000 times. It is never given a reserved number (it was given
# 0xffffff, to its 65536th QP, when QPNs were slot << 16 | index: unicast to
# it then went to every group member), and its numbers stay in its home
# blocks, round-robin over the 8 columns it leases before reusing one
# (shm/name_pool.h; unit NamePool.* has block 0xffff never leased at all).
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
((max >= 0xff0000)) || { echo "FAIL: the parent was not in the last home slot (largest QPN $max)"; exit 1; }
((max == 0xff07ff)) || { echo "FAIL: not round-robin over its 8 home columns (largest QPN $max)"; exit 1; }
[ "$given" = 0 ] || { echo "FAIL: a reserved QPN was given $given times"; exit 1; }
echo "PASS: the last home slot's QPNs went round its home blocks without a reserved number"
