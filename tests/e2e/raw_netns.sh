#!/usr/bin/env bash
# Raw packet QPs across a real link: two network namespaces this test
# creates, joined by a veth pair; a receiver steers frames for its MAC to a
# raw QP, a sender in the other namespace sends them. Frames never leave the
# two namespaces, which are deleted at the end. Skipped (77) without the
# right to create namespaces.
#   raw_netns.sh RAW_ETH_TOOL
set -u
tool=$1
a=sv-raw-a-$$ b=sv-raw-b-$$
ip netns add "$a" 2>/dev/null || { echo "cannot create network namespaces: skipped"; exit 77; }
out=$(mktemp -d)
trap 'ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"' EXIT
ip netns add "$b" || exit 1
ip link add sv-va netns "$a" type veth peer name sv-vb netns "$b" || exit 1
ip -n "$a" link set sv-va up && ip -n "$b" link set sv-vb up || exit 1
mac=$(ip -n "$b" -o link show sv-vb | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
[ -n "$mac" ] || { echo "no MAC for sv-vb"; exit 1; }

ip netns exec "$b" env SOFTVERBS_NETDEV=sv-vb timeout 60 "$tool" recv "$mac" 20 >"$out/recv" 2>&1 &
receiver=$!
for _ in $(seq 100); do grep -q ready "$out/recv" && break; sleep 0.05; done
ip netns exec "$a" env SOFTVERBS_NETDEV=sv-va timeout 30 "$tool" send "$mac" 20 >"$out/send" 2>&1
send_rc=$?
wait $receiver
recv_rc=$?
echo "--- sender: exit $send_rc"; cat "$out/send"
echo "--- receiver: exit $recv_rc"; cat "$out/recv"
[ $send_rc -eq 0 ] && [ $recv_rc -eq 0 ] && grep -q "received 20 frames intact" "$out/recv"
