#!/usr/bin/env bash
# RoCEv2 between two hosts (network namespaces, a veth pair) with the server
# in a registry slot past 299 of its host: 299 idle processes hold the device
# first.
# Slots from 256 have no home blocks (docs/ARCHITECTURE.md, "Names"): the
# server's QPN is in a leased block whose number does not say its slot, so
# its host's receive path must find the owner in the registry's tables
# (shm::qpn_owner); by the old rule (the QPN's first byte) the QPN is slot
# 0's, no process's, and every packet would be dropped.
# Skipped (77) without the right to create namespaces.
#   roce_high_slot.sh PROCESS_LIMIT_TOOL
set -u
tool=$1
a=sv-hs-a-$$ b=sv-hs-b-$$ va=sv-hsa$$ vb=sv-hsb$$
work=$(mktemp -d)
holder=
cleanup() {
  touch "$work/release"
  [ -n "$holder" ] && wait $holder
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.95.0 || exit
ga=$(gid_of "$a" ::ffff:10.95.0.1) gb=$(gid_of "$b" ::ffff:10.95.0.2)
[[ -n $ga && -n $gb ]] || fail "no RoCEv2 GIDs for the veth addresses"
# (ibv_devinfo above took slot 1 and left; the holders take 1..299.)
HOLD_UNTIL_FILE=$work/release ip netns exec "$a" timeout 120 "$tool" 299 >"$work/holders" 2>&1 &
holder=$!
for _ in $(seq 600); do grep -q holding "$work/holders" && break; sleep 0.1; done
grep -q "holding: opened 299 " "$work/holders" || fail "the 299 holders did not open the device: $(cat "$work/holders")"
ip netns exec "$a" timeout 60 ibv_rc_pingpong -g "$ga" -p 18741 -n 500 >"$work/server" 2>&1 &
server=$!
sleep 0.5
ip netns exec "$b" timeout 60 ibv_rc_pingpong -g "$gb" -p 18741 -n 500 10.95.0.1 >"$work/client" 2>&1
crc=$?
wait $server
src=$?
# (The server's QPN as the client heard it: a server killed by its timeout
# never flushed its own lines.)
qpn=$(sed -nE 's/.*remote address:.*QPN (0x[0-9a-f]+).*/\1/p' "$work/client" | head -1)
echo "server's QPN $qpn (its first byte, the old rule's slot: $(( ${qpn:-0} >> 16 ))); exits $src/$crc"
tail -2 "$work/client"
[[ -n $qpn ]] || fail "the client heard no server QPN: $(cat "$work/client")"
(( qpn >> 16 == 0 )) || fail "the server's QPN is not in a block the old rule calls no one's: the test proves nothing"
((src == 0 && crc == 0)) || fail "the RC pair between hosts did not finish: $(cat "$work/server" "$work/client")"
echo "PASS: 500 RC round trips with the server in a slot beyond the home blocks"
